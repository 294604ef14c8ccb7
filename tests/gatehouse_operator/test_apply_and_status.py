"""Unit tests of the owned-field comparison, create-or-patch, and the status conditions."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gatehouse_operator.apply import ensure, owned_equal
from gatehouse_operator.kube import ApiException
from gatehouse_operator.status import StatusCondition, agent_status, ready_condition, ready_needs_runtime_reason


def test_server_defaults_do_not_count_as_drift() -> None:
    desired = {"spec": {"ports": [{"name": "http", "port": 8080}], "selector": {"a": "b"}}}
    actual = {
        "metadata": {"uid": "u", "resourceVersion": "7"},
        "spec": {"ports": [{"name": "http", "port": 8080, "protocol": "TCP"}], "selector": {"a": "b"}, "clusterIP": "10.0.0.1"},
        "status": {},
    }
    assert owned_equal(desired, actual)


def test_owned_changes_are_drift() -> None:
    assert not owned_equal({"spec": {"replicas": 2}}, {"spec": {"replicas": 1}})
    assert not owned_equal({"env": [{"name": "A"}]}, {"env": [{"name": "A"}, {"name": "B"}]})  # removed item
    assert not owned_equal({"resources": {}}, {"resources": {"limits": {"cpu": "1"}}})  # removed block
    assert owned_equal({"resources": {}}, {})
    assert not owned_equal({"data": {"k": "v"}}, {})


def test_last_transition_time_moves_only_when_status_flips() -> None:
    accepted = StatusCondition("Accepted", True, "Reconciled", "ok")
    first = agent_status(None, generation=1, accepted=accepted, ready=ready_condition(None), config_hash="h", now="T1")
    again = agent_status(first, generation=1, accepted=accepted, ready=ready_condition(None), config_hash="h", now="T2")
    assert again == first  # a resync renders the same status: nothing to write
    failed = StatusCondition("Accepted", False, "DependencyMissing", "ModelConfig 'm' not found")
    flipped = agent_status(again, generation=2, accepted=failed, ready=ready_condition(None), config_hash=None, now="T3")
    by_type = {c["type"]: c for c in flipped["conditions"]}
    assert by_type["Accepted"]["lastTransitionTime"] == "T3"
    assert by_type["Ready"]["lastTransitionTime"] == "T1"  # Ready did not flip
    assert flipped["configHash"] == "h" and flipped["observedGeneration"] == 2


def test_foreign_status_fields_and_conditions_are_kept() -> None:
    existing = {"pendingApprovals": 3, "conditions": [{"type": "RuntimeHealthy", "status": "True"}]}
    status = agent_status(
        existing, generation=1, accepted=StatusCondition("Accepted", True, "Reconciled", "ok"),
        ready=ready_condition(None), config_hash="h", now="T",
    )
    assert status["pendingApprovals"] == 3
    assert [c["type"] for c in status["conditions"]] == ["Accepted", "Ready", "RuntimeHealthy"]


def test_not_ready_carries_the_runtime_s_own_reason() -> None:
    runtime = {"type": "RuntimeReady", "status": "False", "reason": "ToolsUnreachable",
               "message": "pod fm-1: MCP server file-tools unreachable"}
    unavailable = ready_condition({"spec": {"replicas": 1}, "status": {"availableReplicas": 0}})
    status = agent_status({"conditions": [runtime]}, generation=1, accepted=StatusCondition("Accepted", True, "Reconciled", "ok"),
                          ready=unavailable, config_hash="h", now="T")
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "ToolsUnreachable")
    assert ready["message"] == "0/1 replicas available; pod fm-1: MCP server file-tools unreachable"
    assert runtime in status["conditions"]  # the runtime's condition stays as it wrote it
    healthy = {**runtime, "status": "True", "reason": "Ready"}
    plain = agent_status({"conditions": [healthy]}, generation=1, accepted=StatusCondition("Accepted", True, "R", "ok"),
                         ready=unavailable, config_hash="h", now="T")
    assert next(c for c in plain["conditions"] if c["type"] == "Ready")["reason"] == "Unavailable"


@pytest.mark.parametrize(
    ("ready", "runtime", "needed"),
    [
        ({"status": "False", "reason": "Unavailable", "message": "0/1 replicas available"},
         {"status": "False", "reason": "ToolsUnreachable", "message": "pod p: MCP server t: down"}, True),
        ({"status": "False", "reason": "ToolsUnreachable", "message": "0/1 replicas available; pod p: MCP server t: down"},
         {"status": "False", "reason": "ToolsUnreachable", "message": "pod p: MCP server t: down"}, False),
        ({"status": "False", "reason": "ToolsUnreachable", "message": "0/1 replicas available; pod p: MCP server t: down"},
         {"status": "True", "reason": "Ready", "message": "pod p: ready"}, True),  # the runtime took its reason back
        ({"status": "True", "reason": "Available", "message": "1/1 replicas available"},
         {"status": "False", "reason": "ToolsUnreachable", "message": "pod q: down"}, False),  # available wins
        ({"status": "False", "reason": "Unavailable", "message": "0/1 replicas available"}, None, False),
    ],
)
def test_a_runtime_readiness_change_calls_for_a_reconcile(
    ready: dict[str, str], runtime: dict[str, str] | None, needed: bool
) -> None:
    conditions = [{"type": "Ready", **ready}] + ([{"type": "RuntimeReady", **runtime}] if runtime else [])
    assert ready_needs_runtime_reason(conditions) is needed


def test_ready_follows_available_replicas() -> None:
    deployment = {"spec": {"replicas": 2}, "status": {"availableReplicas": 1}}
    assert ready_condition(deployment).status is False
    deployment["status"]["availableReplicas"] = 2
    assert ready_condition(deployment) == StatusCondition("Ready", True, "Available", "2/2 replicas available")


class FakeKube:
    """Just enough of :class:`gatehouse_operator.kube.ChildrenApi` for :func:`ensure`, with a call log."""

    def __init__(self, *existing: dict[str, Any]) -> None:
        self.objects = {(o["kind"], o["metadata"]["name"]): copy.deepcopy(o) for o in existing}
        self.calls: list[str] = []

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        self.calls.append(f"get {kind}")
        return copy.deepcopy(self.objects.get((kind, name)))

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(f"create {obj['kind']}")
        key = (obj["kind"], obj["metadata"]["name"])
        if key in self.objects:
            raise ApiException(status=409, reason="AlreadyExists")
        self.objects[key] = copy.deepcopy(obj)
        return copy.deepcopy(obj)

    def patch(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(f"patch {obj['kind']}")
        self.objects[obj["kind"], obj["metadata"]["name"]] = copy.deepcopy(obj)
        return copy.deepcopy(obj)


def _secret(value: str) -> dict[str, Any]:
    return {"kind": "Secret", "metadata": {"name": "a-config", "namespace": "ns"}, "data": {"config.json": value}}


@pytest.mark.parametrize(
    ("existing", "create_first", "action", "calls"),
    [
        ((), False, "created", ["get Secret", "create Secret"]),
        ((), True, "created", ["create Secret"]),  # a new Agent: no 404 read first
        ((_secret("old"),), True, "patched", ["create Secret", "get Secret", "patch Secret"]),  # 409: compare, patch
        ((_secret("new"),), True, "unchanged", ["create Secret", "get Secret"]),
        ((_secret("new"),), False, "unchanged", ["get Secret"]),  # a resync: reads only
        ((_secret("old"),), False, "patched", ["get Secret", "patch Secret"]),
    ],
)
def test_ensure_creates_patches_or_leaves_alone(
    existing: tuple[dict[str, Any], ...], create_first: bool, action: str, calls: list[str]
) -> None:
    kube = FakeKube(*existing)
    done = ensure(kube, _secret("new"), create_first=create_first)  # type: ignore[arg-type]
    assert (done.action, kube.calls) == (action, calls)
    assert kube.objects["Secret", "a-config"]["data"] == {"config.json": "new"}


def test_ensure_create_first_passes_other_errors_on() -> None:
    class Refusing(FakeKube):
        def create(self, obj: dict[str, Any]) -> dict[str, Any]:
            raise ApiException(status=403, reason="Forbidden")

    with pytest.raises(ApiException) as caught:
        ensure(Refusing(), _secret("new"), create_first=True)  # type: ignore[arg-type]
    assert caught.value.status == 403
