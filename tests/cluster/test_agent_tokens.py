"""Tokens between agents on the real control plane: an Agent calls the Agents it uses as tools with a token of its
ServiceAccount projected for the audience ``gatehouse.dev/a2a`` (10 minutes), and a runtime accepts Kubernetes
tokens for that audience only (TokenReview with audiences). The API server's own token is refused by a runtime, and
never sent by a parent.

The runtime is ``examples/file-manager`` run locally with its ServiceAccount's token (tests/support/cluster/
local_agent.py); a caller's token is what the kubelet would write for the parent's projection: a TokenRequest for
the parent's ServiceAccount with the same audience and expiry.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from agent_runtime.agent_config import SubAgentConfig
from agent_runtime.delegation.client import SubAgentUnreachable, _Bearer
from agent_runtime.kube.objects import approval_name
from agent_runtime.translator import AGENT_TOKEN_AUDIENCE, AGENT_TOKEN_FILE, AGENT_TOKEN_SECONDS
from tests.support.cluster import Cluster
from tests.support.cluster.chart import Release
from tests.support.cluster.local_agent import LocalAgent, local_agent, wait
from tests.support.runtime import Rpc, request_ids, state

pytestmark = pytest.mark.e2e

NS = "a2a-tokens"
PARENT = "orchestrator"


def _token(cluster: Cluster, account: str, audience: str | None) -> str:
    config = yaml.safe_load(cluster.service_account(NS, account, audience=audience, duration=f"{AGENT_TOKEN_SECONDS}s")
                            .read_text())
    return str(config["users"][0]["user"]["token"])


@pytest.fixture(scope="module")
def agent(cluster: Cluster, chart: Release, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalAgent]:
    parent = f"system:serviceaccount:{NS}:{PARENT}"
    with local_agent(cluster, chart, tmp_path_factory.mktemp("tokens"), NS,
                     approvers={"users": [parent], "groups": ["sre"]}) as running:
        yield running


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
