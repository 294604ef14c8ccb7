"""Rollout decisions and the Deployment status (tests/support/kubelet/controller.py), as pure functions."""

from __future__ import annotations

from typing import Any

from tests.support.kubelet.controller import PodView, deployment_status, plan, rolling_limits, template_hash

NOW = "2026-01-01T00:00:00Z"


def spec(replicas: int = 2, strategy: str = "RollingUpdate", **rolling: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"replicas": replicas, "strategy": {"type": strategy}}
    if rolling:
        out["strategy"]["rollingUpdate"] = rolling
    return out


def pod(name: str, hash_: str, ready: bool = True, terminating: bool = False, created: float = 0.0) -> PodView:
    return PodView(name, hash_, ready, ready, terminating, created)


def test_template_hash_is_stable_and_changes_with_the_template() -> None:
    a = {"metadata": {"labels": {"x": "1"}}, "spec": {"containers": [{"name": "c"}]}}
    assert template_hash(a) == template_hash({"spec": {"containers": [{"name": "c"}]}, "metadata": {"labels": {"x": "1"}}})
    assert template_hash(a) != template_hash({**a, "metadata": {"annotations": {"y": "2"}}})
    assert len(template_hash(a)) == 10


def test_a_new_deployment_starts_all_replicas() -> None:
    assert plan(spec(3), "new", []).start == 3


def test_scaling_down_stops_not_ready_then_youngest_first() -> None:
    pods = [pod("a", "new", created=1), pod("b", "new", created=3), pod("c", "new", ready=False, created=2)]
    assert plan(spec(1), "new", pods).stop == ("c", "b")


def test_recreate_stops_every_old_pod_and_starts_only_when_they_are_gone() -> None:
    old = [pod("a", "old"), pod("b", "old")]
    assert plan(spec(2, "Recreate"), "new", old).stop == ("a", "b")
    assert plan(spec(2, "Recreate"), "new", [pod("a", "old", terminating=True)]).start == 0
    assert plan(spec(2, "Recreate"), "new", []).start == 2


def test_rolling_update_with_surge_one_starts_one_then_waits_for_it_to_be_ready() -> None:
    s = spec(2, maxSurge=1, maxUnavailable=0)
    old = [pod("a", "old", created=1), pod("b", "old", created=2)]
    first = plan(s, "new", old)
    assert (first.start, first.stop) == (1, ())
    waiting = plan(s, "new", [*old, pod("n1", "new", ready=False)])
    assert (waiting.start, waiting.stop) == (0, ())
    ready = plan(s, "new", [*old, pod("n1", "new")])
    assert (ready.start, ready.stop) == (0, ("a",))  # the oldest goes first
    next_step = plan(s, "new", [pod("b", "old"), pod("n1", "new")])
    assert (next_step.start, next_step.stop) == (1, ())


def test_rolling_update_with_max_unavailable_stops_first() -> None:
    s = spec(2, maxSurge=0, maxUnavailable=1)
    step = plan(s, "new", [pod("a", "old", created=1), pod("b", "old", created=2)])
    assert (step.start, step.stop) == (0, ("a",))


def test_old_pods_that_are_not_available_go_at_once() -> None:
    step = plan(spec(2, maxSurge=1, maxUnavailable=0), "new", [pod("a", "old", ready=False), pod("b", "old")])
    assert step.stop == ("a",)


def test_rolling_limits_percentages_round_like_kubernetes() -> None:
    assert rolling_limits(spec(10)) == (3, 2)  # 25% surge rounds up, 25% unavailable down
    assert rolling_limits(spec(1, maxSurge=0, maxUnavailable=0)) == (1, 0)


def test_status_counts_conditions_and_omits_zeros() -> None:
    deployment = {"metadata": {"name": "d", "generation": 4}, "spec": spec(2)}
    status = deployment_status(deployment, "new", [pod("a", "new"), pod("b", "old", ready=False)], NOW)
    assert {k: v for k, v in status.items() if k != "conditions"} == {
        "observedGeneration": 4, "replicas": 2, "updatedReplicas": 1, "readyReplicas": 1, "availableReplicas": 1,
        "unavailableReplicas": 1,
    }
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Available"]["status"] == "False"  # maxUnavailable 25% of 2 rounds down to 0: 1 of 2 is too few
    assert conditions["Progressing"]["reason"] == "ReplicaSetUpdated"
    done = deployment_status(deployment, "new", [pod("a", "new"), pod("c", "new")], NOW)
    assert "unavailableReplicas" not in done
    assert {c["type"]: c["reason"] for c in done["conditions"]} == {
        "Available": "MinimumReplicasAvailable", "Progressing": "NewReplicaSetAvailable"}


def test_status_keeps_transition_times_while_the_status_holds() -> None:
    deployment: dict[str, Any] = {"metadata": {"name": "d", "generation": 1}, "spec": spec(1)}
    first = deployment_status(deployment, "h", [pod("a", "h")], NOW)
    deployment["status"] = first
    again = deployment_status(deployment, "h", [pod("a", "h")], "2026-01-02T00:00:00Z")
    assert again["conditions"] == first["conditions"]
