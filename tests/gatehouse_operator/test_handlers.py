"""The child-event handler: an event that only echoes the operator's own write does not start a reconcile; the
periodic loop: a Secret check reconciles only when a Secret the Agent uses changed, costs no request for an Agent
that uses none, and comes one interval after the reconcile that read them; a resync one period after the last
reconcile."""

from __future__ import annotations

import asyncio
import logging
import threading
import time

import kopf
import pytest

from gatehouse_operator import builders, handlers, periodic
from gatehouse_operator.settings import OperatorConfig, OperatorState


def _child_event(resource_version: str) -> kopf.Body:
    return kopf.Body({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "a", "namespace": "ns", "resourceVersion": resource_version,
                     "labels": {builders.AGENT_LABEL: "a", "app.kubernetes.io/managed-by": builders.MANAGED_BY}},
    })


@pytest.fixture
def reconciled(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    runs: list[str] = []
    monkeypatch.setattr(handlers, "_run", lambda memo, namespace, name, logger, kwargs, **_: runs.append(f"{namespace}/{name}"))
    return runs


def _memo() -> kopf.Memo:
    memo = kopf.Memo()
    memo.state = OperatorState(config=OperatorConfig(), kube=None)  # type: ignore[arg-type]
    return memo


def test_the_echo_of_a_write_still_in_flight_is_skipped(reconciled: list[str]) -> None:
    """The watch event of a child can arrive before the reconcile that created it has recorded its version."""
    memo = _memo()
    state: OperatorState = memo.state
    lock = state.lock_for("ns", "a")
    lock.acquire()  # a reconcile of Agent a is running: it has just created the Deployment (version 7) ...

    def finish() -> None:
        time.sleep(0.3)
        state.saw("Deployment", "ns", "a", "7")  # ... and records the version before it lets go
        lock.release()

    thread = threading.Thread(target=finish)
    thread.start()
    asyncio.run(handlers._owner_changed("Deployment", "ADDED", _child_event("7"), memo, logging.getLogger("test"), {}))
    thread.join()
    assert reconciled == []


@pytest.mark.parametrize(("event", "version"), [("MODIFIED", "8"), ("DELETED", "7")])
def test_a_change_by_someone_else_reconciles_the_agent(reconciled: list[str], event: str, version: str) -> None:
    memo = _memo()
    memo.state.saw("Deployment", "ns", "a", "7")
    asyncio.run(handlers._owner_changed("Deployment", event, _child_event(version), memo, logging.getLogger("test"), {}))
    assert reconciled == ["ns/a"]


def test_the_initial_listing_is_left_to_resume(reconciled: list[str]) -> None:
    asyncio.run(handlers._owner_changed("Deployment", None, _child_event("7"), _memo(), logging.getLogger("test"), {}))
    assert reconciled == []


class _Secrets:
    """Secrets by name (namespace ``ns``) as the API answers a GET; counts the GETs."""

    def __init__(self, **versions: str) -> None:
        self.versions = dict(versions)
        self.gets: list[str] = []

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, object] | None:
        assert (kind, namespace) == ("Secret", "ns")
        self.gets.append(name)
        version = self.versions.get(name)
        return {"metadata": {"name": name, "resourceVersion": version}, "data": {"k": "djE="}} if version else None


def _memo_with(kube: _Secrets) -> kopf.Memo:
    memo = kopf.Memo()
    memo.state = OperatorState(config=OperatorConfig(), kube=kube)  # type: ignore[arg-type]
    return memo


@pytest.fixture
def rechecked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    runs: list[str] = []
    monkeypatch.setattr(periodic, "reconcile", lambda state, deps, namespace, name, logger: runs.append(f"{namespace}/{name}"))
    return runs


def test_the_secret_check_reconciles_only_when_a_version_moved(rechecked: list[str]) -> None:
    kube = _Secrets(tok="1", **{"a-config": "5"})
    state: OperatorState = _memo_with(kube).state
    state.referenced_secrets("ns", "a").get("tok")  # what the last reconcile read ...
    state.referenced_secrets("ns", "a").get("jwks")  # ... replaced by the next one: jwks, absent
    state.saw("Secret", "ns", "a-config", "5")  # and its own config Secret, as it left it
    log = logging.getLogger("test")
    kube.gets.clear()
    periodic.check_secrets(state, None, "ns", "a", log)  # type: ignore[arg-type]
    assert (kube.gets, rechecked) == (["jwks", "a-config"], [])
    kube.versions["jwks"] = "2"  # the missing Secret appears
    periodic.check_secrets(state, None, "ns", "a", log)  # type: ignore[arg-type]
    assert rechecked == ["ns/a"]
    state.referenced_secrets("ns", "a").get("jwks")  # (the reconcile read it)
    kube.versions["a-config"] = "6"  # edited by hand
    periodic.check_secrets(state, None, "ns", "a", log)  # type: ignore[arg-type]
    assert rechecked == ["ns/a", "ns/a"]


def _state(resync: float = 300, check: float = 60) -> OperatorState:
    return OperatorState(config=OperatorConfig(resync_seconds=resync, secret_check_seconds=check), kube=_Secrets(tok="1"))  # type: ignore[arg-type]


def test_a_secret_check_is_due_one_interval_after_the_reconcile_that_read_them() -> None:
    state = _state()
    state.agent_seen("ns", "a")
    start = time.monotonic()
    assert state.due(start + 3600, set())[1] == []  # not reconciled yet: nothing read, nothing to check
    state.reconciling("ns", "a")
    state.referenced_secrets("ns", "a").get("tok")  # a reconcile reads its Secret, late after the Agent appeared
    read = time.monotonic()
    assert state.due(read + 53, set()) == ([], [])  # within the interval (times the spread, at least 0.9)
    assert state.due(read + 60, set()) == ([], [("ns", "a")])
    assert state.due(read + 60, {("ns", "a")}) == ([], [])  # a job of the Agent is running
    state.secrets_checked("ns", "a")
    assert state.due(time.monotonic() + 53, set()) == ([], [])


def test_the_secret_check_of_an_agent_that_read_none_costs_no_request() -> None:
    state = _state()
    state.agent_seen("ns", "a")
    state.referenced_secrets("ns", "a")  # a reconcile that read nothing (its ModelConfig is missing)
    later = time.monotonic() + 60
    assert state.due(later, set()) == ([], [])
    assert state.due(later + 53, set()) == ([], [])  # marked checked: the next one is an interval on
    assert state.kube.gets == []  # type: ignore[attr-defined]


def test_a_resync_is_due_one_period_after_the_last_reconcile_spread_per_agent() -> None:
    state = _state(resync=100)
    names = [f"agent-{i}" for i in range(20)]
    for name in names:
        state.agent_seen("ns", name)
    start = time.monotonic()
    assert state.due(start + 89, set()) == ([], [])
    assert sorted(state.due(start + 101, set())[0]) == sorted(("ns", name) for name in names)
    # each waits 90 to 100 s, fixed per Agent: Agents seen together do not all come due together
    first_due = {name: next(t for t in range(89, 102) if ("ns", name) in state.due(start + t, set())[0]) for name in names}
    assert len(set(first_due.values())) >= 5
    state._agents["ns", "agent-0"].reconciled_at -= 200  # seen long ago: due now
    assert ("ns", "agent-0") in state.due(time.monotonic(), set())[0]
    state.reconciling("ns", "agent-0")  # reconciled by some trigger: its resync moves a period on
    reconciled = time.monotonic()
    assert ("ns", "agent-0") not in state.due(reconciled + 89, set())[0]
    assert ("ns", "agent-0") in state.due(reconciled + 101, set())[0]
    state.forget("ns", "agent-1")  # deleted: no longer resynced
    assert ("ns", "agent-1") not in state.due(start + 101, set())[0]


def test_kopf_state_of_an_agent_written_by_an_earlier_operator_is_ignored_and_kept_in_memory() -> None:
    # Operators before 2026-11-26 kept kopf's last-handled state in an annotation on the Agent; this one keeps it in
    # memory. An Agent such an operator wrote still carries the annotation: it must not count as a change of the Agent
    # (else every upgraded Agent would look edited), and nothing is read back from it.
    from gatehouse_operator.settings import PREFIX, MemoryDiffBase

    old = kopf.Body({
        "apiVersion": "gatehouse.dev/v1alpha1", "kind": "Agent",
        "metadata": {"name": "a", "namespace": "ns", "uid": "u-1", "annotations": {
            f"{PREFIX}/last-handled-configuration": '{"spec": {"model": "older"}}', "team": "files"}},
        "spec": {"model": "m"},
    })
    new = kopf.Body({**old, "metadata": {**old["metadata"], "annotations": {"team": "files"}}})
    store = MemoryDiffBase()
    assert store.fetch(body=old) is None  # the annotation is not read back
    essence = store.build(body=old)
    assert essence == store.build(body=new)
    assert essence["metadata"]["annotations"] == {"team": "files"} and essence["spec"] == {"model": "m"}
    store.store(body=old, patch=kopf.Patch(), essence=essence)
    assert store.fetch(body=new) == essence
    store.forget("u-1")
    assert store.fetch(body=new) is None
