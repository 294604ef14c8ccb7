"""kopf handlers: thin entry points that name the trigger and hand over to :func:`reconcile.reconcile`.

=====================  ==========================================================  =====================
handler                trigger                                                     reconciles
=====================  ==========================================================  =====================
agent_create/update/   the Agent itself (kopf diffs spec, labels, annotations)     that Agent
agent_resume           operator start-up, for every existing Agent
agent_delete           deletion while something else holds the Agent (optional,    -
                       best effort: Agents carry no finalizer): revokes its
                       TokenReview right (a subject of a cluster-scoped binding)
modelconfig_event      a ModelConfig added/changed/deleted                         Agents using it
mcpserver_event        a RemoteMCPServer added/changed/deleted                     Agents using it, and
                                                                                   MCPGateways naming it
agent_event            an Agent added, deleted or its spec changed                 Agents using it as a
                       (every event records the Agent for the periodic loop;       tool (and, when its
                       DELETED revokes its TokenReview right at once, its other    runtime reported
                       children go by their ownerReferences)                       readiness, or its state
                                                                                   switch is held, that Agent;
                                                                                   added or deleted, an
                                                                                   MCPGateway of its name)
deployment_event       a Deployment we manage edited or deleted by hand            its Agent (or
                       (another generation, a rendered label changed); its status  MCPGateway); a status
                       alone (the Deployment controller's writes: nothing drifted, change: no reconcile;
                       :mod:`gatehouse_operator.deployment_status`; no child read) ``Ready`` refreshed when
                                                                                   it changed
claim_event            a state PersistentVolumeClaim we label: bound, lost, grown  its Agent (or MCPGateway),
                       (:mod:`gatehouse_operator.claim_status`), or deleted        when deleted; else no
                                                                                   reconcile: ``StateReady``
                                                                                   refreshed when it changed
gateway_create/update/ an MCPGateway itself, at start-up, its deletion (as for     that MCPGateway
resume/delete          an Agent; its children by the Agent's builders and steps)
gateway_event          an MCPGateway added, deleted or changed: as agent_event     that MCPGateway (when its
                       for the object itself (the periodic loop, DELETED, the      runtime reported readiness,
                       runtime's readiness, a held switch); nothing uses it        or its switch is held); an
                                                                                   Agent of its name, when it
                                                                                   was added or deleted
admission_policy_/     the ToolApproval admission policy or any policy binding     every Agent, when the
binding_event          changed (the verdict is read again, once)                   verdict changed
=====================  ==========================================================  =====================

No handler is a daemon and none requires a finalizer: :mod:`gatehouse_operator.periodic` runs one loop for all
Agents and MCPGateways -- each one's resync (``GATEHOUSE_RESYNC_SECONDS`` after its last reconcile), its Secret check
(``GATEHOUSE_SECRET_CHECK_INTERVAL`` after its last reconcile or check: GETs the Secrets its last reconcile read and
its ``<agent>-config``, compares their resourceVersions, reconciles it when one changed) and the clean-up of the
TokenReview right of runtimes whose Agent or MCPGateway is gone (at start-up and every resync period).

Secrets are never listed or watched (RBAC cannot narrow a watch by label, so a watch would need every Secret in
the cluster): a reconcile reads the ones its Agent references by name (:mod:`gatehouse_operator.dependencies`),
and the periodic Secret check notices a rotated, created or deleted one -- the generated ``<agent>-access`` and the
``<agent>-config`` edited by hand included -- within one interval. An Agent whose last reconcile read none, and
has no config Secret yet, costs no request.

The event handlers skip kopf's initial listing (``type is None``): ``agent_resume`` already covers every
Agent at start-up (``claim_event`` compares it too: cheap, and a relist after a broken watch may carry a claim that
bound meanwhile). The state PersistentVolumeClaim is watched because nothing else tells when it binds: no pod has
to run for that, so no Deployment event follows. Other children (Service, ServiceAccount, Role, RoleBinding) are
not watched: the periodic resync restores them (its Secrets: the Secret check). The Agent
handlers are synchronous (kopf runs them in worker threads). The event handlers are ``async`` and decide in
the event loop whether there is anything to do -- most events are echoes of our own writes -- and only a
reconcile goes to a worker thread.

kopf passes ``namespace=None`` only for cluster-scoped objects. Every kind watched here is namespaced: should
an Agent come without one, its reconciling handlers fail for good (:class:`kopf.PermanentError`, never retried);
any other object without one has no dependents.
"""

from __future__ import annotations

import asyncio
from typing import Any

import kopf

from agent_runtime.contract.resources import GROUP, VERSION
from gatehouse_operator import builders, claim_status, deployment_status, periodic, state_switch, status, tokenreview
from gatehouse_operator.dependencies import Dependencies
from gatehouse_operator.kube import ApiException
from gatehouse_operator.reconcile import reconcile, refresh_conditions
from gatehouse_operator.settings import OperatorState

__all__ = [
    "admission_binding_event",
    "admission_policy_event",
    "agent_create",
    "agent_delete",
    "agent_event",
    "agent_resume",
    "agent_update",
    "claim_event",
    "deployment_event",
    "gateway_create",
    "gateway_delete",
    "gateway_event",
    "gateway_resume",
    "gateway_update",
    "mcpserver_event",
    "modelconfig_event",
]

AGENTS = (GROUP, VERSION, "agents")
GATEWAYS = (GROUP, VERSION, builders.GATEWAY.plural)


def _agent_namespace(namespace: str | None, name: str) -> str:
    """The namespace of an Agent (a namespaced kind); refused for good if kopf has none to give."""
    if namespace is None:
        raise kopf.PermanentError(f"agent {name} has no namespace: the Agent CRD must be namespaced")
    return namespace


def _run(memo: kopf.Memo, namespace: str, name: str, logger: kopf.Logger, kwargs: dict[str, Any],
         seen: kopf.Body | None = None, of: builders.OwnerKind = builders.AGENT) -> None:
    state: OperatorState = memo.state
    reconcile(state, Dependencies.from_kwargs(kwargs), namespace, name, logger, seen=seen, of=of)


# The Agent's own handlers reconcile it as their event shows it (no GET of the Agent).
@kopf.on.create(*AGENTS)
def agent_create(memo: kopf.Memo, namespace: str | None, name: str, body: kopf.Body, logger: kopf.Logger,
                 **kwargs: Any) -> None:
    _run(memo, _agent_namespace(namespace, name), name, logger, kwargs, seen=body)


@kopf.on.update(*AGENTS)
def agent_update(memo: kopf.Memo, namespace: str | None, name: str, body: kopf.Body, logger: kopf.Logger,
                 **kwargs: Any) -> None:
    _run(memo, _agent_namespace(namespace, name), name, logger, kwargs, seen=body)


@kopf.on.resume(*AGENTS)
def agent_resume(memo: kopf.Memo, namespace: str | None, name: str, body: kopf.Body, logger: kopf.Logger,
                 **kwargs: Any) -> None:
    _run(memo, _agent_namespace(namespace, name), name, logger, kwargs, seen=body)


@kopf.on.delete(*AGENTS, optional=True)  # optional: no finalizer, so it runs only while something else holds the Agent
def agent_delete(memo: kopf.Memo, namespace: str | None, name: str, logger: kopf.Logger, **_: Any) -> None:
    if namespace is not None:  # without one, nothing was ever created or locked for it
        _release(memo.state, namespace, name, logger)


# An MCPGateway: the same reconcile, with its own kind (builders.GATEWAY); see reconcile.reconcile for what differs.
@kopf.on.create(*GATEWAYS)
def gateway_create(memo: kopf.Memo, namespace: str | None, name: str, body: kopf.Body, logger: kopf.Logger,
                   **kwargs: Any) -> None:
    _run(memo, _agent_namespace(namespace, name), name, logger, kwargs, seen=body, of=builders.GATEWAY)


@kopf.on.update(*GATEWAYS)
def gateway_update(memo: kopf.Memo, namespace: str | None, name: str, body: kopf.Body, logger: kopf.Logger,
                   **kwargs: Any) -> None:
    _run(memo, _agent_namespace(namespace, name), name, logger, kwargs, seen=body, of=builders.GATEWAY)


@kopf.on.resume(*GATEWAYS)
def gateway_resume(memo: kopf.Memo, namespace: str | None, name: str, body: kopf.Body, logger: kopf.Logger,
                   **kwargs: Any) -> None:
    _run(memo, _agent_namespace(namespace, name), name, logger, kwargs, seen=body, of=builders.GATEWAY)


@kopf.on.delete(*GATEWAYS, optional=True)
def gateway_delete(memo: kopf.Memo, namespace: str | None, name: str, logger: kopf.Logger, **_: Any) -> None:
    if namespace is not None:  # its TokenReview right, as an Agent's (periodic.release checks both kinds)
        _release(memo.state, namespace, name, logger, builders.GATEWAY)


def _release(state: OperatorState, namespace: str, name: str, logger: kopf.Logger,
             of: builders.OwnerKind = builders.AGENT) -> None:
    try:
        periodic.release(state, namespace, name, logger)
    except (ApiException, tokenreview.BindingUnusable) as exc:  # the periodic clean-up revokes it later
        logger.warning("the TokenReview right of %s %s/%s is not revoked yet: %s", of.kind, namespace, name, exc)
    # The state claim has an ownerReference only with spec.state.sqlite.deleteClaimWithAgent: by default it stays.
    logger.info("%s %s/%s deleted; its children are garbage-collected through ownerReferences", of.kind, namespace, name)


@kopf.on.event(*AGENTS)
async def agent_event(type: str | None, body: kopf.Body, memo: kopf.Memo, namespace: str | None, name: str,
                      logger: kopf.Logger, **kwargs: Any) -> None:
    """An Agent appeared, vanished or its spec changed: the Agents that use it as a tool are reconciled (found in the
    index, as for a ModelConfig). Its status writes (most events) change nothing for them; the initial listing only
    records each spec. And what every event of an Agent or MCPGateway does for itself (:func:`_own_event`)."""
    if namespace is None:
        return
    state: OperatorState = memo.state
    changed = state.agent_spec_changed(namespace, name, body.get("spec"), deleted=type == "DELETED")
    await _own_event(builders.AGENT, type, body, memo, namespace, name, logger, kwargs)
    if type is None or not changed:
        return
    parents = sorted(Dependencies.from_kwargs(kwargs).agents_using("Agent", namespace, name) - {name})
    if parents:
        await asyncio.to_thread(_reconcile_dependents, "Agent", type, namespace, name, parents, memo, logger, kwargs)


@kopf.on.event(*GATEWAYS)
async def gateway_event(type: str | None, body: kopf.Body, memo: kopf.Memo, namespace: str | None, name: str,
                        logger: kopf.Logger, **kwargs: Any) -> None:
    """An MCPGateway's event: what every event of an Agent or MCPGateway does for itself (:func:`_own_event`). Nothing
    depends on a gateway."""
    if namespace is not None:
        await _own_event(builders.GATEWAY, type, body, memo, namespace, name, logger, kwargs)


async def _own_event(of: builders.OwnerKind, type: str | None, body: kopf.Body, memo: kopf.Memo, namespace: str,
                     name: str, logger: kopf.Logger, kwargs: dict[str, Any]) -> None:
    """What an event of an Agent or MCPGateway does for the object itself, the same for both kinds:

    - records it for the periodic loop (its resync and Secret check), every event, the initial listing's included;
    - DELETED: forgets it, and revokes its runtime's TokenReview right at once (its other children go by their
      ownerReferences);
    - the runtime wrote its own readiness (``RuntimeReady``, a status change no update handler sees): folds it into
      ``Ready`` now rather than at the next resync; or its state switch is held: the runtime's recount of
      ``pendingApprovals`` may have released it;
    - ADDED or DELETED while the other kind has an object of the same name: that one is reconciled too, since
      whether its name is taken (``NameTaken``) just changed.
    """
    state: OperatorState = memo.state
    state.agents_listed = True  # kopf runs no handler before every indexed kind is listed (and indexed)
    if type in ("ADDED", "DELETED") and Dependencies.from_kwargs(kwargs).name_taken(of.kind, namespace, name):
        other = builders.GATEWAY if of is builders.AGENT else builders.AGENT
        await asyncio.to_thread(_reconcile_each, [(namespace, name)], f"{of.kind} {namespace}/{name} {type.lower()}",
                                memo, logger, kwargs, other)
    if type == "DELETED":
        if state.essences is not None:
            state.essences.forget(body.metadata.uid)
        state.forget(of.kind, namespace, name)
        await asyncio.to_thread(_release, state, namespace, name, logger, of)
        return
    state.seen(of.kind, namespace, name)
    if type is None:
        return
    if status.ready_needs_runtime_reason((body.get("status") or {}).get("conditions") or []) or state_switch.is_held(body):
        await asyncio.to_thread(_run, memo, namespace, name, logger, kwargs, of=of)


def _reconcile_each(agents: list[tuple[str, str]], why: str, memo: kopf.Memo, logger: kopf.Logger,
                    kwargs: dict[str, Any], of: builders.OwnerKind = builders.AGENT) -> None:
    """Reconcile each of ``agents`` (namespace, name) in its own try: one that fails (its status write answered 404
    because it was deleted meanwhile, a 409, a 5xx) must not cost the others theirs, since kopf does not retry an event
    handler. The failed one is retried with backoff by the periodic loop (``reconcile`` schedules it)."""
    for namespace, agent in agents:
        logger.info("%s: reconciling %s %s/%s", why, of.kind, namespace, agent)
        try:
            _run(memo, namespace, agent, logger, kwargs, of=of)
        except Exception as exc:  # logged with its retry by reconcile(); the next Agent still gets its turn
            logger.warning("%s: %s %s/%s not reconciled yet (%s)", why, of.kind, namespace, agent, exc)


def _reconcile_dependents(kind: str, event_type: str, namespace: str, name: str, agents: list[str], memo: kopf.Memo,
                          logger: kopf.Logger, kwargs: dict[str, Any]) -> None:
    _reconcile_each([(namespace, agent) for agent in agents], f"{kind} {namespace}/{name} changed ({event_type})", memo,
                    logger, kwargs)


async def _dependents(kind: str, event_type: str | None, namespace: str | None, name: str, memo: kopf.Memo,
                      logger: kopf.Logger, kwargs: dict[str, Any]) -> None:
    if event_type is None or namespace is None:  # the initial listing; a cluster-scoped object has no dependents
        return
    agents = sorted(Dependencies.from_kwargs(kwargs).agents_using(kind, namespace, name))
    if agents:
        await asyncio.to_thread(_reconcile_dependents, kind, event_type, namespace, name, agents, memo, logger, kwargs)


@kopf.on.event(GROUP, VERSION, "modelconfigs")
async def modelconfig_event(type: str | None, memo: kopf.Memo, namespace: str | None, name: str,
                            logger: kopf.Logger, **kwargs: Any) -> None:
    await _dependents("ModelConfig", type, namespace, name, memo, logger, kwargs)


@kopf.on.event(GROUP, VERSION, "remotemcpservers")
async def mcpserver_event(type: str | None, memo: kopf.Memo, namespace: str | None, name: str,
                          logger: kopf.Logger, **kwargs: Any) -> None:
    await _dependents("RemoteMCPServer", type, namespace, name, memo, logger, kwargs)
    if type is None or namespace is None:
        return
    gateways = sorted(Dependencies.from_kwargs(kwargs).gateways_using(namespace, name))
    if gateways:  # a gateway's upstream appeared, changed or went
        await asyncio.to_thread(_reconcile_each, [(namespace, g) for g in gateways],
                                f"RemoteMCPServer {namespace}/{name} changed ({type})", memo, logger, kwargs,
                                builders.GATEWAY)


def _to_readmit(memo: kopf.Memo, kwargs: dict[str, Any]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """Read the admission policy's verdict again; when it changed, every Agent and every MCPGateway (namespace, name)
    (both show it as their AdmissionPolicy condition), else none."""
    state: OperatorState = memo.state
    if not state.admission.refresh(state.kube, state.config.admission_policy):
        return [], []
    deps = Dependencies.from_kwargs(kwargs)
    cache = deps.agent_cache
    agents = sorted({(namespace, body["metadata"]["name"]) for namespace in list(cache) for body in cache.get(namespace, ())})
    return agents, sorted(deps.gateway_names)


async def _admission_changed(type: str | None, memo: kopf.Memo, logger: kopf.Logger, kwargs: dict[str, Any]) -> None:
    if type is None:  # the initial listing: the first reconcile reads the verdict anyway
        return
    agents, gateways = await asyncio.to_thread(_to_readmit, memo, kwargs)
    why = "the admission policy's verdict changed"
    if agents:
        await asyncio.to_thread(_reconcile_each, agents, why, memo, logger, kwargs)
    if gateways:
        await asyncio.to_thread(_reconcile_each, gateways, why, memo, logger, kwargs, builders.GATEWAY)


@kopf.on.event("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies")
async def admission_policy_event(type: str | None, name: str, memo: kopf.Memo, logger: kopf.Logger,
                                 **kwargs: Any) -> None:
    """The ToolApproval admission policy appeared, changed or went: every Agent's ``AdmissionPolicy`` follows now,
    not at its next resync (the runtime trusts kubectl decisions by it)."""
    state: OperatorState = memo.state
    if name == state.config.admission_policy:
        await _admission_changed(type, memo, logger, kwargs)


@kopf.on.event("admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings")
async def admission_binding_event(type: str | None, memo: kopf.Memo, logger: kopf.Logger, **kwargs: Any) -> None:
    """A binding changed (any: it may bind the policy, or have stopped binding it): as for the policy."""
    await _admission_changed(type, memo, logger, kwargs)


def _repair_unless_echo(kind: str, type: str, namespace: str, name: str, body: kopf.Body, version: str | None, agent: str,
                        memo: kopf.Memo, logger: kopf.Logger, kwargs: dict[str, Any],
                        of: builders.OwnerKind = builders.AGENT) -> None:
    state: OperatorState = memo.state
    if type != "DELETED":
        with state.lock_for(namespace, agent):  # a reconcile in flight records its children before it lets go
            if state.is_known(kind, namespace, name, version):
                return
            if kind == "Deployment" and _follow_deployment_status(state, namespace, name, body, version, agent, logger, of):
                return
    _run(memo, namespace, agent, logger, kwargs, of=of)


def _follow_deployment_status(state: OperatorState, namespace: str, name: str, body: kopf.Body, version: str | None,
                              agent: str, logger: kopf.Logger, of: builders.OwnerKind) -> bool:
    """Whether the Deployment's event changed nothing but what its controller writes (its status; see
    :mod:`gatehouse_operator.deployment_status`) and is handled: nothing to do while what ``Ready`` is derived from
    is the same, else ``Ready`` brought up to date alone (:func:`reconcile.refresh_conditions`). No child is read:
    none drifted, and the state claim's own events keep ``StateReady`` (:func:`claim_event`). A refresh that fails is
    retried as a full reconcile by the periodic loop (kopf retries no event handler). Called under the Agent's lock."""
    record = state.applied_deployment(namespace, agent)
    if record is None or not deployment_status.status_only(record, body):
        return False
    ready = status.ready_condition(dict(body))
    if ready != record.ready:
        if not _refreshed(state, namespace, agent, [ready], logger, of):
            return True
        state.deployment_applied(namespace, agent, record.with_ready(ready))
    if version:
        state.saw("Deployment", namespace, name, version)
    return True


def _refreshed(state: OperatorState, namespace: str, agent: str, conditions: list[status.StatusCondition],
               logger: kopf.Logger, of: builders.OwnerKind) -> bool:
    """:func:`reconcile.refresh_conditions`; whether it went through. One that fails (an API error, or the API
    unreachable) schedules a full reconcile with backoff instead: kopf retries no event handler."""
    try:
        refresh_conditions(state, namespace, agent, conditions, of)
    except Exception as exc:
        delay = state.reconcile_failed(of.kind, namespace, agent)
        logger.warning("%s of %s %s/%s not brought up to date (%s): reconciling it in %.0fs",
                       "/".join(c.type for c in conditions), of.kind, namespace, agent, exc, delay)
        return False
    return True


def _follow_claim(type: str | None, body: kopf.Body, agent: str, memo: kopf.Memo, logger: kopf.Logger,
                  kwargs: dict[str, Any], of: builders.OwnerKind) -> None:
    """A state claim's event, under its Agent's lock (a reconcile in flight records the claim it read before it lets
    go, so the event is compared with that): ``StateReady`` brought up to date when it changed
    (:mod:`gatehouse_operator.claim_status`); the claim deleted while its Agent stands: a full reconcile, which
    makes it anew."""
    state: OperatorState = memo.state
    namespace = str(body.metadata.namespace)
    with state.lock_for(namespace, agent):
        record = state.applied_deployment(namespace, agent)
        if type == "DELETED":
            if not claim_status.is_recorded(record, body):
                return
        else:
            after = claim_status.follow(record, body)
            if after is not None and after.state_ready is not None:
                if _refreshed(state, namespace, agent, [after.state_ready], logger, of):
                    state.deployment_applied(namespace, agent, after)
            return
    logger.info("PersistentVolumeClaim %s/%s deleted: reconciling %s %s/%s", namespace, body.metadata.name, of.kind,
                namespace, agent)
    _run(memo, namespace, agent, logger, kwargs, of=of)


async def _owner_changed(kind: str, type: str | None, body: kopf.Body, memo: kopf.Memo, logger: kopf.Logger,
                         kwargs: dict[str, Any]) -> None:
    """A child we manage changed or vanished: its Agent repairs it (a no-op when nothing drifted).

    The event that merely echoes our own last write is skipped. Such an event can arrive while the reconcile
    that wrote the child is still running, before it has recorded the child's version: so unless the version
    is already known, the check is repeated under the Agent's lock (a reconcile records its children's versions
    before it lets go), in a worker thread.
    """
    state: OperatorState = memo.state
    meta = body.metadata
    of = builders.GATEWAY if builders.GATEWAY_LABEL in meta.labels else builders.AGENT
    agent = meta.labels.get(of.label)
    if type is None or not agent or not meta.namespace:
        return
    version = meta.get("resourceVersion")
    if type != "DELETED" and state.is_known(kind, meta.namespace, meta.name, version):
        return
    await asyncio.to_thread(_repair_unless_echo, kind, type, meta.namespace, meta.name, body, version, agent, memo, logger,
                            kwargs, of)


@kopf.on.event("apps", "v1", "deployments", labels={"app.kubernetes.io/managed-by": builders.MANAGED_BY})
async def deployment_event(type: str | None, body: kopf.Body, memo: kopf.Memo, logger: kopf.Logger,
                           **kwargs: Any) -> None:
    await _owner_changed("Deployment", type, body, memo, logger, kwargs)


@kopf.on.event("v1", "persistentvolumeclaims", labels={"app.kubernetes.io/managed-by": builders.MANAGED_BY})
async def claim_event(type: str | None, body: kopf.Body, memo: kopf.Memo, logger: kopf.Logger, **kwargs: Any) -> None:
    """An event of a state claim we label: nothing else tells the operator that it bound (no pod has to run for
    that), was lost or grew. Decided in the event loop while it changes nothing the Agent was told -- the usual case:
    our own label patch, the volume controller's annotations, a claim that is not its Agent's current one -- else in
    a worker thread (:func:`_follow_claim`). The initial listing (and a relist after the watch broke off) is compared
    the same way. A claim of an Agent no reconcile of this process has applied (none yet, one refused, or the Agent
    gone: a claim outlives it by default) is left alone, unless a reconcile of it is in flight: that one may have read
    the claim before this event, so the event waits for it and is compared with what it recorded."""
    state: OperatorState = memo.state
    meta = body.metadata
    of = builders.GATEWAY if builders.GATEWAY_LABEL in meta.labels else builders.AGENT
    agent = meta.labels.get(of.label)
    if not agent or not meta.namespace:
        return
    record = state.applied_deployment(meta.namespace, agent)
    if record is not None and (not claim_status.is_recorded(record, body)
                               or (type != "DELETED" and claim_status.follow(record, body) is None)):
        return
    if record is None and (type == "DELETED" or not state.lock_held(meta.namespace, agent)):
        return  # the next reconcile of it reads (or makes) the claim as it is then
    await asyncio.to_thread(_follow_claim, type, body, agent, memo, logger, kwargs, of)
