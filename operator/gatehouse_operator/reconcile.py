"""One reconcile of one Agent: read it, translate it, make its children match, write its status.

Every trigger ends here: the Agent's own create/update/resume handlers, a changed dependency
(ModelConfig, RemoteMCPServer, an Agent it uses as a tool; a Secret, found by the periodic Secret check), an event
of its Deployment that changed more than its status, the deletion of its state claim, and the periodic resync. (A
status-only change of the Deployment is no reconcile, nor is any other event of the claim: :func:`refresh_conditions`
brings ``Ready``, or ``StateReady``, alone up to date, when it changed.) Each run

1. reads the Agent fresh from the API (under a per-Agent lock, so triggers never interleave) -- or, for the Agent's
   own create/update/resume, takes it as kopf's watch event just showed it;
2. refuses a ``spec.deployment.serviceAccountName`` other than the Agent's own name (the runtime's identity is
   fixed, so that the admission policy can tell the runtime from users);
3. translates it with :func:`agent_runtime.contract.translator.translate` (``in_cluster``), reading the ModelConfig,
   RemoteMCPServers and the Agents it reaches through its Agent tools from the in-memory caches
   (:mod:`gatehouse_operator.dependencies`), generates the token
   Secret if the Agent names none (:mod:`gatehouse_operator.access`), and reads the referenced Secrets by name
   (their resourceVersion and key names, never a value; the Postgres URL's included) to check they exist and to
   compute the secrets hash;
4. on success renders the children (:mod:`gatehouse_operator.builders`) -- unless the spec moves the state to another
   store while requests are pending there (:mod:`gatehouse_operator.state_switch`: then nothing is applied) -- and
   creates or patches each one
   (:mod:`gatehouse_operator.apply`; the state claim by :mod:`gatehouse_operator.claims`) -- for an Agent never
   applied before (no ``status.configHash``) it creates them straight away instead of reading 404s first -- then
   the runtime's ServiceAccount among the subjects of the TokenReview ClusterRoleBinding (or not, as
   ``spec.access.kubernetesTokens`` says; :mod:`gatehouse_operator.tokenreview`); on failure leaves the last good
   children running;
5. checks the ToolApproval admission policy (:mod:`gatehouse_operator.admission`), writes ``status`` only if it
   differs (:mod:`gatehouse_operator.status`; ``Durable`` and ``StateReady`` from :mod:`gatehouse_operator.storage`
   and the claim just read) and posts one Event where it tells something the status does not: a warning with the
   reason when the Agent is not accepted (and its status changed), ``Reconciled`` naming what changed when children
   of an Agent applied before were created, patched or deleted. A new Agent's first apply posts none: its
   ``Accepted`` condition (``Reconciled``, its ``lastTransitionTime``, the config applied) says so already.

A run that raises (the API refused or was unreachable) is retried with backoff by the periodic loop, whatever
started it (``OperatorState.reconcile_failed``); every run is counted in :mod:`gatehouse_operator.metrics`.

With unchanged inputs a run costs one GET of the Agent, one per child (the state claim included), one per
referenced Secret (the access Secret at least) and one or two of the admission policy and its binding (the
TokenReview binding is read once for all Agents and kept), and writes nothing.
"""

from __future__ import annotations

import copy
import datetime
import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import kopf
from pydantic import ValidationError

from agent_runtime.contract.agent_config import AgentConfig, GatewayConfig
from agent_runtime.contract.errors import Problem, TranslationError, problems_from_validation
from agent_runtime.contract.resources import Agent, MCPGateway, RemoteMCPServer
from agent_runtime.contract.translator import access_files, database_env, translate, translate_gateway
from gatehouse_operator import (
    access,
    apply,
    approvers,
    builders,
    claims,
    deployment_status,
    metrics,
    state_switch,
    status,
    storage,
    tokenreview,
)
from gatehouse_operator.admission import admission_condition
from gatehouse_operator.dependencies import Dependencies, ReferencedSecrets, is_missing
from gatehouse_operator.kube import ApiException
from gatehouse_operator.settings import OperatorState

__all__ = ["Outcome", "reconcile", "refresh_conditions", "service_account_problem"]

MAX_MESSAGE = 1024


def utc_now() -> str:
    return datetime.datetime.now(tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Outcome:
    """What a reconcile did: whether the Agent was accepted, what changed, whether status was written."""

    accepted: bool
    reason: str
    changes: tuple[str, ...] = ()
    status_written: bool = False


def reconcile(
    state: OperatorState,
    deps: Dependencies,
    namespace: str,
    name: str,
    logger: kopf.Logger,
    clock: Callable[[], str] = utc_now,
    seen: Mapping[str, Any] | None = None,
    of: builders.OwnerKind = builders.AGENT,
) -> Outcome | None:
    """Reconcile the Agent ``namespace/name``; ``None`` if it is gone or being deleted.

    ``of``: :data:`builders.GATEWAY` reconciles the MCPGateway of that name instead, by the same steps, with the same
    bookkeeping for the periodic loop (its resync, and the retry with backoff of a reconcile that raised).

    ``seen``: the Agent as the trigger's own watch event showed it (its create/update/resume handlers), used instead
    of reading it again. A newer version only costs the status write a 409 and a read (:func:`_write_status`); a
    newer spec is handled by kopf's next update anyway.
    """
    with state.lock_for(namespace, name), metrics.DURATION.labels(of.kind).time():
        state.reconciling(of.kind, namespace, name)
        try:
            body = copy.deepcopy(dict(seen)) if seen is not None else state.kube.get_agent(namespace, name, of.plural)
            outcome = None
            if body is not None and not body.get("metadata", {}).get("deletionTimestamp"):
                outcome = _reconcile(state, deps, body, logger, clock())
        except Exception as exc:
            metrics.RECONCILES.labels(of.kind, "failed").inc()
            metrics.FAILURES.labels(of.kind, metrics.failure_code(exc)).inc()
            # Whatever started it (kopf retries only its own handlers, not its event handlers): retried with backoff.
            delay = state.reconcile_failed(of.kind, namespace, name)
            logger.warning("reconcile of %s %s/%s failed (%s): retrying in %.0fs", of.kind, namespace, name, exc, delay)
            raise
        state.reconcile_succeeded(of.kind, namespace, name)
        metrics.RECONCILES.labels(of.kind, "gone" if outcome is None else "accepted" if outcome.accepted else "rejected").inc()
        return outcome


def refresh_conditions(state: OperatorState, namespace: str, name: str, conditions: Sequence[status.StatusCondition],
                       of: builders.OwnerKind = builders.AGENT, clock: Callable[[], str] = utc_now) -> bool:
    """Bring only ``conditions`` (``Ready``, ``StateReady``) of the Agent (or MCPGateway, ``of``) ``namespace/name`` up to
    date, the runtime's own reason folded into ``Ready`` as a reconcile does. Whether the status was written.

    For an event of its Deployment that changed nothing but the Deployment's status, and changed what a condition
    says (:mod:`gatehouse_operator.deployment_status`): its children need no read. One GET of the Agent (the
    conditions are one list: the patch carries all of them), and one status patch guarded by its resourceVersion
    (after a 409, read and merged again). The conditions keep the ``observedGeneration`` of the status: this looked
    at no newer spec. The caller holds the Agent's lock.
    """
    body = state.kube.get_agent(namespace, name, of.plural)
    for attempt in range(3):
        if body is None or body.get("metadata", {}).get("deletionTimestamp"):
            return False
        current = body.get("status") or {}
        existing = list(current.get("conditions") or [])
        ours = [status.with_runtime_reason(c, existing) if c.type == "Ready" else c for c in conditions]
        wanted = status.merge_conditions(existing, ours, current.get("observedGeneration"), clock())
        if wanted == existing:
            return False
        try:
            state.kube.patch_agent_status(namespace, name, {"conditions": wanted},
                                          body["metadata"].get("resourceVersion"), of.plural)
            return True
        except ApiException as exc:
            if exc.status != 409 or attempt == 2:
                raise
            body = state.kube.get_agent(namespace, name, of.plural)
    return False


def service_account_problem(agent: builders.Owner) -> Problem | None:
    """A Problem when ``spec.deployment.serviceAccountName`` names an account other than the Agent's own."""
    named = agent.spec.deployment.service_account_name
    if named is None or named == agent.name:
        return None
    return Problem(
        "spec.deployment.serviceAccountName",
        f"{named!r} is not allowed: the runtime always runs as the ServiceAccount {agent.name!r} (named like the "
        "Agent), a fixed identity so that the admission policy can tell the runtime from users; remove the field",
    )


@dataclass(frozen=True)
class _Refused:
    """Why a spec is not applied: the reason of ``Accepted=False`` and its problems."""

    reason: str
    problems: list[Problem]


def _check_agent(
    state: OperatorState, deps: Dependencies, body: dict[str, Any]
) -> tuple[Agent, AgentConfig, ReferencedSecrets] | _Refused:
    """Parse and translate an Agent, with everything it names; what to apply, or why not."""
    try:
        agent = Agent.model_validate(body)
    except ValidationError as exc:
        return _Refused("InvalidSpec", problems_from_validation(exc))
    account = service_account_problem(agent)
    taken = deps.name_taken("Agent", agent.namespace, agent.name)
    if taken is not None:
        return _Refused("NameTaken", [taken])
    models, servers, problems = deps.resolve(agent)
    agents, agent_problems = deps.reachable_agents(agent)
    problems += agent_problems
    secrets = state.referenced_secrets(builders.AGENT.kind, agent.namespace, agent.name)
    try:
        config = translate(agent, models, servers, in_cluster=True, agents=agents)
    except TranslationError as exc:
        problems = problems + exc.problems
    else:
        problems += secrets.problems(config) + _database_problems(secrets, agent)
    if account is not None:
        return _Refused("ServiceAccountNotAllowed", [account, *problems])
    if problems:
        return _Refused("DependencyMissing" if is_missing(problems) else "InvalidSpec", problems)
    return agent, config, secrets


def _check_gateway(
    state: OperatorState, deps: Dependencies, body: dict[str, Any]
) -> tuple[MCPGateway, GatewayConfig, ReferencedSecrets] | _Refused:
    """As :func:`_check_agent`, for an MCPGateway: its one upstream (none: hooks only) instead of model and tools."""
    try:
        gateway = MCPGateway.model_validate(body)
    except ValidationError as exc:
        return _Refused("InvalidSpec", problems_from_validation(exc))
    account = service_account_problem(gateway)
    taken = deps.name_taken("MCPGateway", gateway.namespace, gateway.name)
    if taken is not None:
        return _Refused("NameTaken", [taken])
    servers: dict[str, RemoteMCPServer] = {}
    problems: list[Problem] = []
    if gateway.spec.upstream is not None:
        servers, problems = deps.mcp_servers(gateway.namespace, [gateway.spec.upstream.name])
    secrets = state.referenced_secrets(builders.GATEWAY.kind, gateway.namespace, gateway.name)
    try:
        config = translate_gateway(gateway, servers, in_cluster=True)
    except TranslationError as exc:
        problems = problems + exc.problems
    else:
        problems += secrets.problems(config) + _database_problems(secrets, gateway)
    if account is not None:
        return _Refused("ServiceAccountNotAllowed", [account, *problems])
    if problems:
        return _Refused("DependencyMissing" if is_missing(problems) else "InvalidSpec", problems)
    return gateway, config, secrets


def _reconcile(state: OperatorState, deps: Dependencies, body: dict[str, Any], logger: kopf.Logger, now: str) -> Outcome:
    admission = admission_condition(state.kube, state.config, state.admission)
    checked = (_check_gateway if body.get("kind") == builders.GATEWAY.kind else _check_agent)(state, deps, body)
    if isinstance(checked, _Refused):
        return _reject(state, body, checked.reason, checked.problems, logger, now, admission)
    agent, config, secrets = checked

    applied: list[apply.Applied] = []
    create_first = not (body.get("status") or {}).get("configHash")
    files = access_files(agent)
    try:
        generated = access.ensure_access_secret(state.kube, secrets, agent, body, create_first=create_first)
    except ApiException as exc:
        raise _failed(state, body, "Secret", files[0].secret, exc, logger, now, admission) from exc
    if generated is not None:
        _record(state, agent, generated, applied)
    problems = secrets.problems(config, files)
    if problems:
        return _reject(state, body, "DependencyMissing", problems, logger, now, admission)

    inputs = builders.BuildInputs(
        runtime_image=state.config.runtime_image, secrets_hash=_with_database(secrets.hash(config, files), secrets, agent),
        api_token_secret=state.config.api_token_secret, api_token_key=state.config.api_token_key,
        network_policy=state.config.network_policy,
    )
    children = builders.desired_children(agent, body, config, inputs)
    if not create_first:
        problem = _held_switch(state, body, next(c for c in children if c["kind"] == "Deployment"), agent)
        if problem is not None:  # nothing of the new spec is applied: the old pods keep serving what is pending
            return _reject(state, body, state_switch.HELD, [problem], logger, now, admission)
    claim: claims.ClaimResult | None = None
    for child in children:
        try:
            if child["kind"] == "PersistentVolumeClaim":
                claim = claims.ensure_claim(state.kube, child, create_first=create_first)
                applied.append(claim.applied)  # its events are compared by StateReady (claim_status), not version
            else:
                _record(state, agent, apply.ensure(state.kube, child, create_first=create_first), applied)
        except ApiException as exc:
            raise _failed(state, body, child["kind"], child["metadata"]["name"], exc, logger, now, admission) from exc
    binding = state.tokenreview
    try:
        sa = builders.service_account_name(agent)
        wanted = config.access.kubernetes_tokens
        if binding.grant(agent.namespace, sa) if wanted else binding.revoke(agent.namespace, sa):
            applied.append(apply.Applied(tokenreview.BINDING, binding.name, "patched", {}))  # a subject added or removed
    except ApiException as exc:
        raise _failed(state, body, tokenreview.BINDING, binding.name, exc, logger, now, admission) from exc
    except tokenreview.BindingUnusable as exc:
        return _reject(state, body, "ReconcileFailed", [Problem("spec.access.kubernetesTokens", str(exc))], logger, now,
                       admission)

    digest = builders.config_hash(config)
    deployment = next(a.obj for a in applied if a.kind == "Deployment")
    # what a later event of it is compared with, to tell a status-only change (deployment_status)
    layout = storage.layout(agent)
    notes = claim.notes if claim else ()
    state_ready = claims.state_condition(layout, claim.applied.obj if claim else None, notes)
    state.deployment_applied(agent.namespace, agent.name, deployment_status.applied(
        next(c for c in children if c["kind"] == "Deployment"), deployment, layout, state_ready, notes))
    accepted = status.StatusCondition("Accepted", True, "Reconciled",
                                      f"{type(config).__name__} {digest[:12]} is applied")
    conditions = (storage.durable_condition(agent), state_ready, approvers.approvers_condition(config))
    written = _write_status(state, body, accepted, status.ready_condition(deployment), digest, now, admission, conditions)
    changes = tuple(str(a) for a in applied if a.action != "unchanged")
    if changes:
        if not create_first:  # a first apply is in the status (Accepted): an Event would only repeat it
            _post_event(state, body, "Normal", "Reconciled", "; ".join(changes), logger, now)
        logger.info("reconciled %s/%s: %s", agent.namespace, agent.name, "; ".join(changes))
    return Outcome(True, "Reconciled", changes, written)


def _held_switch(state: OperatorState, body: dict[str, Any], deployment: dict[str, Any],
                 agent: builders.Owner) -> Problem | None:
    """Why the state backend's switch the spec asks for is held (:mod:`gatehouse_operator.state_switch`), if it is: an
    Agent's pending requests, or an MCPGateway's held calls, alike."""
    if not state_switch.worth_checking(body):
        return None
    running = storage.store_of(state.kube.get("Deployment", agent.namespace, agent.name))
    target = storage.layout(agent).kind
    return state_switch.held(
        body, running, storage.store_of(deployment), "sqlite" if target == "per-pod" else target,
        lambda: state_switch.pending_count(body, state.kube.list_tool_approvals(agent.namespace)),
    )


def _post_event(state: OperatorState, body: Mapping[str, Any], type_: str, reason: str, message: str,
                logger: kopf.Logger, now: str) -> None:
    """One Event on the Agent, posted here rather than through kopf (whose Events need a kopf handler's context: the
    periodic resync has none). Best effort: an Event the API refuses changes nothing else."""
    meta = body["metadata"]
    event = {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
        "involvedObject": {"apiVersion": body.get("apiVersion"), "kind": body.get("kind"), "name": meta["name"],
                           "namespace": meta["namespace"], "uid": meta.get("uid")},
        "type": type_, "reason": reason, "message": message[:MAX_MESSAGE],
        "source": {"component": builders.MANAGED_BY}, "reportingComponent": builders.MANAGED_BY,
        "firstTimestamp": now, "lastTimestamp": now, "count": 1,
    }
    try:
        state.kube.create(event)
    except ApiException as exc:
        logger.warning("Event %s on %s %s/%s not posted: %s %s", reason, body.get("kind"), meta["namespace"], meta["name"],
                       exc.status, exc.reason)


def _database_problems(secrets: ReferencedSecrets, agent: builders.Owner) -> list[Problem]:
    """A Problem when the Secret key holding the Postgres URL (``spec.state.postgres.urlSecretRef``) is absent."""
    ref = database_env(agent)
    if ref is None:
        return []
    found = secrets.get(ref.secret)
    if found is None:
        return [Problem("spec.state.postgres.urlSecretRef", f"Secret {ref.secret!r} not found in namespace {agent.namespace!r}")]
    if ref.key not in found.keys:
        return [Problem("spec.state.postgres.urlSecretRef", f"Secret {ref.secret!r} has no key {ref.key!r}")]
    return []


def _with_database(secrets_hash: str, secrets: ReferencedSecrets, agent: builders.Owner) -> str:
    """``secrets_hash`` extended by the Postgres URL Secret's version: the URL is read at start, so a rotated one
    rolls the pods."""
    ref = database_env(agent)
    if ref is None:
        return secrets_hash
    found = secrets.get(ref.secret)
    version = found.resource_version if found is not None else ""
    return hashlib.sha256(f"{secrets_hash}\n{ref.secret}/{ref.key}@{version}".encode()).hexdigest()


def _record(state: OperatorState, agent: builders.Owner, done: apply.Applied, applied: list[apply.Applied]) -> None:
    """Keep what was applied, and remember its version so the watch event echoing our own write is skipped."""
    applied.append(done)
    state.saw(done.kind, agent.namespace, done.name, done.obj["metadata"].get("resourceVersion", ""))


def _failed(
    state: OperatorState, body: dict[str, Any], kind: str, name: str, exc: ApiException, logger: kopf.Logger, now: str,
    admission: status.StatusCondition,
) -> kopf.TemporaryError:
    """Report a write the API refused (Accepted=False, ReconcileFailed); the error to raise so kopf retries."""
    message = f"{kind}/{name}: {exc.status} {exc.reason}"
    _reject(state, body, "ReconcileFailed", [Problem("", message)], logger, now, admission)
    return kopf.TemporaryError(message, delay=10)


def _reject(
    state: OperatorState, body: dict[str, Any], reason: str, problems: list[Problem], logger: kopf.Logger, now: str,
    admission: status.StatusCondition,
) -> Outcome:
    """Accepted=False with every problem in the message; the last good children keep running."""
    message = "; ".join(str(p) for p in problems)
    if len(message) > MAX_MESSAGE:
        message = message[: MAX_MESSAGE - 1] + "…"
    meta = body["metadata"]
    deployment = state.kube.get("Deployment", meta["namespace"], meta["name"])
    accepted = status.StatusCondition("Accepted", False, reason, message)
    written = _write_status(state, body, accepted, status.ready_condition(deployment), None, now, admission)
    if written:
        _post_event(state, body, "Warning", reason, message, logger, now)
        logger.warning("%s %s/%s not accepted (%s): %s", body.get("kind"), meta["namespace"], meta["name"], reason, message)
    return Outcome(False, reason, (), written)


def _write_status(
    state: OperatorState,
    body: dict[str, Any],
    accepted: status.StatusCondition,
    ready: status.StatusCondition,
    config_hash: str | None,
    now: str,
    admission: status.StatusCondition,
    conditions: tuple[status.StatusCondition, ...] = (),
) -> bool:
    """Write the status fields the operator owns (never the runtime's: ``pendingApprovals``, ``RuntimeReady``), guarded
    by the Agent's resourceVersion; when the runtime wrote in between (409), read the Agent again and merge anew."""
    plural = builders.GATEWAY.plural if body.get("kind") == builders.GATEWAY.kind else builders.AGENT.plural
    for attempt in range(3):
        meta = body["metadata"]
        current = body.get("status") or {}
        wanted = status.agent_status(
            current, generation=meta.get("generation"), accepted=accepted, ready=ready, config_hash=config_hash, now=now,
            admission=admission, state=conditions,
        )
        if wanted == current:
            return False
        patch = {key: wanted[key] for key in status.OWNED_FIELDS if key in wanted}
        try:
            state.kube.patch_agent_status(meta["namespace"], meta["name"], patch, meta.get("resourceVersion"), plural)
            return True
        except ApiException as exc:
            fresh = state.kube.get_agent(meta["namespace"], meta["name"], plural) if exc.status == 409 and attempt < 2 else None
            if fresh is None:
                raise
            body = fresh
    return False
