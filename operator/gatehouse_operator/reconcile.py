"""One reconcile of one Agent: read it, translate it, make its children match, write its status.

Every trigger ends here: the Agent's own create/update/resume handlers, a changed dependency
(ModelConfig, RemoteMCPServer, Secret), an event of its Deployment, and the periodic resync. Each run

1. reads the Agent fresh from the API (under a per-Agent lock, so triggers never interleave);
2. translates it with :func:`agent_runtime.translator.translate`, reading the ModelConfig and
   RemoteMCPServers from the in-memory caches (:mod:`gatehouse_operator.dependencies`), and checks the
   referenced Secrets exist;
3. on success renders the children (:mod:`gatehouse_operator.builders`) and creates or patches each one
   (:mod:`gatehouse_operator.apply`) -- for an Agent never applied before (no ``status.configHash``) it creates
   them straight away instead of reading six 404s first; on failure leaves the last good children running;
4. writes ``status`` only if it differs (:mod:`gatehouse_operator.status`) and posts one Event when
   anything was written.

With unchanged inputs a run costs one GET of the Agent plus one GET per child, and writes nothing.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import kopf
from pydantic import ValidationError

from agent_runtime.errors import Problem, TranslationError, problems_from_validation
from agent_runtime.resources import Agent
from agent_runtime.translator import translate
from gatehouse_operator import apply, builders, status
from gatehouse_operator.dependencies import Dependencies, is_missing
from gatehouse_operator.kube import ApiException
from gatehouse_operator.settings import OperatorState

__all__ = ["Outcome", "reconcile"]

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
) -> Outcome | None:
    """Reconcile the Agent ``namespace/name``; ``None`` if it is gone or being deleted."""
    with state.lock_for(namespace, name):
        body = state.kube.get_agent(namespace, name)
        if body is None or body.get("metadata", {}).get("deletionTimestamp"):
            return None
        return _reconcile(state, deps, body, logger, clock())


def _reconcile(state: OperatorState, deps: Dependencies, body: dict[str, Any], logger: kopf.Logger, now: str) -> Outcome:
    try:
        agent = Agent.model_validate(body)
    except ValidationError as exc:
        return _reject(state, body, "InvalidSpec", problems_from_validation(exc), logger, now)
    models, servers, problems = deps.resolve(agent)
    try:
        config = translate(agent, models, servers)
    except TranslationError as exc:
        problems = problems + exc.problems
    else:
        problems += deps.secret_problems(agent.namespace, config)
    if problems:
        return _reject(state, body, "DependencyMissing" if is_missing(problems) else "InvalidSpec", problems, logger, now)

    inputs = builders.BuildInputs(
        runtime_image=state.config.runtime_image, secrets_hash=deps.secrets_hash(agent.namespace, config),
        api_token_secret=state.config.api_token_secret, api_token_key=state.config.api_token_key,
    )
    applied: list[apply.Applied] = []
    create_first = not (body.get("status") or {}).get("configHash")
    for child in builders.desired_children(agent, body, config, inputs):
        try:
            done = apply.ensure(state.kube, child, create_first=create_first)
        except ApiException as exc:
            message = f"{child['kind']}/{child['metadata']['name']}: {exc.status} {exc.reason}"
            _reject(state, body, "ReconcileFailed", [Problem("", message)], logger, now)
            raise kopf.TemporaryError(message, delay=10) from exc
        applied.append(done)
        state.saw(done.kind, agent.namespace, done.name, done.obj["metadata"].get("resourceVersion", ""))

    digest = builders.config_hash(config)
    deployment = next(a.obj for a in applied if a.kind == "Deployment")
    accepted = status.StatusCondition("Accepted", True, "Reconciled", f"AgentConfig {digest[:12]} is applied")
    written = _write_status(state, body, accepted, status.ready_condition(deployment), digest, now)
    changes = tuple(str(a) for a in applied if a.action != "unchanged")
    if changes:
        # kopf annotates ``Body`` but reads only Mapping keys (apiVersion, kind, metadata): a raw dict works.
        kopf.info(body, reason="Reconciled", message="; ".join(changes))  # type: ignore[arg-type]
        logger.info("reconciled %s/%s: %s", agent.namespace, agent.name, "; ".join(changes))
    return Outcome(True, "Reconciled", changes, written)


def _reject(
    state: OperatorState, body: dict[str, Any], reason: str, problems: list[Problem], logger: kopf.Logger, now: str
) -> Outcome:
    """Accepted=False with every problem in the message; the last good children keep running."""
    message = "; ".join(str(p) for p in problems)
    if len(message) > MAX_MESSAGE:
        message = message[: MAX_MESSAGE - 1] + "…"
    meta = body["metadata"]
    deployment = state.kube.get("Deployment", meta["namespace"], meta["name"])
    accepted = status.StatusCondition("Accepted", False, reason, message)
    written = _write_status(state, body, accepted, status.ready_condition(deployment), None, now)
    if written:
        kopf.warn(body, reason=reason, message=message)  # type: ignore[arg-type]  # as kopf.info above
        logger.warning("agent %s/%s not accepted (%s): %s", meta["namespace"], meta["name"], reason, message)
    return Outcome(False, reason, (), written)


def _write_status(
    state: OperatorState,
    body: dict[str, Any],
    accepted: status.StatusCondition,
    ready: status.StatusCondition,
    config_hash: str | None,
    now: str,
) -> bool:
    meta = body["metadata"]
    current = body.get("status") or {}
    wanted = status.agent_status(
        current, generation=meta.get("generation"), accepted=accepted, ready=ready, config_hash=config_hash, now=now
    )
    if wanted == current:
        return False
    state.kube.patch_agent_status(meta["namespace"], meta["name"], wanted)
    return True
