"""Unit tests of the owned-field comparison and of the status conditions (pure functions)."""

from __future__ import annotations

from gatehouse_operator.apply import owned_equal
from gatehouse_operator.status import Condition, agent_status, ready_condition


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
    accepted = Condition("Accepted", True, "Reconciled", "ok")
    first = agent_status(None, generation=1, accepted=accepted, ready=ready_condition(None), config_hash="h", now="T1")
    again = agent_status(first, generation=1, accepted=accepted, ready=ready_condition(None), config_hash="h", now="T2")
    assert again == first  # a resync renders the same status: nothing to write
    failed = Condition("Accepted", False, "DependencyMissing", "ModelConfig 'm' not found")
    flipped = agent_status(again, generation=2, accepted=failed, ready=ready_condition(None), config_hash=None, now="T3")
    by_type = {c["type"]: c for c in flipped["conditions"]}
    assert by_type["Accepted"]["lastTransitionTime"] == "T3"
    assert by_type["Ready"]["lastTransitionTime"] == "T1"  # Ready did not flip
    assert flipped["configHash"] == "h" and flipped["observedGeneration"] == 2


def test_foreign_status_fields_and_conditions_are_kept() -> None:
    existing = {"pendingApprovals": 3, "conditions": [{"type": "RuntimeHealthy", "status": "True"}]}
    status = agent_status(
        existing, generation=1, accepted=Condition("Accepted", True, "Reconciled", "ok"),
        ready=ready_condition(None), config_hash="h", now="T",
    )
    assert status["pendingApprovals"] == 3
    assert [c["type"] for c in status["conditions"]] == ["Accepted", "Ready", "RuntimeHealthy"]


def test_ready_follows_available_replicas() -> None:
    deployment = {"spec": {"replicas": 2}, "status": {"availableReplicas": 1}}
    assert ready_condition(deployment).status is False
    deployment["status"]["availableReplicas"] = 2
    assert ready_condition(deployment) == Condition("Ready", True, "Available", "2/2 replicas available")
