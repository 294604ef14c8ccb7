"""What tells a Deployment's status-only event apart (:mod:`gatehouse_operator.deployment_status`), and what a state
claim's event changes in ``StateReady`` (:mod:`gatehouse_operator.claim_status`): pure functions."""

from __future__ import annotations

import copy
from typing import Any

from gatehouse_operator.claim_status import follow, is_recorded
from gatehouse_operator.claims import state_condition
from gatehouse_operator.deployment_status import applied, status_only
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


def _recorded(phase: str | None, notes: tuple[str, ...] = ()) -> Any:
    """The record a reconcile leaves when it found the claim in ``phase``: StateReady as it wrote it."""
    return applied(DESIRED, _actual(), SQLITE, state_condition(SQLITE, _claim(phase), notes), notes)


def test_a_claim_event_changes_state_ready_only_when_what_it_says_changed() -> None:
    record = _recorded(None, ("it cannot shrink",))  # just created: no status yet, Pending
    assert record.claim == "files-state" and record.state_ready is not None
    assert record.state_ready.reason == "ClaimPending"
    assert follow(record, _claim(None)) is None  # our own label patch, the controller's annotations: nothing
    assert follow(record, _claim("Pending")) is None
    bound = follow(record, _claim("Bound"))  # it bound, with no pod running: StateReady says so, as a reconcile would
    assert bound is not None and bound.state_ready == StatusCondition(
        "StateReady", True, "ClaimBound",
        "PersistentVolumeClaim files-state is Bound (1Gi, StorageClass standard); it cannot shrink")
    assert bound.state_ready == state_condition(SQLITE, _claim("Bound"), ("it cannot shrink",))
    assert (bound.generation, bound.metadata, bound.ready, bound.notes) == (
        record.generation, record.metadata, record.ready, record.notes)  # the rest of the record as it was
    assert follow(bound, _claim("Bound")) is None  # told already: a bound claim's later events cost nothing
    lost = follow(bound, _claim("Lost"))
    assert lost is not None and lost.state_ready is not None
    assert (lost.state_ready.status, lost.state_ready.reason) == (False, "ClaimLost")


def test_a_claim_that_is_not_the_records_changes_nothing() -> None:
    record = _recorded("Pending")
    other = {**_claim("Bound"), "metadata": {"name": "someone-elses-state"}}
    assert not is_recorded(record, other) and follow(record, other) is None
    assert is_recorded(record, _claim("Bound"))
    assert follow(None, _claim("Bound")) is None  # no reconcile of the Agent yet: the first one reads the claim
    postgres = applied(DESIRED, _actual(), StateLayout("postgres"))  # the state moved off the claim
    assert postgres.claim is None and not is_recorded(postgres, _claim("Bound")) and follow(postgres, _claim("Bound")) is None
