"""The state claim, unit by unit: what a reconcile changes on an existing claim, what it only reports, and the
``StateReady`` condition for each phase. (tests/gatehouse_operator/test_e2e_state.py runs the same against the API.)"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gatehouse_operator import storage
from gatehouse_operator.claims import ensure_claim, state_condition
from gatehouse_operator.kube import ApiException

LABELS = {"app.kubernetes.io/managed-by": "gatehouse-operator", "gatehouse.dev/agent": "a"}
OURS = {"apiVersion": "gatehouse.dev/v1alpha1", "kind": "Agent", "name": "a", "uid": "u1", "controller": True,
        "blockOwnerDeletion": True}
THEIRS = {"apiVersion": "example.com/v1", "kind": "Backup", "name": "nightly", "uid": "b1"}
SQLITE = storage.StateLayout("sqlite", claim="a-state")


def _claim(size: str = "1Gi", owners: list[dict[str, Any]] | None = None, storage_class: str | None = None,
           labels: dict[str, str] | None = None, phase: str | None = None) -> dict[str, Any]:
    claim: dict[str, Any] = {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "a-state", "namespace": "ns", "labels": dict(LABELS if labels is None else labels)},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}},
    }
    if owners:
        claim["metadata"]["ownerReferences"] = owners
    if storage_class:
        claim["spec"]["storageClassName"] = storage_class
    if phase:
        claim["status"] = {"phase": phase, "capacity": {"storage": size}}
    return claim


class FakeKube:
    """Enough of ChildrenApi for one claim: merge patches applied, a call log, and an optional refusal of spec patches."""

    def __init__(self, existing: dict[str, Any] | None = None, refuse_spec: int | None = None) -> None:
        self.claim = copy.deepcopy(existing)
        self.refuse_spec = refuse_spec
        self.calls: list[str] = []

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        self.calls.append("get")
        return copy.deepcopy(self.claim)

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.calls.append("create")
        if self.claim is not None:
            raise ApiException(status=409, reason="AlreadyExists")
        self.claim = copy.deepcopy(obj)
        return copy.deepcopy(obj)

    def patch(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.calls.append("patch " + ",".join(sorted(k for k in ("spec",) if k in obj) or sorted(obj["metadata"])))
        if "spec" in obj and self.refuse_spec:
            raise ApiException(status=self.refuse_spec, reason="Forbidden")
        assert self.claim is not None
        for key, value in obj["metadata"].items():
            if key == "labels":
                self.claim["metadata"].setdefault("labels", {}).update(value)
            elif key not in ("name", "namespace"):
                self.claim["metadata"][key] = value
        if "spec" in obj:
            self.claim["spec"]["resources"] = obj["spec"]["resources"]
        return copy.deepcopy(self.claim)


def _ensure(kube: FakeKube, desired: dict[str, Any], create_first: bool = False) -> Any:
    return ensure_claim(kube, desired, create_first=create_first)  # type: ignore[arg-type]


def test_a_missing_claim_is_created_and_a_new_agent_creates_it_without_a_read() -> None:
    kube = FakeKube()
    assert _ensure(kube, _claim(), create_first=True).applied.action == "created" and kube.calls == ["create"]
    kube = FakeKube()
    assert _ensure(kube, _claim()).applied.action == "created" and kube.calls == ["get", "create"]


def test_an_unchanged_claim_is_only_read() -> None:
    kube = FakeKube(_claim(storage_class="standard", phase="Bound"))
    result = _ensure(kube, _claim())
    assert (result.applied.action, result.notes, kube.calls) == ("unchanged", (), ["get"])


def test_a_claim_found_by_name_is_taken_over_keeping_its_other_labels_and_owners() -> None:
    kube = FakeKube(_claim(labels={"team": "a"}, owners=[THEIRS]))
    assert _ensure(kube, _claim(owners=[OURS])).applied.action == "patched"
    assert kube.claim is not None
    assert kube.claim["metadata"]["labels"] == {"team": "a", **LABELS}
    assert kube.claim["metadata"]["ownerReferences"] == [THEIRS, OURS]


def test_our_owner_reference_is_removed_when_the_agent_keeps_its_claim_and_others_stay() -> None:
    kube = FakeKube(_claim(owners=[THEIRS, OURS]))
    _ensure(kube, _claim())
    assert kube.claim is not None and kube.claim["metadata"]["ownerReferences"] == [THEIRS]


def test_a_larger_size_is_requested_a_smaller_one_reported() -> None:
    kube = FakeKube(_claim("1Gi"))
    result = _ensure(kube, _claim("1536Mi"))
    assert kube.calls == ["get", "patch spec"] and result.notes == ()
    assert kube.claim is not None and kube.claim["spec"]["resources"]["requests"]["storage"] == "1536Mi"
    kube = FakeKube(_claim("2Gi"))
    result = _ensure(kube, _claim("2048Mi"))  # the same quantity written another way
    assert kube.calls == ["get"] and result.notes == ()
    result = _ensure(kube, _claim("1Gi"))
    assert result.notes == ("spec.state.sqlite.size asks 1Gi but it requests 2Gi: a claim never shrinks",)


@pytest.mark.parametrize("status", [403, 422])
def test_a_refused_expansion_is_reported_not_failed(status: int) -> None:
    kube = FakeKube(_claim("1Gi"), refuse_spec=status)
    result = _ensure(kube, _claim("5Gi"))
    assert result.applied.action == "unchanged"
    (note,) = result.notes
    assert note.startswith(f"growing it to 5Gi was refused ({status} Forbidden): its StorageClass may not allow")


def test_other_errors_fail_the_reconcile() -> None:
    with pytest.raises(ApiException):
        _ensure(FakeKube(_claim("1Gi"), refuse_spec=500), _claim("5Gi"))


def test_another_storage_class_is_reported_never_changed() -> None:
    kube = FakeKube(_claim(storage_class="standard"))
    result = _ensure(kube, _claim(storage_class="fast"))
    assert kube.calls == ["get"]
    assert result.notes == ("spec.state.sqlite.storageClassName asks 'fast' but it has 'standard': a claim's class never "
                            "changes (delete the claim, and the state on it, to have a new one made)",)


@pytest.mark.parametrize(
    ("claim", "status", "reason", "message"),
    [
        (_claim(storage_class="standard", phase="Bound"), True, "ClaimBound",
         "PersistentVolumeClaim a-state is Bound (1Gi, StorageClass standard)"),
        (_claim(), False, "ClaimPending",
         "PersistentVolumeClaim a-state is Pending: no default StorageClass; set spec.state.sqlite.storageClassName"),
        (_claim(phase="Pending"), False, "ClaimPending",
         "PersistentVolumeClaim a-state is Pending: no default StorageClass; set spec.state.sqlite.storageClassName"),
        (_claim(storage_class="wffc", phase="Pending"), False, "ClaimPending",
         "PersistentVolumeClaim a-state is Pending: waiting for a volume of StorageClass wffc (a WaitForFirstConsumer "
         "class binds it once the pod is scheduled)"),
        (_claim(storage_class="standard", phase="Lost"), False, "ClaimLost",
         "PersistentVolumeClaim a-state is Lost: its volume is gone; the pods cannot start until the claim is deleted "
         "and made anew (with empty state)"),
        (None, False, "ClaimMissing", "PersistentVolumeClaim a-state not found"),
    ],
)
def test_state_ready_follows_the_claim_phase(claim: dict[str, Any] | None, status: bool, reason: str, message: str) -> None:
    condition = state_condition(SQLITE, claim)
    assert (condition.type, condition.status, condition.reason, condition.message) == ("StateReady", status, reason, message)


def test_state_ready_carries_what_could_not_be_done() -> None:
    condition = state_condition(SQLITE, _claim(storage_class="s", phase="Bound"), ["a claim never shrinks"])
    assert condition.status and condition.message.endswith("(1Gi, StorageClass s); a claim never shrinks")


@pytest.mark.parametrize(("kind", "reason"), [("postgres", "Postgres"), ("ephemeral", "EmptyDir"), ("per-pod", "EmptyDir")])
def test_without_a_claim_the_state_is_ready(kind: storage.Kind, reason: str) -> None:
    condition = state_condition(storage.StateLayout(kind), None)
    assert (condition.status, condition.reason) == (True, reason)
