"""End-to-end: Agents that use other Agents as tools (sub-agents), the real operator against the emulated API server.

A parent's config carries its sub-agents, with the in-cluster URL and the ServiceAccount token file for an Agent of
its namespace and the credentials env var for a remote one; a cycle is refused with the whole cycle named; a child
that appears, changes or vanishes reconciles its parents (found in the index, as for a ModelConfig).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from agent_runtime.contract.translator import AGENT_TOKEN_FILE
from tests.gatehouse_operator.conftest import Kubectl, OperatorProcess, wait_for
from tests.gatehouse_operator.test_e2e import NS, Cluster, _apply_example, _write_manifest
from tests.support.kube_server import RunningEmulator

pytestmark = pytest.mark.e2e

MODEL = "scripted-file-manager"  # examples/file-manager/modelconfig.yaml


@pytest.fixture
def cluster(kube: kubernetes.client.ApiClient) -> Cluster:
    return Cluster(kube)


def _agent(name: str, *tools: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "gatehouse.dev/v1alpha1", "kind": "Agent", "metadata": {"name": name, "namespace": NS},
            "spec": {"modelConfig": MODEL, "tools": list(tools), **spec}}


def _uses(name: str, **agent: Any) -> dict[str, Any]:
    return {"type": "Agent", "agent": {"name": name, **agent}}


def _apply(kubectl: Kubectl, tmp_path: Path, doc: dict[str, Any]) -> None:
    kubectl("apply", "--validate=false", "-f", _write_manifest(tmp_path, doc))


def _config(cluster: Cluster, name: str) -> dict[str, Any]:
    secret = cluster.core.read_namespaced_secret(f"{name}-config", NS)
    return json.loads(base64.b64decode(secret.data["config.json"]))  # type: ignore[no-any-return]


def test_a_parent_with_agent_tools_is_accepted_and_its_config_carries_them(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, cluster: Cluster, tmp_path: Path
) -> None:
    _apply_example(kubectl, "modelconfig")
    cluster.core.create_namespaced_secret(NS, {"metadata": {"name": "search-credentials"},
                                               "data": {"token": base64.b64encode(b"s3cr3t").decode()}})
    _apply(kubectl, tmp_path, _agent("files", description="Reads and writes files.",
                                     access={"delegators": [{"agent": "orchestrator"}]}))
    _apply(kubectl, tmp_path, _agent(
        "orchestrator", _uses("files"),
        _uses("web_search", cardUrl="https://search.example.com/", credentialsSecretRef={"name": "search-credentials"}),
        approval={"rules": [{"tool": "files", "action": "require"}]}))
    cluster.wait_accepted("orchestrator")
    cluster.wait_accepted("files")

    files, search = _config(cluster, "orchestrator")["sub_agents"]
    assert files == {"name": "files", "agent": f"{NS}/files", "card_url": f"http://files.{NS}.svc.cluster.local:8080/",
                     "description": "Reads and writes files.", "token": None, "token_file": AGENT_TOKEN_FILE,
                     "timeout_seconds": 300.0}
    assert search["token"] == {"env": "GATEHOUSE_AGENT_WEB_SEARCH_TOKEN", "secret": "search-credentials", "key": "token"}
    assert _config(cluster, "files")["access"]["delegators"] == [f"system:serviceaccount:{NS}:orchestrator"]
    # The parent's card URL for the child is the URL the child's runtime announces.
    child_command = cluster.deployment("files")["spec"]["template"]["spec"]["containers"][0]["command"]  # type: ignore[index]
    assert child_command[child_command.index("--public-url") + 1] == files["card_url"]

    pod = cluster.deployment("orchestrator")["spec"]["template"]["spec"]  # type: ignore[index]
    # The token the parent presents: projected for agents (their audience, 10 minutes), not the API server's.
    (projected,) = [v["projected"] for v in pod["volumes"] if v["name"] == "a2a-token"]
    (token,) = [source["service_account_token"] for source in projected["sources"]]
    assert (token["audience"], token["expiration_seconds"], token["path"]) == ("gatehouse.dev/a2a", 600, "token")
    (mount,) = [m for m in pod["containers"][0]["volume_mounts"] if m["name"] == "a2a-token"]
    assert (mount["mount_path"], mount["read_only"]) == ("/var/run/secrets/gatehouse.dev/a2a", True)
    env = {e["name"]: e["value_from"]["secret_key_ref"] for e in pod["containers"][0]["env"]
           if e["value_from"] and e["value_from"]["secret_key_ref"]}
    assert env["GATEHOUSE_AGENT_WEB_SEARCH_TOKEN"]["name"] == "search-credentials"
    assert cluster.deployment("files")["spec"]["template"]["spec"]["automount_service_account_token"] is None  # type: ignore[index]

    # The child changes: its parent is reconciled (the description it tells its model is the child's).
    kubectl("patch", "agent", "files", "--type=merge", "-p", json.dumps({"spec": {"description": "Files, v2."}}))
    wait_for(lambda: _config(cluster, "orchestrator")["sub_agents"][0]["description"] == "Files, v2.",
             what="the parent's config to follow the child's description")


def test_a_cycle_is_refused_naming_it_and_accepted_once_broken(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, cluster: Cluster, tmp_path: Path
) -> None:
    _apply_example(kubectl, "modelconfig")
    _apply(kubectl, tmp_path, _agent("alpha", _uses("beta")))
    _apply(kubectl, tmp_path, _agent("beta", _uses("alpha")))
    cycle = "the Agent tools form a cycle: {} → {} → {}; a request would go round it for ever"
    alpha = wait_for(lambda: (c := cluster.condition("alpha", "Accepted")).get("message", "").startswith(
        "spec.tools[0].agent.name: the Agent tools") and c, what="alpha refused for the cycle")
    assert (alpha["status"], alpha["reason"]) == ("False", "InvalidSpec")
    assert alpha["message"] == "spec.tools[0].agent.name: " + cycle.format("alpha", "beta", "alpha")
    beta = cluster.wait_accepted("beta", "False")
    assert beta["message"] == "spec.tools[0].agent.name: " + cycle.format("beta", "alpha", "beta")
    assert cluster.deployment("alpha") is None and cluster.deployment("beta") is None
    events = json.loads(kubectl("get", "events", "-o", "json"))["items"]
    assert any(e["reason"] == "InvalidSpec" and "form a cycle" in e["message"] for e in events)

    _apply(kubectl, tmp_path, _agent("beta"))  # beta no longer uses alpha: both are accepted, alpha without a trigger of its own
    cluster.wait_accepted("beta")
    cluster.wait_accepted("alpha")
    assert [s["name"] for s in _config(cluster, "alpha")["sub_agents"]] == ["beta"]


def test_a_child_that_appears_later_makes_its_parent_accepted_and_its_deletion_undoes_it(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, cluster: Cluster, tmp_path: Path
) -> None:
    _apply_example(kubectl, "modelconfig")
    _apply(kubectl, tmp_path, _agent("orchestrator", _uses("files")))
    missing = cluster.wait_accepted("orchestrator", "False")
    assert (missing["reason"], missing["message"]) == (
        "DependencyMissing", f"spec.tools[0].agent.name: Agent 'files' not found in namespace '{NS}'")

    _apply(kubectl, tmp_path, _agent("files"))  # no other action: the child's arrival re-reconciles its parent
    cluster.wait_accepted("orchestrator")
    assert _config(cluster, "orchestrator")["sub_agents"][0]["agent"] == f"{NS}/files"

    kubectl("delete", "agent", "files", "--wait=true", "--timeout=20s")
    gone = cluster.wait_accepted("orchestrator", "False")
    assert gone["message"] == f"spec.tools[0].agent.name: Agent 'files' not found in namespace '{NS}'"
    assert cluster.deployment("orchestrator") is not None  # the last good children keep running


def test_an_example_agent_is_unaffected_by_agents_it_does_not_use(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, cluster: Cluster, tmp_path: Path
) -> None:
    """An Agent's spec change reconciles only the Agents that use it as a tool, not every Agent of the namespace."""
    _apply_example(kubectl)
    _apply(kubectl, tmp_path, _agent("files"))
    cluster.wait_accepted("file-manager")
    cluster.wait_accepted("files")
    before = cluster.agent("file-manager")["metadata"]["resourceVersion"]  # type: ignore[index]
    mark = kube_api.emulator.request_count
    kubectl("patch", "agent", "files", "--type=merge", "-p", json.dumps({"spec": {"description": "changed"}}))
    wait_for(lambda: _config(cluster, "files")["description"] == "changed", what="files reconciled")
    agent_path = f"/apis/gatehouse.dev/v1alpha1/namespaces/{NS}/agents/file-manager"
    assert not [r for r in kube_api.emulator.requests_since(mark) if str(r.url.path) == agent_path]
    assert cluster.agent("file-manager")["metadata"]["resourceVersion"] == before  # type: ignore[index]
