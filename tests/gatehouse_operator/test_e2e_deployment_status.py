"""End-to-end: what the operator does when an Agent's Deployment changes, against the emulated API server.

The Deployment controller writes each Deployment's status several times while it rolls out and again whenever a
replica comes or goes. The emulator has none: the test plays it, with status writes through the status subresource
as the controller's. What the operator sent is counted from the emulator's request log, everything after the mark
but the test's own writes (the test reads nothing while it counts).

- A status write that leaves ``Ready`` as it is costs the operator no request at all (it used to reconcile the
  Agent: read it and every child, to find nothing to do; then it read the state claim while it was not bound).
- The state claim binding, with no pod running and no Deployment event, shows in ``StateReady`` through the claim's
  own watch event: a read of the Agent and a status patch, no child read.
- One that changes ``Ready`` costs a read of the Agent and its status patch, no child read.
- A change of the Deployment's spec or of a label the operator renders (edited by hand) is still repaired.
"""

from __future__ import annotations

import json
import time
from typing import Any

import kubernetes
import pytest
from prometheus_client import REGISTRY, generate_latest

from tests.gatehouse_operator.conftest import Kubectl, OperatorProcess, wait_for
from tests.gatehouse_operator.test_e2e import NS, Cluster, _apply_example, _settle
from tests.support.kube_server import RunningEmulator

pytestmark = pytest.mark.e2e

NAME, CLAIM = "file-manager", "file-manager-state"
CHILD_PLURALS = {"secrets", "serviceaccounts", "roles", "rolebindings", "persistentvolumeclaims", "deployments", "services"}


@pytest.fixture
def cluster(kube: kubernetes.client.ApiClient) -> Cluster:
    return Cluster(kube)


def _controller_writes(cluster: Cluster, *statuses: dict[str, Any]) -> None:
    """Play the Deployment controller: each status in turn, as it writes them while a rollout goes on."""
    for status in statuses:
        cluster.apps.patch_namespaced_deployment_status(NAME, NS, {"status": status})


def _operators(api: RunningEmulator, mark: int) -> list[tuple[str, str, str | None]]:
    """(method, plural, subresource) of each request after ``mark`` but the test's own Deployment status writes and
    the watches (a request the operator makes; the test reads nothing meanwhile)."""
    return [(str(r.method.value), r.resource.plural if r.resource else "", r.subresource)
            for r in api.emulator.requests_since(mark)
            if r.params.get("watch") is None
            and not (r.method.value == "PATCH" and r.resource is not None and r.resource.plural == "deployments"
                     and r.subresource == "status")]


def _ready(cluster: Cluster) -> tuple[str, str, str]:
    condition = cluster.condition(NAME, "Ready")
    return condition.get("status", ""), condition.get("reason", ""), condition.get("message", "")


def _bind_claim(cluster: Cluster) -> None:
    """Play the volume controller: the state claim is bound."""
    cluster.core.patch_namespaced_persistent_volume_claim_status(
        CLAIM, NS, {"status": {"phase": "Bound", "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]}})


ROLLING_OUT = (  # what the controller writes for a new Deployment whose pod is not up yet: Ready stays False
    {"observedGeneration": 1, "conditions": [{"type": "Progressing", "status": "True", "reason": "NewReplicaSetCreated"}]},
    {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "unavailableReplicas": 1,
     "conditions": [{"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable"},
                    {"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated"}]},
)


def test_a_deployment_status_write_costs_no_child_read_and_ready_follows_availability(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, cluster: Cluster
) -> None:
    _apply_example(kubectl)
    cluster.wait_accepted(NAME)
    assert _ready(cluster) == ("False", "Unavailable", "0/1 replicas available")
    _settle(kube_api)

    # The rollout's status writes: Ready says the same, so the operator sends nothing, the unbound claim read neither.
    mark = kube_api.emulator.request_count
    _controller_writes(cluster, *ROLLING_OUT)
    _settle(kube_api)
    assert _operators(kube_api, mark) == []
    assert _ready(cluster) == ("False", "Unavailable", "0/1 replicas available")
    assert cluster.condition(NAME, "StateReady")["reason"] == "ClaimPending"

    # The claim binds, while no pod runs and no Deployment changes: its own event shows it (a read of the Agent and
    # StateReady patched; no child read).
    mark = kube_api.emulator.request_count
    _bind_claim(cluster)
    _settle(kube_api)
    sent = [s for s in _operators(kube_api, mark) if s != ("PATCH", "persistentvolumeclaims", "status")]  # the test's
    assert sorted(sent) == [("GET", "agents", None), ("PATCH", "agents", "status")], sent
    state = cluster.condition(NAME, "StateReady")
    assert (state["status"], state["reason"]) == ("True", "ClaimBound"), state
    assert state["message"] == f"PersistentVolumeClaim {CLAIM} is Bound (1Gi, StorageClass None)"

    # The claim bound: a status write that leaves Ready as it is costs nothing at all; nor does the claim's next
    # event that changes nothing StateReady says (the volume controller's annotation).
    mark = kube_api.emulator.request_count
    _controller_writes(cluster, *ROLLING_OUT)
    cluster.core.patch_namespaced_persistent_volume_claim(CLAIM, NS, {"metadata": {"annotations": {
        "pv.kubernetes.io/bind-completed": "yes"}}})
    _settle(kube_api)
    assert [s for s in _operators(kube_api, mark) if s != ("PATCH", "persistentvolumeclaims", None)] == []  # the test's

    # The pod is up, then goes: each time one read of the Agent and one status patch, no child read.
    for available, ready in ((1, ("True", "Available", "1/1 replicas available")),
                             (0, ("False", "Unavailable", "0/1 replicas available"))):
        mark = kube_api.emulator.request_count
        _controller_writes(cluster, {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1,
                                     "readyReplicas": available, "availableReplicas": available,
                                     "unavailableReplicas": 1 - available})
        _settle(kube_api)
        sent = _operators(kube_api, mark)
        assert sorted(sent) == [("GET", "agents", None), ("PATCH", "agents", "status")], sent
        assert _ready(cluster) == ready
    agent = cluster.agent(NAME) or {}
    assert cluster.condition(NAME, "Ready")["observedGeneration"] == agent["status"]["observedGeneration"] == 1
    # the other conditions are as the last reconcile left them
    assert cluster.condition(NAME, "StateReady")["reason"] == "ClaimBound"
    assert cluster.condition(NAME, "Accepted")["status"] == "True"

    # A runtime reporting its own reason: Ready carries it when the replicas go again, as after a reconcile.
    cluster.custom.patch_namespaced_custom_object_status("gatehouse.dev", "v1alpha1", NS, "agents", NAME, {"status": {
        "conditions": [*agent["status"]["conditions"], {
            "type": "RuntimeReady", "status": "False", "reason": "DatabaseUnavailable", "message": "the database is down",
            "lastTransitionTime": "2026-11-27T00:00:00Z"}]}})
    wait_for(lambda: _ready(cluster)[1] == "DatabaseUnavailable", what="Ready with the runtime's reason")
    _controller_writes(cluster, {"availableReplicas": 1, "readyReplicas": 1, "unavailableReplicas": 0})
    wait_for(lambda: _ready(cluster)[0] == "True", what="Ready=True again")
    _controller_writes(cluster, {"availableReplicas": 0, "readyReplicas": 0, "unavailableReplicas": 1})
    wait_for(lambda: _ready(cluster)[0] == "False", what="Ready=False again")
    assert _ready(cluster) == ("False", "DatabaseUnavailable", "0/1 replicas available; the database is down")

    # The reconciles are counted by kind (the operator runs in this process: its /metrics is this registry's).
    exposed = generate_latest(REGISTRY).decode()
    assert 'gatehouse_operator_reconciles_total{kind="Agent",result="accepted"}' in exposed
    assert 'gatehouse_operator_reconcile_duration_seconds_count{kind="Agent"}' in exposed


def test_a_deployment_edited_by_hand_is_still_repaired(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, cluster: Cluster
) -> None:
    """Its spec (a new generation), or a label the operator renders (the same generation): both are drift."""
    _apply_example(kubectl)
    cluster.wait_accepted(NAME)
    _controller_writes(cluster, *ROLLING_OUT)
    _settle(kube_api)

    def image() -> str:
        return str((cluster.deployment(NAME) or {})["spec"]["template"]["spec"]["containers"][0]["image"])

    ours = image()
    kubectl("patch", "deployment", NAME, "--type=json", "-p", json.dumps([
        {"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": "example.com/other:1"}]))
    wait_for(lambda: image() == ours, what="the runtime's image restored")
    kubectl("patch", "deployment", NAME, "--type=merge", "-p", json.dumps({"spec": {"replicas": 3}}))
    wait_for(lambda: (cluster.deployment(NAME) or {}).get("spec", {}).get("replicas") == 1, what="replicas back to 1")

    kubectl("label", "deployment", NAME, "--overwrite", "app.kubernetes.io/instance=someone-else")
    wait_for(lambda: (cluster.deployment(NAME) or {})["metadata"]["labels"]["app.kubernetes.io/instance"] == NAME,
             what="the label restored")
    # a label of someone else's is no drift: left alone, with nothing else to repair
    _settle(kube_api)
    kubectl("label", "deployment", NAME, "team=files")
    time.sleep(1)
    assert json.loads(kubectl("get", "deployment", NAME, "-o", "json"))["metadata"]["labels"]["team"] == "files"
