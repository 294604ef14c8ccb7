"""The whole path in one process tree: the real operator renders the example Agent, the stand-in runs what it built.

kubectl applies the example (its RemoteMCPServer pointed at a demo-tools Deployment by Service name); the operator
(kopf, in a thread) creates the runtime's Deployment; the stand-in runs ``gatehouse-runtime serve`` exactly as built
-- its config from the Secret volume, state in the emptyDir, the in-cluster ServiceAccount -- and writes the
Deployment's status, from which the operator reports the Agent Ready. Then a caller with its own ServiceAccount token
(checked by the runtime with a TokenReview) asks for a gated delete, the runtime records the ToolApproval in the API,
and approving it runs the tool in the demo-tools pod.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from agent_runtime.contract import wire
from agent_runtime.kube.objects import approval_name
from tests.gatehouse_operator.conftest import EXAMPLE, OperatorProcess
from tests.kubelet.cluster import GATEHOUSE, Cluster, container, deployment, service
from tests.support.kube_fixtures import Kubectl, wait_for
from tests.support.kube_server import RunningEmulator
from tests.support.kubelet import Kubelet
from tests.support.runtime import Rpc, request_ids, state, status_text

pytestmark = pytest.mark.e2e

TA = "gatehouse.dev/v1alpha1/toolapprovals"
MCP_URL = "http://file-tools.default.svc.cluster.local:8080/mcp"


def _tools() -> dict[str, object]:
    command = ["gatehouse", "demo-tools", "--host", "0.0.0.0", "--port", "8080", "--sandbox", "/sandbox",
               "--journal", "/journal/calls.jsonl"]
    tools = container("tools", command, image=GATEHOUSE, port=8080, mounts=[("sandbox", "/sandbox"), ("journal", "/journal")],
                      readinessProbe={"tcpSocket": {"port": "http"}})
    return deployment("file-tools", [tools], volumes=[{"name": "sandbox", "emptyDir": {}}, {"name": "journal", "emptyDir": {}}])


def _agent_condition(kubectl: Kubectl, type_: str) -> str:
    agent = json.loads(kubectl("get", "agent", "file-manager", "-o", "json"))
    return next((c["status"] for c in agent.get("status", {}).get("conditions", []) if c["type"] == type_), "")


def test_the_operator_s_deployment_runs_as_built_and_gates_a_tool_call(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, kubelet: Kubelet, tmp_path: Path
) -> None:
    cluster = Cluster(kube_api)
    cluster.create(_tools(), service("file-tools"))
    for name in ("modelconfig", "mcp-server", "agent"):
        doc = yaml.safe_load((EXAMPLE / f"{name}.yaml").read_text())
        if doc["kind"] == "RemoteMCPServer":
            doc["spec"]["url"] = MCP_URL
        if doc["kind"] == "Agent":  # the in-cluster caller decides its own call: a ServiceAccount only where named
            doc["spec"]["approval"]["approvers"] = {"users": ["system:serviceaccount:default:caller"]}
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(doc))
        kubectl("apply", "--validate=false", "-f", str(tmp_path / f"{name}.yaml"))

    (tools,) = kubelet.wait_ready("file-tools")
    try:
        (runtime,) = kubelet.wait_ready("file-manager", timeout=90)
    except TimeoutError:
        for pod in kubelet.pods(deployment="file-manager"):
            print(f"--- {pod.name} ---\n{kubelet.logs(pod.name)[-6000:]}")  # shown with the failure
        raise
    built = json.loads(kubectl("get", "deployment", "file-manager", "-o", "json"))
    (spec,) = built["spec"]["template"]["spec"]["containers"]
    assert spec["image"] == GATEHOUSE and spec["command"][0] == "gatehouse-runtime"  # run as built: nothing rewritten
    wait_for(lambda: _agent_condition(kubectl, "Ready") == "True", timeout=30, what="the Agent Ready (from the Deployment)")

    sandbox = kubelet.volume_path(tools.name, "sandbox")
    (sandbox / "old.txt").write_text("bye")
    caller = kube_api.emulator.add_service_account("default", "caller")
    rpc = Rpc(kubelet.url_of("file-manager"), caller)
    task = rpc.send("delete old.txt")["task"]
    assert state(task) == "TASK_STATE_INPUT_REQUIRED"
    (rid,) = request_ids(task)
    approval = wait_for(lambda: kube_api.emulator.get_object(TA, "default", approval_name("file-manager", rid)),
                        what="the ToolApproval the runtime wrote")
    assert approval["spec"]["tool"] == "delete_file"

    done = rpc.send(data=wire.approve_all(), task=task)["task"]
    assert state(done) == "TASK_STATE_COMPLETED" and "Delete of old.txt: deleted" in status_text(done)
    assert not (sandbox / "old.txt").exists()
    calls = [json.loads(line) for line in (kubelet.volume_path(tools.name, "journal") / "calls.jsonl").read_text().splitlines()]
    assert [(c["tool"], c["args"]) for c in calls] == [("delete_file", {"path": "old.txt"})]
    wait_for(lambda: ((kube_api.emulator.get_object(TA, "default", approval_name("file-manager", rid)) or {})
                      .get("status") or {}).get("phase") == "Approved", what="the ToolApproval Approved")

    users = {u.username for r in kube_api.emulator.requests_since(0)
             if (u := kube_api.emulator.identities.authenticate(r.headers.get("Authorization"))) is not None}
    assert "system:serviceaccount:default:file-manager" in users  # the runtime used its in-cluster identity
    assert runtime.ip in kubelet.endpoints("file-manager")
