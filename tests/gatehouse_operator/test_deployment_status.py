"""What tells a Deployment's status-only event apart (:mod:`gatehouse_operator.deployment_status`): pure functions."""

from __future__ import annotations

import copy
from typing import Any

from gatehouse_operator.deployment_status import applied, claim_moved, state_ready, status_only
from gatehouse_operator.status import StatusCondition
from gatehouse_operator.storage import StateLayout

OWNER = {"apiVersion": "gatehouse.dev/v1alpha1", "kind": "Agent", "name": "files", "uid": "u-1", "controller": True,
         "blockOwnerDeletion": True}
LABELS = {"app.kubernetes.io/name": "gatehouse-agent", "gatehouse.dev/agent": "files"}
DESIRED = {"kind": "Deployment", "metadata": {"name": "files", "namespace": "ns", "labels": LABELS,
                                              "ownerReferences": [OWNER]},
           "spec": {"replicas": 1}}
SQLITE = StateLayout("sqlite", claim="files-state")


def _actual(generation: int = 1, available: int = 0, **meta: Any) -> dict[str, Any]:
    """The Deployment as the API server shows it: our metadata and what it and the controller add."""
    body = copy.deepcopy(DESIRED)
    body["metadata"].update(generation=generation, resourceVersion="7", uid="d-1", **meta)
    body["status"] = {"observedGeneration": generation, "availableReplicas": available}
    return body


def _claim(phase: str | None) -> dict[str, Any]:
    return {"metadata": {"name": "files-state"}, "spec": {"storageClassName": "standard"},
            **({"status": {"phase": phase, "capacity": {"storage": "1Gi"}}} if phase else {})}


def test_a_status_write_and_the_controllers_annotation_are_status_only() -> None:
    record = applied(DESIRED, _actual())
    assert record.ready == StatusCondition("Ready", False, "Unavailable", "0/1 replicas available")
    event = _actual(available=1, annotations={"deployment.kubernetes.io/revision": "1"})
    assert status_only(record, event)
    event["metadata"]["labels"] = {**LABELS, "team": "files"}  # a label of someone else's is no drift either
    assert status_only(record, event)


def test_a_new_generation_an_edited_label_or_owner_a_deletion_are_not() -> None:
    record = applied(DESIRED, _actual())
    assert not status_only(record, _actual(generation=2))
    assert not status_only(record, _actual(labels={**LABELS, "gatehouse.dev/agent": "other"}))
    assert not status_only(record, _actual(ownerReferences=[]))
    assert not status_only(record, _actual(deletionTimestamp="2026-11-27T00:00:00Z"))
    assert not status_only(None, _actual())
    unknown = applied(DESIRED, {"metadata": {}})  # an API server that gives no generation: never trusted
    assert not status_only(unknown, {"metadata": {}})


def test_an_unbound_claim_is_recorded_until_it_binds() -> None:
    assert applied(DESIRED, _actual(), SQLITE, _claim("Bound")).claim is None  # bound: never read again
    assert applied(DESIRED, _actual(), StateLayout("postgres")).claim is None
    record = applied(DESIRED, _actual(), SQLITE, _claim(None), ("it cannot shrink",))  # just created: no status yet
    assert (record.claim, record.claim_phase) == ("files-state", "Pending")
    assert not claim_moved(record, _claim("Pending"))
    assert claim_moved(record, _claim("Bound"))
    assert state_ready(record, _claim("Bound")) == StatusCondition(
        "StateReady", True, "ClaimBound",
        "PersistentVolumeClaim files-state is Bound (1Gi, StorageClass standard); it cannot shrink")
    assert record.with_claim(_claim("Bound")).claim is None
    assert record.with_claim(_claim("Lost")).claim_phase == "Lost"
