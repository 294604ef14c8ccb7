"""The child-event handler: an event that only echoes the operator's own write does not start a reconcile; the
claim-event handler: a claim's event waits for a reconcile in flight and is compared with what it recorded, costs
nothing for an Agent no reconcile applied, and a deleted claim reconciles its Agent; the periodic loop: a Secret
check reconciles only when a Secret the Agent uses changed, costs no request for an Agent that uses none, and
comes one interval after the reconcile that read them; a resync one period after the last reconcile; Agents and
MCPGateways alike, each by its own kind's reconcile (a failed one retried with backoff); a gateway's held calls
counted for its state switch."""

from __future__ import annotations

import asyncio
import logging
import threading
import time

import kopf
import pytest

from gatehouse_operator import builders, claims, deployment_status, handlers, periodic, state_switch, storage
from gatehouse_operator.kube import ApiException
from gatehouse_operator.reconcile import reconcile
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


class _Agents:
    """The Agent ``ns/a`` as the API answers a GET, with the status patches it was sent."""

    def __init__(self) -> None:
        self.gets = 0
        self.patches: list[dict[str, object]] = []

    def get_agent(self, namespace: str, name: str, plural: str = "agents") -> dict[str, object]:
        self.gets += 1
        return {"metadata": {"name": name, "namespace": namespace, "resourceVersion": "5"},
                "status": {"observedGeneration": 1, "conditions": []}}

    def patch_agent_status(self, namespace: str, name: str, patch: dict[str, object], version: str | None,
                           plural: str = "agents") -> None:
        self.patches.append(patch)


CLAIM_LAYOUT = storage.StateLayout("sqlite", claim="a-state")


def _claim_event(phase: str) -> kopf.Body:
    return kopf.Body({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "a-state", "namespace": "ns", "resourceVersion": "9",
                     "labels": {builders.AGENT_LABEL: "a", "app.kubernetes.io/managed-by": builders.MANAGED_BY}},
        "spec": {"storageClassName": "standard"}, "status": {"phase": phase, "capacity": {"storage": "1Gi"}},
    })


def _record(phase: str) -> deployment_status.AppliedDeployment:
    """What a reconcile that found the claim in ``phase`` records."""
    claim = dict(_claim_event(phase))
    return deployment_status.applied({"metadata": {}}, {"metadata": {"generation": 1}}, CLAIM_LAYOUT,
                                     claims.state_condition(CLAIM_LAYOUT, claim))


def test_a_claim_event_while_a_reconcile_is_in_flight_is_compared_with_what_it_records() -> None:
    """The reconcile read the claim Pending just before it bound: the binding's event waits for it, then shows."""
    memo, kube = kopf.Memo(), _Agents()
    state = memo.state = OperatorState(config=OperatorConfig(), kube=kube)  # type: ignore[arg-type]
    lock = state.lock_for("ns", "a")
    lock.acquire()  # a reconcile of Agent a is running: it read the claim Pending ...

    def finish() -> None:
        time.sleep(0.3)
        state.deployment_applied("ns", "a", _record("Pending"))  # ... and records it before it lets go
        lock.release()

    thread = threading.Thread(target=finish)
    thread.start()
    asyncio.run(handlers.claim_event("MODIFIED", _claim_event("Bound"), memo, logging.getLogger("test")))
    thread.join()
    assert kube.gets == 1 and len(kube.patches) == 1
    (condition,) = kube.patches[0]["conditions"]  # type: ignore[misc]
    assert (condition["type"], condition["status"], condition["reason"]) == ("StateReady", "True", "ClaimBound")
    record = state.applied_deployment("ns", "a")
    assert record is not None and record.state_ready is not None and record.state_ready.reason == "ClaimBound"
    # told: the claim's next events cost nothing
    asyncio.run(handlers.claim_event("MODIFIED", _claim_event("Bound"), memo, logging.getLogger("test")))
    assert kube.gets == 1 and len(kube.patches) == 1


@pytest.mark.parametrize("event", [None, "MODIFIED", "DELETED"])
def test_a_claim_of_an_agent_no_reconcile_applied_costs_nothing(reconciled: list[str], event: str | None) -> None:
    """None yet, one refused, or the Agent gone (its claim outlives it by default): no request, and no lock left."""
    memo, kube = kopf.Memo(), _Agents()
    state = memo.state = OperatorState(config=OperatorConfig(), kube=kube)  # type: ignore[arg-type]
    asyncio.run(handlers.claim_event(event, _claim_event("Bound"), memo, logging.getLogger("test")))
    assert (kube.gets, kube.patches, reconciled) == (0, [], [])
    assert not state.lock_held("ns", "a") and ("ns", "a") not in state._locks


def test_a_claim_deleted_while_its_agent_stands_reconciles_it(reconciled: list[str]) -> None:
    memo = _memo()
    memo.state.deployment_applied("ns", "a", _record("Bound"))
    asyncio.run(handlers.claim_event("DELETED", _claim_event("Bound"), memo, logging.getLogger("test")))
    assert reconciled == ["ns/a"]


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


KEY = ("Agent", "ns", "a")


def _memo_with(kube: _Secrets) -> kopf.Memo:
    memo = kopf.Memo()
    memo.state = OperatorState(config=OperatorConfig(), kube=kube)  # type: ignore[arg-type]
    return memo


@pytest.fixture
def rechecked() -> list[str]:
    return []


def _again(runs: list[str]) -> periodic.Reconcile:
    return lambda state, deps, namespace, name, logger: runs.append(f"{namespace}/{name}")


def test_the_secret_check_reconciles_only_when_a_version_moved(rechecked: list[str]) -> None:
    kube = _Secrets(tok="1", **{"a-config": "5"})
    state: OperatorState = _memo_with(kube).state
    state.referenced_secrets("Agent", "ns", "a").get("tok")  # what the last reconcile read ...
    state.referenced_secrets("Agent", "ns", "a").get("jwks")  # ... replaced by the next one: jwks, absent
    state.saw("Secret", "ns", "a-config", "5")  # and its own config Secret, as it left it
    log = logging.getLogger("test")
    kube.gets.clear()
    periodic.check_secrets(state, None, KEY, log, _again(rechecked))  # type: ignore[arg-type]
    assert (kube.gets, rechecked) == (["jwks", "a-config"], [])
    kube.versions["jwks"] = "2"  # the missing Secret appears
    periodic.check_secrets(state, None, KEY, log, _again(rechecked))  # type: ignore[arg-type]
    assert rechecked == ["ns/a"]
    state.referenced_secrets("Agent", "ns", "a").get("jwks")  # (the reconcile read it)
    kube.versions["a-config"] = "6"  # edited by hand
    periodic.check_secrets(state, None, KEY, log, _again(rechecked))  # type: ignore[arg-type]
    assert rechecked == ["ns/a", "ns/a"]


def _state(resync: float = 300, check: float = 60) -> OperatorState:
    return OperatorState(config=OperatorConfig(resync_seconds=resync, secret_check_seconds=check), kube=_Secrets(tok="1"))  # type: ignore[arg-type]


def test_a_secret_check_is_due_one_interval_after_the_reconcile_that_read_them() -> None:
    state = _state()
    state.seen("Agent", "ns", "a")
    start = time.monotonic()
    assert state.due(start + 3600, set())[1] == []  # not reconciled yet: nothing read, nothing to check
    state.reconciling("Agent", "ns", "a")
    state.referenced_secrets("Agent", "ns", "a").get("tok")  # a reconcile reads its Secret, late after the Agent appeared
    read = time.monotonic()
    assert state.due(read + 53, set()) == ([], [])  # within the interval (times the spread, at least 0.9)
    assert state.due(read + 60, set()) == ([], [KEY])
    assert state.due(read + 60, {KEY}) == ([], [])  # a job of the Agent is running
    state.secrets_checked("Agent", "ns", "a")
    assert state.due(time.monotonic() + 53, set()) == ([], [])


def test_the_secret_check_of_an_agent_that_read_none_costs_no_request() -> None:
    state = _state()
    state.seen("Agent", "ns", "a")
    state.referenced_secrets("Agent", "ns", "a")  # a reconcile that read nothing (its ModelConfig is missing)
    later = time.monotonic() + 60
    assert state.due(later, set()) == ([], [])
    assert state.due(later + 53, set()) == ([], [])  # marked checked: the next one is an interval on
    assert state.kube.gets == []  # type: ignore[attr-defined]


def test_a_resync_is_due_one_period_after_the_last_reconcile_spread_per_agent() -> None:
    state = _state(resync=100)
    names = [f"agent-{i}" for i in range(20)]
    for name in names:
        state.seen("Agent", "ns", name)
    start = time.monotonic()
    assert state.due(start + 89, set()) == ([], [])
    assert sorted(state.due(start + 101, set())[0]) == sorted(("Agent", "ns", name) for name in names)
    # each waits 90 to 100 s, fixed per Agent: Agents seen together do not all come due together
    first_due = {name: next(t for t in range(89, 102) if ("Agent", "ns", name) in state.due(start + t, set())[0])
                 for name in names}
    assert len(set(first_due.values())) >= 5
    state._due["Agent", "ns", "agent-0"].reconciled_at -= 200  # seen long ago: due now
    assert ("Agent", "ns", "agent-0") in state.due(time.monotonic(), set())[0]
    state.reconciling("Agent", "ns", "agent-0")  # reconciled by some trigger: its resync moves a period on
    reconciled = time.monotonic()
    assert ("Agent", "ns", "agent-0") not in state.due(reconciled + 89, set())[0]
    assert ("Agent", "ns", "agent-0") in state.due(reconciled + 101, set())[0]
    state.forget("Agent", "ns", "agent-1")  # deleted: no longer resynced
    assert ("Agent", "ns", "agent-1") not in state.due(start + 101, set())[0]


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


GATEWAY_KEY = ("MCPGateway", "ns", "a")


class _Down:
    """An API server that answers every read with a 503."""

    def get_agent(self, namespace: str, name: str, plural: str = "agents") -> None:
        raise ApiException(status=503, reason="Service Unavailable")


def test_a_gateways_failed_reconcile_is_retried_by_the_loop_with_backoff() -> None:
    state = OperatorState(config=OperatorConfig(), kube=_Down())  # type: ignore[arg-type]
    with pytest.raises(ApiException):
        reconcile(state, None, "ns", "a", logging.getLogger("test"), of=builders.GATEWAY)  # type: ignore[arg-type]
    assert state.due(time.monotonic() + 0.5, set()) == ([], [])
    assert state.due(time.monotonic() + 1.5, set())[0] == [GATEWAY_KEY]  # 1 s later, then 2, 4, ...


def test_the_loop_runs_each_kinds_own_reconcile_an_agent_and_a_gateway_of_one_name_apart() -> None:
    """The loop is keyed by kind, namespace and name: an Agent and an MCPGateway named alike are two objects, each
    resynced (and Secret-checked) with its own kind's reconcile."""
    state = _state(resync=100)
    state.seen("Agent", "ns", "a")
    state.seen("MCPGateway", "ns", "a")
    assert sorted(state.due(time.monotonic() + 101, set())[0]) == sorted([KEY, GATEWAY_KEY])
    runs: list[str] = []

    def by(kind: str) -> periodic.Reconcile:
        return lambda state, deps, namespace, name, logger: runs.append(f"{kind} {namespace}/{name}")

    async def tick() -> None:
        loop = periodic.Periodic(state, None, logging.getLogger("test"),  # type: ignore[arg-type]
                                 {"Agent": by("Agent"), "MCPGateway": by("MCPGateway")})
        loop._collected = time.monotonic() + 3600  # no binding clean-up in this tick
        loop.tick(time.monotonic() + 101)
        await asyncio.gather(*loop._jobs)

    asyncio.run(tick())
    assert sorted(runs) == ["Agent ns/a", "MCPGateway ns/a"]
    state.forget("MCPGateway", "ns", "a")  # the gateway deleted: the Agent stays in the loop
    assert state.due(time.monotonic() + 101, set())[0] == [KEY]


def test_the_default_loop_reconciles_a_gateway_as_a_gateway(monkeypatch: pytest.MonkeyPatch) -> None:
    kinds: list[str] = []
    monkeypatch.setattr(periodic, "reconcile", lambda state, deps, namespace, name, logger, of: kinds.append(of.kind))
    for kind, again in periodic.kinds().items():
        again(None, None, "ns", "a", logging.getLogger("test"))  # type: ignore[arg-type]
        assert kinds[-1] == kind
    assert kinds == ["Agent", "MCPGateway"]


def test_a_gateways_held_calls_count_by_its_gateway_ref() -> None:
    gateway = {"kind": "MCPGateway", "metadata": {"name": "gw", "namespace": "ns"}, "status": {}}
    approvals = [
        {"spec": {"gatewayRef": "gw"}, "status": {"phase": "Pending"}},
        {"spec": {"gatewayRef": "gw"}, "status": {"phase": "Approved"}},
        {"spec": {"agentRef": "gw"}, "status": {"phase": "Pending"}},  # an Agent's of the same name: not its own
    ]
    assert state_switch.pending_count(gateway, approvals) == 1
    assert state_switch.pending_count({**gateway, "kind": "Agent"}, approvals) == 1
    problem = state_switch.held(gateway, "sqlite", "postgres", "postgres", lambda: 1)
    assert problem is not None
    assert "kubectl get toolapprovals -n ns -l gatehouse.dev/gateway=gw" in problem.message
    assert "kubectl annotate mcpgateway -n ns gw gatehouse.dev/force-state-switch=postgres" in problem.message
