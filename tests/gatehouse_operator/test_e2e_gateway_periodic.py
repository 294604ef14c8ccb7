"""End-to-end: what the operator does for an MCPGateway beyond its own handlers, as for an Agent (issue 38's operator
gaps), with the real operator (kopf run) against the emulated API server.

- the periodic resync puts back a child nobody watches (the Service), and the binding clean-up does not ask for an
  Agent of the gateway's name (the gateway is in kopf's index);
- the periodic Secret check rolls the pods when the gateway's token Secret is edited;
- the runtime's own readiness (``RuntimeReady``) shows in ``Ready`` at once;
- deleting the gateway revokes its runtime's TokenReview right at once;
- switching its state backend is held while it holds calls (a Pending ToolApproval naming it in ``spec.gatewayRef``),
  and goes ahead by itself once its runtime counts none;
- an Agent and an MCPGateway of one name: the one there first learns at once that its name is taken, and that it is
  free again.

The emulator runs no runtime: the test plays its part (the ToolApproval, ``status.pendingApprovals``, ``RuntimeReady``),
as the gateway's kube mirror does.
"""

from __future__ import annotations

import base64
import copy
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml

from gatehouse_operator.builders import SECRETS_HASH_ANNOTATION
from gatehouse_operator.state_switch import FORCE_ANNOTATION
from tests.gatehouse_operator.conftest import EXAMPLE, Kubectl, OperatorProcess, tokenreview_subjects, wait_for
from tests.gatehouse_operator.test_e2e import NS, Cluster, _write_manifest
from tests.support.kube_server import RunningEmulator

pytestmark = pytest.mark.e2e

GATEWAY = EXAMPLE.parent / "gateway" / "gateway.yaml"
NAME = "files-gate"
GROUP, VERSION, PLURAL = "gatehouse.dev", "v1alpha1", "mcpgateways"


@pytest.fixture
def cluster(kube: kubernetes.client.ApiClient) -> Cluster:
    return Cluster(kube)


def _gateway(cluster: Cluster) -> dict[str, Any]:
    found: dict[str, Any] = cluster.custom.get_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, NAME)
    return found


def _condition(cluster: Cluster, type_: str) -> dict[str, Any]:
    return next((c for c in (_gateway(cluster).get("status") or {}).get("conditions", []) if c["type"] == type_), {})


def _apply_gateway(kubectl: Kubectl, tmp_path: Path, **spec: Any) -> None:
    doc: dict[str, Any] = yaml.safe_load(GATEWAY.read_text())
    doc["spec"].update(copy.deepcopy(spec))
    kubectl("apply", "--validate=false", "-f", str(EXAMPLE / "mcp-server.yaml"))
    kubectl("apply", "--validate=false", "-f", _write_manifest(tmp_path, doc))


def _accepted(cluster: Cluster, status: str = "True") -> dict[str, Any]:
    return wait_for(lambda: _condition(cluster, "Accepted").get("status") == status and _condition(cluster, "Accepted"),
                    what=f"the MCPGateway Accepted={status}")


def _service(cluster: Cluster) -> bool:
    try:
        cluster.core.read_namespaced_service(NAME, NS)
    except kubernetes.client.ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def test_a_gateway_is_resynced_and_the_binding_clean_up_knows_it(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, cluster: Cluster, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _apply_gateway(kubectl, tmp_path)
    _accepted(cluster)
    operator.stop()
    monkeypatch.setenv("GATEHOUSE_RESYNC_SECONDS", "1")
    mark = kube_api.emulator.request_count
    operator.start()
    wait_for(lambda: _service(cluster) and _condition(cluster, "Accepted").get("status") == "True",
             what="the operator back")

    # Services are not watched: only a resync of the gateway brings one deleted by hand back.
    cluster.core.delete_namespaced_service(NAME, NS)
    wait_for(lambda: _service(cluster), timeout=10, what="the Service made again by a resync")

    # Several clean-ups of the TokenReview binding (one a resync period) ran meanwhile: the gateway's subject is kept,
    # without a GET of an Agent named like it (its MCPGateway is in kopf's index).
    wait_for(lambda: len([r for r in kube_api.emulator.requests_since(mark) if r.resource is not None
                          and r.resource.plural == "clusterrolebindings" and r.method.value == "GET"]) >= 2,
             what="two clean-ups of the TokenReview binding")
    assert (NS, NAME) in tokenreview_subjects(kube_api)
    asked = [str(r.url.path) for r in kube_api.emulator.requests_since(mark)
             if r.resource is not None and r.resource.plural == "agents" and r.name == NAME]
    assert asked == [], asked


@pytest.mark.secret_check("1s")
def test_a_gateways_edited_token_secret_rolls_its_pods(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, cluster: Cluster, tmp_path: Path
) -> None:
    _apply_gateway(kubectl, tmp_path)
    _accepted(cluster)

    def secrets_hash() -> str:
        deployment = wait_for(lambda: cluster.deployment(NAME), what="the Deployment")
        return str(deployment["spec"]["template"]["metadata"]["annotations"][SECRETS_HASH_ANNOTATION])

    first = secrets_hash()
    token = base64.b64encode(b"files-gate-admin:rotated-by-hand\n").decode()
    cluster.core.patch_namespaced_secret(f"{NAME}-access", NS, {"data": {"tokens": token}})
    wait_for(lambda: secrets_hash() != first, timeout=10, what="the pods rolled by the Secret check")


def test_a_gateways_runtime_readiness_shows_in_ready_at_once(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, cluster: Cluster, tmp_path: Path
) -> None:
    _apply_gateway(kubectl, tmp_path)
    _accepted(cluster)
    # What the gateway's runtime writes when its upstream does not answer: its own condition, beside the operator's.
    conditions = _gateway(cluster)["status"]["conditions"] + [{
        "type": "RuntimeReady", "status": "False", "reason": "UpstreamUnreachable",
        "message": "file-tools did not answer", "lastTransitionTime": "2026-11-27T08:00:00Z"}]
    cluster.custom.patch_namespaced_custom_object_status(GROUP, VERSION, NS, PLURAL, NAME,
                                                         {"status": {"conditions": conditions}})
    ready = wait_for(lambda: _condition(cluster, "Ready").get("reason") == "UpstreamUnreachable"
                     and _condition(cluster, "Ready"), timeout=10, what="Ready with the runtime's reason")
    assert ready["status"] == "False" and "file-tools did not answer" in ready["message"]


def test_deleting_a_gateway_revokes_its_tokenreview_right_at_once(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, cluster: Cluster, tmp_path: Path
) -> None:
    _apply_gateway(kubectl, tmp_path)
    _accepted(cluster)
    wait_for(lambda: (NS, NAME) in tokenreview_subjects(kube_api), what="the gateway's runtime a subject")
    kubectl("delete", "mcpgateway", NAME)
    wait_for(lambda: (NS, NAME) not in tokenreview_subjects(kube_api), timeout=10, what="its subject revoked")


def _store(cluster: Cluster) -> str:
    pod = (cluster.deployment(NAME) or {})["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    if any(e["name"] == "GATEHOUSE_DATABASE_URL" for e in container["env"] or []):
        return "postgres"
    return "sqlite" if any(v["name"] == "state" and v["persistent_volume_claim"] for v in pod["volumes"]) else "other"


def _count(cluster: Cluster, count: int) -> None:
    cluster.custom.patch_namespaced_custom_object_status(GROUP, VERSION, NS, PLURAL, NAME,
                                                         {"status": {"pendingApprovals": count}})


def test_a_gateways_state_switch_is_held_while_it_holds_calls_then_goes_ahead(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, cluster: Cluster, tmp_path: Path
) -> None:
    _apply_gateway(kubectl, tmp_path)
    _accepted(cluster)
    assert _store(cluster) == "sqlite"
    # What the gateway's mirror writes for one held call: its ToolApproval (spec.gatewayRef), Pending, and the count.
    approval = {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "ToolApproval",
        "metadata": {"name": f"{NAME}-1", "namespace": NS, "labels": {"gatehouse.dev/gateway": NAME}},
        "spec": {"gatewayRef": NAME, "requestId": "apr-1", "contextId": "mcp-session-1", "taskId": "held-1",
                 "tool": "delete_file", "server": "file-tools", "args": {"path": "/data/a.txt"}},
    }
    cluster.custom.create_namespaced_custom_object(GROUP, VERSION, NS, "toolapprovals", approval)
    cluster.custom.patch_namespaced_custom_object_status(GROUP, VERSION, NS, "toolapprovals", f"{NAME}-1",
                                                         {"status": {"phase": "Pending"}})
    _count(cluster, 1)
    url = base64.b64encode(b"postgresql+asyncpg://gatehouse:pw@db:5432/gatehouse").decode()
    cluster.core.create_namespaced_secret(NS, {"metadata": {"name": "gate-db"}, "data": {"url": url}})
    _apply_gateway(kubectl, tmp_path, state={"postgres": {"urlSecretRef": {"name": "gate-db"}}})

    held = _accepted(cluster, "False")
    assert held["reason"] == "StateSwitchHeld", held
    assert "1 pending request" in held["message"]
    assert f"kubectl get toolapprovals -n {NS} -l gatehouse.dev/gateway={NAME}" in held["message"]
    assert f"kubectl annotate mcpgateway -n {NS} {NAME} {FORCE_ANNOTATION}=postgres" in held["message"]
    assert _store(cluster) == "sqlite", "the old pods keep serving the held call"

    # The approver decides; the gateway's mirror marks it and recounts: the switch goes ahead, with no other action.
    cluster.custom.patch_namespaced_custom_object_status(GROUP, VERSION, NS, "toolapprovals", f"{NAME}-1",
                                                         {"status": {"phase": "Approved"}})
    _count(cluster, 0)
    _accepted(cluster)
    wait_for(lambda: _store(cluster) == "postgres", timeout=10, what="the gateway's Deployment on Postgres")


def test_an_agent_learns_at_once_that_a_gateway_took_its_name_and_gave_it_back(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, cluster: Cluster, tmp_path: Path
) -> None:
    for stem in ("modelconfig", "mcp-server", "agent"):
        kubectl("apply", "--validate=false", "-f", str(EXAMPLE / f"{stem}.yaml"))
    cluster.wait_accepted("file-manager")
    doc: dict[str, Any] = yaml.safe_load(GATEWAY.read_text())
    doc["metadata"]["name"] = "file-manager"
    kubectl("apply", "--validate=false", "-f", _write_manifest(tmp_path, doc))
    # While both exist neither is applied: the Agent says so too, without a change of its own.
    taken = cluster.wait_accepted("file-manager", "False", timeout=10)
    assert taken["reason"] == "NameTaken" and "an MCPGateway named 'file-manager'" in taken["message"], taken
    assert cluster.deployment("file-manager")["spec"]["template"]["spec"]["containers"][0]["command"][1] == "serve"  # type: ignore[index]
    kubectl("delete", "mcpgateway", "file-manager")
    cluster.wait_accepted("file-manager", timeout=10)
