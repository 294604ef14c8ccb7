"""The cluster story of issue 14, as a platform engineer lives it, with a real process for every pod.

``kubectl apply -f examples/file-manager/`` exactly as shipped (the Agent, its ModelConfig and RemoteMCPServer, and
the demo tools server's Deployment and Service) → the real operator (kopf) builds the runtime's Deployment → the
kubelet stand-in runs both Deployments as built → a caller with its own ServiceAccount token asks for a gated delete →
``kubectl gatehouse approve`` as a person, under the chart's admission policy (rendered by helm, enforced by the
emulated API, reported enforcing by the operator) → the tool ran once. Then the Agent is edited (a rollout: sqlite on
its claim, ``Recreate``) while a call waits: the call paused before the rollout is approved after it and runs once.
Then the Agent moves to Postgres (a real server, its URL in a Secret) with two replicas: a call paused on one pod is
decided through the other, and one decided with kubectl runs once too.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent_runtime.contract import wire
from agent_runtime.kube.objects import approval_name
from tests.gatehouse_operator.conftest import OperatorProcess
from tests.support import helm as helm_support
from tests.support.kube_fixtures import Kubectl, wait_for
from tests.support.kube_server import RunningEmulator
from tests.support.kubelet import Kubelet
from tests.support.postgres import find_bin_dir, running_postgres
from tests.support.runtime import ROOT, Rpc, request_ids, state, status_text

# `make soak`: tests/cluster/test_story.py tells this story (and more) on the real control plane in `make test`
pytestmark = [pytest.mark.e2e, pytest.mark.long]

EXAMPLE = ROOT / "examples" / "file-manager"
AGENT = "file-manager"
TA = "gatehouse.dev/v1alpha1/toolapprovals"
POLICY = "gh-gatehouse-toolapproval-decision"
APPROVER = "alice@example.com"  # in group sre, the example Agent's approvers
CLIENT = "chat-client"


def chart_policy() -> list[dict[str, Any]]:
    """The chart's ValidatingAdmissionPolicy and its binding (validationActions [Deny]), rendered by the real helm."""
    return helm_support.admission_policy_documents()


@pytest.fixture
def policy(kube_api: RunningEmulator, kubectl: Kubectl, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The chart's admission policy, installed (objects the operator reads) and enforced (by the emulated API); the
    operator is told its name, as the chart does."""
    docs = chart_policy()
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    kubectl("apply", "--validate=false", "-f", str(path))
    assert kube_api.emulator.add_admission_documents(docs) == 1
    monkeypatch.setenv("GATEHOUSE_ADMISSION_POLICY", POLICY)
    yield


class Story:
    def __init__(self, api: RunningEmulator, kubectl: Kubectl, kubelet: Kubelet, base: Path) -> None:
        self.api, self.kubectl, self.kubelet, self.base = api, kubectl, kubelet, base
        self.caller = api.emulator.add_service_account("default", CLIENT)  # an A2A client in the cluster
        self.approver = kubectl.as_user(api.user_kubeconfig(base, APPROVER, ["sre", "approvers"]))
        self.path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"

    def agent(self) -> dict[str, Any]:
        return json.loads(self.kubectl("get", "agent", AGENT, "-o", "json"))

    def condition(self, type_: str) -> dict[str, Any]:
        return next((c for c in self.agent().get("status", {}).get("conditions", []) if c["type"] == type_), {})

    def rpc(self, url: str | None = None) -> Rpc:
        return Rpc(url or self.kubelet.url_of(AGENT), self.caller)

    def phase(self, request_id: str) -> str:
        obj = self.api.emulator.get_object(TA, "default", approval_name(AGENT, request_id)) or {}
        return str((obj.get("status") or {}).get("phase", ""))

    def approve(self, request_id: str) -> subprocess.CompletedProcess[str]:
        """``kubectl gatehouse approve`` as the approver (kubectl finds the plugin on PATH)."""
        env = {**os.environ, "KUBECONFIG": str(self.approver.kubeconfig), "PATH": self.path}
        return subprocess.run([self.kubectl.binary, "gatehouse", "approve", approval_name(AGENT, request_id)],
                              env=env, capture_output=True, text=True, timeout=120)

    def deleted(self, path: str) -> bool:
        """Whether ``path`` is gone from the tools server's sandbox (seeded by ``demo-tools --seed``)."""
        (tools,) = self.kubelet.wait_ready("file-tools")
        return not (self.kubelet.volume_path(tools.name, "sandbox") / path).exists()

    def runtime_logs(self) -> str:
        return "\n".join(f"--- {p.name} ---\n{self.kubelet.logs(p.name)[-4000:]}" for p in self.kubelet.pods(deployment=AGENT))


def _pause(rpc: Rpc, name: str) -> tuple[dict[str, Any], str]:
    task = rpc.send(f"delete {name}")["task"]
    assert state(task) == "TASK_STATE_INPUT_REQUIRED", task
    (rid,) = request_ids(task)
    return task, rid


def _finished(rpc: Rpc, task: dict[str, Any]) -> dict[str, Any]:
    return wait_for(lambda: (t := rpc.get_task(task["id"])) and state(t) == "TASK_STATE_COMPLETED" and t, timeout=60,
                    what=f"task {task['id']} completed")


def test_apply_the_example_approve_with_kubectl_roll_out_and_move_to_postgres(
    kube_api: RunningEmulator, kubectl: Kubectl, policy: None, operator: OperatorProcess, kubelet: Kubelet, tmp_path: Path
) -> None:
    s = Story(kube_api, kubectl, kubelet, tmp_path)
    # The Agent alone first: Ready means ready, and without its tools server it says why, in the runtime's words.
    for name in ("modelconfig", "mcp-server", "agent"):
        kubectl("apply", "--validate=false", "-f", str(EXAMPLE / f"{name}.yaml"))
    down = wait_for(lambda: (c := s.condition("Ready")).get("reason") == "ToolsUnreachable" and c, timeout=90,
                    what="the Agent not Ready, with the runtime's reason")
    assert down["status"] == "False" and "0/1 replicas available; pod file-manager-" in down["message"], down
    assert "file-tools" in down["message"], down
    kubectl("apply", "--validate=false", "-f", str(EXAMPLE))  # the folder as shipped, its tools server included
    kubelet.wait_ready("file-tools", timeout=60)
    try:
        kubelet.wait_ready(AGENT, timeout=120)
        wait_for(lambda: s.condition("Ready").get("status") == "True", timeout=60, what="the Agent Ready")
    except (TimeoutError, AssertionError):
        print(s.runtime_logs())
        raise
    assert s.condition("AdmissionPolicy").get("status") == "True", s.condition("AdmissionPolicy")
    card = s.rpc().client.get("/.well-known/agent-card.json").json()
    assert card["supportedInterfaces"][0]["url"] == f"http://{AGENT}.default.svc.cluster.local:8080/"

    # A call paused, approved by a person with kubectl: the tool runs once.
    rpc = s.rpc()
    task, rid = _pause(rpc, "old.txt")
    wait_for(lambda: s.phase(rid) == "Pending", timeout=30, what="the ToolApproval Pending")
    approved = s.approve(rid)
    assert approved.returncode == 0, approved.stderr
    assert "Delete of old.txt: deleted" in status_text(_finished(rpc, task))
    assert s.deleted("old.txt")
    wait_for(lambda: s.phase(rid) == "Approved", timeout=30, what="the ToolApproval Approved")

    # A call waits; the Agent is edited (its pods roll: Recreate on the claim); approved after the rollout, it runs once.
    waiting, waiting_id = _pause(rpc, "notes.txt")
    wait_for(lambda: s.phase(waiting_id) == "Pending", timeout=30, what="the second ToolApproval Pending")
    (before,) = kubelet.wait_ready(AGENT)
    kubectl("patch", "agent", AGENT, "--type=merge", "-p", json.dumps({"spec": {"description": "Edited: rolls the pods."}}))
    wait_for(lambda: [p for p in kubelet.pods(deployment=AGENT) if p.name != before.name and p.ready], timeout=120,
             what="the new runtime pod Ready")
    assert before.name not in [p.name for p in kubelet.pods(deployment=AGENT)]
    # The new pod reports itself and the waiting call; the operator's status writes leave both alone.
    wait_for(lambda: s.agent()["status"].get("pendingApprovals") == 1, timeout=60, what="pendingApprovals 1")
    runtime_ready = wait_for(lambda: before.name not in (c := s.condition("RuntimeReady")).get("message", before.name)
                             and c, timeout=60, what="RuntimeReady from the new pod")
    assert runtime_ready["status"] == "True" and runtime_ready["reason"] == "Ready", runtime_ready
    approved = s.approve(waiting_id)
    assert approved.returncode == 0, approved.stderr + s.runtime_logs()
    after = s.rpc()
    assert "Delete of notes.txt: deleted" in status_text(_finished(after, waiting))
    assert s.deleted("notes.txt")
    wait_for(lambda: s.agent()["status"].get("pendingApprovals") == 0, timeout=60, what="pendingApprovals 0")

    # Postgres from a Secret, two replicas: decided through either pod.
    bin_dir = find_bin_dir()
    if bin_dir is None:
        if os.environ.get("CI"):
            pytest.fail("no PostgreSQL binaries (initdb): make postgres-bin installs them")
        pytest.skip("no PostgreSQL binaries (initdb)")
    assert kubelet.network.subnet is not None
    with running_postgres(bin_dir, also_listen=kubelet.gateway, allow_from=str(kubelet.network.subnet)) as pg:
        url = pg.create_database().replace("127.0.0.1", kubelet.gateway)
        secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "agent-db", "namespace": "default"},
                  "data": {"url": base64.b64encode(url.encode()).decode()}}
        (tmp_path / "db.yaml").write_text(yaml.safe_dump(secret))
        kubectl("apply", "--validate=false", "-f", str(tmp_path / "db.yaml"))
        # The in-cluster client decides its own calls over A2A here: a ServiceAccount decides only where named.
        approvers = {"groups": ["sre"], "users": [f"system:serviceaccount:default:{CLIENT}"]}
        kubectl("patch", "agent", AGENT, "--type=merge", "-p", json.dumps({"spec": {
            "state": {"postgres": {"urlSecretRef": {"name": "agent-db", "key": "url"}}}, "deployment": {"replicas": 2},
            "approval": {"approvers": approvers}}}))
        try:
            pods = kubelet.wait_ready(AGENT, replicas=2, timeout=180)
        except TimeoutError:
            print(s.runtime_logs())
            raise
        one, two = (Rpc(f"http://{p.ip}:8080", s.caller) for p in pods)
        task, rid = _pause(one, "report.md")
        done = two.send(data=wire.approve_all(), task=task)["task"]  # the other pod finds the task in Postgres
        assert state(done) == "TASK_STATE_COMPLETED" and "Delete of report.md: deleted" in status_text(done), done
        assert s.deleted("report.md")
        task, rid = _pause(two, "a.txt")
        wait_for(lambda: s.phase(rid) == "Pending", timeout=30, what="the ToolApproval Pending")
        assert s.approve(rid).returncode == 0
        assert "Delete of a.txt: deleted" in status_text(_finished(one, task))
        assert s.deleted("a.txt")
