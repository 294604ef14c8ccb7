"""End-to-end: switching an Agent's state backend is held while its runtime holds pending requests (issue 36, item 5).

sqlite to Postgres would start pods on a database without the pending approvals: their ToolApprovals would turn
Orphaned and their tasks "not found". The operator holds the switch (Accepted=False, reason StateSwitchHeld, a
message saying why and how to go on) until nothing is pending, or the annotation gatehouse.dev/force-state-switch
names the kind switched to. The emulator runs no runtime: the test plays its part, as its kube mirror does -- a
Pending ToolApproval, and the Agent's status.pendingApprovals.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from gatehouse_operator.state_switch import FORCE_ANNOTATION
from tests.gatehouse_operator.conftest import Kubectl, OperatorProcess, wait_for
from tests.gatehouse_operator.test_e2e import NS, Cluster, _apply_example, _settle
from tests.gatehouse_operator.test_e2e_state import _agent, _apply
from tests.support.kube_server import RunningEmulator

pytestmark = pytest.mark.e2e

POSTGRES = {"postgres": {"urlSecretRef": {"name": "agent-db"}}}


@pytest.fixture
def cluster(kube: kubernetes.client.ApiClient) -> Cluster:
    return Cluster(kube)


def _store(cluster: Cluster) -> str:
    pod = (cluster.deployment("file-manager") or {})["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    if any(e["name"] == "GATEHOUSE_DATABASE_URL" for e in container["env"] or []):
        return "postgres"
    return "sqlite" if any(v["name"] == "state" and v["persistent_volume_claim"] for v in pod["volumes"]) else "other"


def _pending_request(cluster: Cluster) -> None:
    """What the runtime's mirror writes for one pending approval: its ToolApproval, Pending, and the Agent's count."""
    custom = cluster.custom
    approval = {
        "apiVersion": "gatehouse.dev/v1alpha1", "kind": "ToolApproval",
        "metadata": {"name": "file-manager-1", "namespace": NS, "labels": {"gatehouse.dev/agent": "file-manager"}},
        "spec": {"agentRef": "file-manager", "requestId": "apr-1", "contextId": "ctx-1", "taskId": "task-1",
                 "tool": "delete_file", "server": "file-tools", "args": {"path": "/data/a.txt"}},
    }
    custom.create_namespaced_custom_object("gatehouse.dev", "v1alpha1", NS, "toolapprovals", approval)
    custom.patch_namespaced_custom_object_status("gatehouse.dev", "v1alpha1", NS, "toolapprovals", "file-manager-1",
                                                 {"status": {"phase": "Pending"}})
    _count(cluster, 1)


def _count(cluster: Cluster, count: int) -> None:
    cluster.custom.patch_namespaced_custom_object_status("gatehouse.dev", "v1alpha1", NS, "agents", "file-manager",
                                                         {"status": {"pendingApprovals": count}})


def _switch_to_postgres(kubectl: Kubectl, cluster: Cluster, tmp_path: Path) -> dict[str, Any]:
    _apply_example(kubectl, "modelconfig", "mcp-server")
    _apply(kubectl, tmp_path, _agent())
    cluster.wait_accepted("file-manager")
    assert _store(cluster) == "sqlite"
    _pending_request(cluster)
    url = base64.b64encode(b"postgresql+asyncpg://gatehouse:pw@db:5432/gatehouse").decode()
    cluster.core.create_namespaced_secret(NS, {"metadata": {"name": "agent-db"}, "data": {"url": url}})
    _apply(kubectl, tmp_path, _agent(state=POSTGRES))
    held = cluster.wait_accepted("file-manager", "False")
    assert held["reason"] == "StateSwitchHeld"
    assert "sqlite on PersistentVolumeClaim file-manager-state" in held["message"]
    assert "Postgres (URL from Secret agent-db, key url)" in held["message"]
    assert "1 pending request" in held["message"]
    assert f"kubectl annotate agent -n {NS} file-manager {FORCE_ANNOTATION}=postgres" in held["message"]
    assert _store(cluster) == "sqlite", "the old pods keep serving what is pending"
    events = [e for e in cluster.core.list_namespaced_event(NS).items if e.reason == "StateSwitchHeld"]
    assert events and events[0].type == "Warning"
    return held


def test_a_switch_waits_until_nothing_is_pending_then_goes_ahead_by_itself(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, cluster: Cluster, tmp_path: Path
) -> None:
    _switch_to_postgres(kubectl, cluster, tmp_path)

    # The approver decides; the runtime's mirror marks it and recounts: the switch goes ahead, with no other action.
    cluster.custom.patch_namespaced_custom_object_status("gatehouse.dev", "v1alpha1", NS, "toolapprovals",
                                                         "file-manager-1", {"status": {"phase": "Approved"}})
    _count(cluster, 0)
    cluster.wait_accepted("file-manager")
    wait_for(lambda: _store(cluster) == "postgres", what="the Deployment on Postgres")


def test_the_annotation_forces_the_switch_and_only_to_the_kind_it_names(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, cluster: Cluster, tmp_path: Path
) -> None:
    _switch_to_postgres(kubectl, cluster, tmp_path)

    kubectl("annotate", "agent", "file-manager", f"{FORCE_ANNOTATION}=ephemeral")  # another kind: forces nothing
    _settle(kube_api)  # the operator handled the annotation
    assert cluster.condition("file-manager", "Accepted")["reason"] == "StateSwitchHeld"
    assert _store(cluster) == "sqlite"

    kubectl("annotate", "--overwrite", "agent", "file-manager", f"{FORCE_ANNOTATION}=postgres")
    cluster.wait_accepted("file-manager")
    wait_for(lambda: _store(cluster) == "postgres", what="the Deployment on Postgres, forced")
