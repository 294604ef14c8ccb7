"""The child-event handler: an event that only echoes the operator's own write does not start a reconcile."""

from __future__ import annotations

import asyncio
import logging
import threading
import time

import kopf
import pytest

from gatehouse_operator import builders, handlers
from gatehouse_operator.settings import OperatorConfig, OperatorState


def _secret_event(resource_version: str) -> kopf.Body:
    return kopf.Body({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "a-config", "namespace": "ns", "resourceVersion": resource_version,
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
    lock.acquire()  # a reconcile of Agent a is running: it has just created the Secret (version 7) ...

    def finish() -> None:
        time.sleep(0.3)
        state.saw("Secret", "ns", "a-config", "7")  # ... and records the version before it lets go
        lock.release()

    thread = threading.Thread(target=finish)
    thread.start()
    asyncio.run(handlers._owner_changed("Secret", "ADDED", _secret_event("7"), memo, logging.getLogger("test"), {}))
    thread.join()
    assert reconciled == []


@pytest.mark.parametrize(("event", "version"), [("MODIFIED", "8"), ("DELETED", "7")])
def test_a_change_by_someone_else_reconciles_the_agent(reconciled: list[str], event: str, version: str) -> None:
    memo = _memo()
    memo.state.saw("Secret", "ns", "a-config", "7")
    asyncio.run(handlers._owner_changed("Secret", event, _secret_event(version), memo, logging.getLogger("test"), {}))
    assert reconciled == ["ns/a"]


def test_the_initial_listing_is_left_to_resume(reconciled: list[str]) -> None:
    asyncio.run(handlers._owner_changed("Secret", None, _secret_event("7"), _memo(), logging.getLogger("test"), {}))
    assert reconciled == []
