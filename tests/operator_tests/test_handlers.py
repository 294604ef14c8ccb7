"""The child-event handler: an event that only echoes the operator's own write does not start a reconcile; the
periodic Secret check: a reconcile only when a Secret the Agent uses changed, no request for an Agent that uses none."""

from __future__ import annotations

import asyncio
import logging
import threading
import time

import kopf
import pytest

from gatehouse_operator import builders, handlers
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
    monkeypatch.setattr(handlers, "_run", lambda memo, namespace, name, logger, kwargs: runs.append(f"{namespace}/{name}"))
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


class _Stopped:
    """kopf.DaemonStopped for ``ticks`` rounds, without waiting."""

    def __init__(self, ticks: int) -> None:
        self.ticks = ticks

    async def wait(self, timeout: float) -> bool:
        self.ticks -= 1
        return self.ticks < 0


def _memo_with(kube: _Secrets) -> kopf.Memo:
    memo = kopf.Memo()
    memo.state = OperatorState(config=OperatorConfig(), kube=kube)  # type: ignore[arg-type]
    return memo


def test_the_secret_check_reconciles_only_when_a_version_moved(reconciled: list[str]) -> None:
    kube = _Secrets(tok="1", **{"a-config": "5"})
    memo = _memo_with(kube)
    state: OperatorState = memo.state
    state.referenced_secrets("ns", "a").get("tok")  # what the last reconcile read ...
    state.referenced_secrets("ns", "a").get("jwks")  # ... replaced by the next one: jwks, absent
    state.saw("Secret", "ns", "a-config", "5")  # and its own config Secret, as it left it
    log = logging.getLogger("test")
    kube.gets.clear()
    handlers._check_secrets(memo, "ns", "a", log, {})
    assert (kube.gets, reconciled) == (["jwks", "a-config"], [])
    kube.versions["jwks"] = "2"  # the missing Secret appears
    handlers._check_secrets(memo, "ns", "a", log, {})
    assert reconciled == ["ns/a"]
    state.referenced_secrets("ns", "a").get("jwks")  # (the reconcile read it)
    kube.versions["a-config"] = "6"  # edited by hand
    handlers._check_secrets(memo, "ns", "a", log, {})
    assert reconciled == ["ns/a", "ns/a"]


def test_the_secret_check_of_an_agent_that_read_none_costs_no_request(reconciled: list[str]) -> None:
    kube = _Secrets(tok="1")
    memo = _memo_with(kube)
    asyncio.run(handlers.agent_secret_check(_Stopped(3), memo, "ns", "a", logging.getLogger("test")))  # type: ignore[arg-type]
    assert kube.gets == []
    memo.state.referenced_secrets("ns", "a").get("tok")
    kube.gets.clear()
    kube.versions["tok"] = "2"
    asyncio.run(handlers.agent_secret_check(_Stopped(2), memo, "ns", "a", logging.getLogger("test")))  # type: ignore[arg-type]
    assert kube.gets == ["tok", "tok"] and reconciled == ["ns/a", "ns/a"]  # (the stand-in reconcile reads nothing)


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
