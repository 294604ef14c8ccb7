"""An Agent's runtime on the real control plane, with the operator: tokens between agents, and faults.

The Agent is ``examples/file-manager`` with the operator and its runtime run locally (tests/support/cluster/
local_agent.py), the runtime with only a token of the ServiceAccount the operator made for it.

**Tokens between agents.** An Agent calls the Agents it uses as tools with a token of its ServiceAccount projected
for the audience ``gatehouse.dev/a2a`` (10 minutes), and a runtime accepts Kubernetes tokens for that audience only
(TokenReview with audiences). The API server's own token is refused by a runtime, and never sent by a parent. A
caller's token here is what the kubelet would write for the parent's projection: a TokenRequest for the parent's
ServiceAccount with the same audience and expiry.

**Faults.** The real kube-apiserver, and separately etcd, killed (SIGKILL) and started again mid-story: the
operator, the runtime's ToolApproval mirror and its decision watcher recover by themselves, nothing is lost and
nothing runs twice. The story each time: a delete waits for approval (its ToolApproval Pending); the component is
killed; while it is down a second delete is asked for (the runtime pauses it in its own database, the mirror cannot
write its ToolApproval yet); the component starts again; the second ToolApproval appears, alice approves both with
``kubectl gatehouse approve`` (the watcher must count her votes and the runtime acknowledge them), each file is
deleted exactly once, and the operator reconciles a new spec. The A2A caller there uses a token of the runtime's
own token file: a Kubernetes token needs a TokenReview, which the API server cannot answer while it is down.

The token tests come first: a fault test leaves the API server started again.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from agent_runtime.contract.agent_config import SubAgentConfig
from agent_runtime.contract.translator import AGENT_TOKEN_AUDIENCE, AGENT_TOKEN_FILE, AGENT_TOKEN_SECONDS
from agent_runtime.delegation.client import SubAgentUnreachable, _Bearer
from agent_runtime.kube.objects import approval_name
from tests.support.cluster import Cluster
from tests.support.cluster.chart import Release
from tests.support.cluster.local_agent import AGENT, LocalAgent, local_agent, wait
from tests.support.runtime import Rpc, request_ids, state

pytestmark = pytest.mark.e2e

NS = "agent-runtime"
PARENT = "orchestrator"  # an Agent using file-manager as a tool
CALLER = "ops-client"  # the A2A caller of the fault tests, by the runtime's token file
TOKEN = "faults-caller-token-0123456789abcdef"


@pytest.fixture(scope="module")
def agent(cluster: Cluster, chart: Release, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalAgent]:
    base = tmp_path_factory.mktemp("agent-runtime")
    tokens = base / "tokens"
    tokens.write_text(f"{CALLER}:{TOKEN}\n")
    tokens.chmod(0o600)
    parent = f"system:serviceaccount:{NS}:{PARENT}"
    with local_agent(cluster, chart, base, NS, approvers={"users": [parent], "groups": ["sre"]},
                     serve_args=["--api-token-file", str(tokens)]) as running:
        yield running


# -- tokens between agents --------------------------------------------------------------------------------------

def _token(cluster: Cluster, account: str, audience: str | None) -> str:
    config = yaml.safe_load(cluster.service_account(NS, account, audience=audience, duration=f"{AGENT_TOKEN_SECONDS}s")
                            .read_text())
    return str(config["users"][0]["user"]["token"])


def _status(agent: LocalAgent, token: str) -> int:
    reply = httpx.post(agent.runtime.url + "/", headers={"A2A-Version": "1.0", "Authorization": f"Bearer {token}"},
                       json={"jsonrpc": "2.0", "id": "1", "method": "GetTask", "params": {"id": "none"}}, timeout=30)
    return reply.status_code


def test_a_token_for_agents_is_the_callers_service_account(cluster: Cluster, agent: LocalAgent) -> None:
    agent_token = _token(cluster, PARENT, AGENT_TOKEN_AUDIENCE)
    (agent.tools.sandbox / "t.txt").write_text("x")
    task = Rpc(agent.runtime.url, agent_token).send("delete t.txt")["task"]
    assert state(task) == "TASK_STATE_INPUT_REQUIRED"
    (rid,) = request_ids(task)
    approval = wait("its ToolApproval", lambda: agent.approval(approval_name("file-manager", rid)))
    assert approval["spec"]["requestedBy"] == f"system:serviceaccount:{NS}:{PARENT}"


def test_the_api_servers_token_and_another_audience_are_refused(cluster: Cluster, agent: LocalAgent) -> None:
    assert _status(agent, _token(cluster, PARENT, AGENT_TOKEN_AUDIENCE)) == 200
    assert _status(agent, _token(cluster, PARENT, None)) == 401  # the API server's audience: not an agent token
    assert _status(agent, _token(cluster, PARENT, "https://vault.example.com")) == 401
    assert _status(agent, "not-a-token") == 401


def test_a_parent_never_sends_the_api_servers_token(cluster: Cluster, tmp_path: Path) -> None:
    path = tmp_path / "token"
    config = SubAgentConfig(name="file-manager", agent=f"{NS}/file-manager", card_url="http://unused/",
                            token_file=str(path))
    request = httpx.Request("POST", "http://unused/")
    path.write_text(_token(cluster, PARENT, None))  # what the kubelet mounts at the ServiceAccount token's path
    with pytest.raises(SubAgentUnreachable, match="an API-server token is never sent to another agent"):
        next(_Bearer(config, {}).auth_flow(request))
    path.write_text(_token(cluster, PARENT, AGENT_TOKEN_AUDIENCE))
    assert next(_Bearer(config, {}).auth_flow(request)).headers["Authorization"].startswith("Bearer ey")


def test_the_operator_projects_the_token_for_agents_into_a_parents_pod(cluster: Cluster, agent: LocalAgent) -> None:
    """A parent Agent's pod, made by the real ReplicaSet controller from the operator's Deployment and admitted by the
    API server in a namespace enforcing Pod Security ``restricted``, carries the projection."""
    labelled = cluster.kubectl("label", "--overwrite", "namespace", NS, "pod-security.kubernetes.io/enforce=restricted")
    assert labelled.returncode == 0, labelled.stderr
    parent = {"apiVersion": "gatehouse.dev/v1alpha1", "kind": "Agent", "metadata": {"name": PARENT, "namespace": NS},
              "spec": {"modelConfig": "scripted-file-manager",
                       "tools": [{"type": "Agent", "agent": {"name": "file-manager"}}]}}
    applied = cluster.kubectl("apply", "-f", "-", stdin=json.dumps(parent))
    assert applied.returncode == 0, applied.stderr

    def pod() -> dict | None:  # type: ignore[type-arg]
        pods = json.loads(cluster.kubectl("get", "pods", "-n", NS, "-l", f"app.kubernetes.io/instance={PARENT}",
                                          "-o", "json").stdout)["items"]
        return pods[0] if pods else None

    spec = wait("the parent's pod", pod)["spec"]
    (volume,) = [v for v in spec["volumes"] if v["name"] == "a2a-token"]
    assert volume["projected"]["sources"] == [{"serviceAccountToken": {
        "audience": AGENT_TOKEN_AUDIENCE, "expirationSeconds": AGENT_TOKEN_SECONDS, "path": "token"}}]
    (mount,) = [m for m in spec["containers"][0]["volumeMounts"] if m["name"] == "a2a-token"]
    assert f"{mount['mountPath']}/token" == AGENT_TOKEN_FILE


# -- faults ---------------------------------------------------------------------------------------------------

def _gated(agent: LocalAgent, rpc: Rpc, file: str) -> tuple[dict[str, Any], str]:
    (agent.tools.sandbox / file).write_text("x")
    task = rpc.send(f"delete {file}")["task"]
    assert state(task) == "TASK_STATE_INPUT_REQUIRED", task
    (rid,) = request_ids(task)
    return task, approval_name(AGENT, rid)


def _phase(agent: LocalAgent, name: str) -> str | None:
    return agent.approval(name).get("status", {}).get("phase")


def _approve(agent: LocalAgent, *names: str) -> None:
    """alice approves each of ``names`` with ``kubectl gatehouse approve``, side by side (each waits for the runtime
    to acknowledge her vote)."""
    with ThreadPoolExecutor(len(names)) as pool:
        votes = list(pool.map(lambda name: agent.gatehouse("alice", "approve", name, "--wait", "60s"), names))
    for name, voted in zip(names, votes, strict=True):
        assert voted.returncode == 0, voted.stdout + voted.stderr
        assert f'toolapproval "{name}" approved' in voted.stdout, voted.stdout  # the runtime acknowledged the vote


def _operator_reconciles(agent: LocalAgent, description: str) -> None:
    patched = agent.cluster.kubectl("patch", "agent", AGENT, "-n", NS, "--type=merge",
                                    "-p", json.dumps({"spec": {"description": description}}))
    assert patched.returncode == 0, patched.stderr

    def observed() -> bool:
        body = agent.agent()
        return bool(body) and body.get("status", {}).get("observedGeneration") == body["metadata"]["generation"]

    wait("the operator reconciling the changed spec", observed, timeout=90)


def _story(agent: LocalAgent, component: str, first: str, second: str) -> float:
    """The story around killing ``component``; returns the seconds its restart took."""
    rpc = Rpc(agent.runtime.url, TOKEN)
    t0 = time.monotonic()

    def mark(what: str) -> None:
        print(f"  {time.monotonic() - t0:5.1f} s  {what}", file=sys.stderr)

    task_a, name_a = _gated(agent, rpc, first)
    wait(f"{name_a} Pending", lambda: _phase(agent, name_a) == "Pending")

    agent.cluster.kill(component)
    task_b, name_b = _gated(agent, rpc, second)  # decided only after the restart
    time.sleep(1)  # the mirror and the watcher meet the outage (refused connections, or errors from etcd)
    restarted = agent.cluster.restart(component)
    mark("restarted")

    wait(f"{name_b} written by the mirror once the API is back", lambda: _phase(agent, name_b) == "Pending", timeout=90)
    mark("second ToolApproval written")
    assert _phase(agent, name_a) == "Pending"
    _approve(agent, name_a, name_b)
    mark("approved")
    for task, name, file in ((task_a, name_a, first), (task_b, name_b, second)):
        done = wait(f"{file} deleted", lambda t=task: state(rpc.get_task(t["id"])) == "TASK_STATE_COMPLETED", timeout=90)
        assert done
        wait(f"{name} Approved", lambda n=name: _phase(agent, n) == "Approved")
        assert not (agent.tools.sandbox / file).exists()
    mark("tasks done")
    _operator_reconciles(agent, f"after {component} restarted")
    mark("operator reconciled")
    # Nothing ran twice: neither a vote seen again when the watcher listed anew, nor a retried write.
    time.sleep(1)
    for file in (first, second):
        assert len(agent.tools.executions("delete_file", file)) == 1, agent.tools.executions("delete_file")
    assert agent.runtime.proc is not None and agent.runtime.proc.poll() is None
    return restarted


def test_the_api_server_killed_and_started_again(agent: LocalAgent, capsys: pytest.CaptureFixture[str]) -> None:
    took = _story(agent, "kube-apiserver", "a1.txt", "a2.txt")
    with capsys.disabled():
        print(f"\nkube-apiserver started again and ready in {took:.1f} s")


def test_etcd_killed_and_started_again(agent: LocalAgent, capsys: pytest.CaptureFixture[str]) -> None:
    took = _story(agent, "etcd", "e1.txt", "e2.txt")
    with capsys.disabled():
        print(f"\netcd started again, the API server ready in {took:.1f} s")
