"""One operator-wide background loop: every Agent's periodic resync and Secret check, and the clean-up of the
TokenReview right of Agents that are gone.

It replaces two kopf daemons per Agent: a daemon makes kopf put a finalizer on the Agent (a PATCH of every new
Agent, and an Agent stuck ``Terminating`` while the operator is down), and thousands of Agents cost thousands of
tasks, each waking on its own. Here one task wakes at most every second and looks at what is due:

- **which Agents**: those the Agent watch has shown and not yet shown deleted (``OperatorState.agent_seen``, from
  ``handlers.agent_event``);
- **resync**: ``GATEHOUSE_RESYNC_SECONDS`` after the Agent's last reconcile, whatever started it (a reconcile is a
  resync: the next one is a period later);
- **retry**: a reconcile that raised (whatever started it) is tried again 1 s later, then 2, 4, ... up to 60 s apart
  (``OperatorState.reconcile_failed``), until one runs to its end;
- **Secret check**: ``GATEHOUSE_SECRET_CHECK_INTERVAL`` after the Agent's last reconcile read its Secrets, or its
  last check did: so a new Agent's first check comes one interval after its first reconcile, not right after it
  (which would read again what that reconcile just read). The Secrets its last reconcile read, and its
  ``<agent>-config``, are read again by name (:func:`~gatehouse_operator.dependencies.changed_secrets`); the
  Agent is reconciled when one changed. An Agent whose reconcile read none costs no request;
- **spread**: each wait is the period times the Agent's own factor between 0.9 and 1 (fixed, from its name), so
  Agents created or resumed together drift apart rather than firing in lockstep;
- **threads and locks**: each job runs in a worker thread (``asyncio.to_thread``), under the Agent's lock (the
  reconcile's own, and the check's), at most :data:`MAX_IN_FLIGHT` at once; an Agent has one job at a time;
- **TokenReview subjects** (of a cluster-scoped binding, so nothing is garbage-collected with the Agent): at
  start-up -- once kopf has listed the Agents into its index (it runs no Agent handler before that), or
  :data:`FIRST_COLLECTION_SECONDS` after start when no Agent shows up -- and then every resync period, one GET of the
  shared binding (:mod:`gatehouse_operator.tokenreview`); a ServiceAccount subject whose Agent is not in the index is
  revoked once a GET confirms that Agent is gone (or being deleted): the subject of an Agent deleted while the
  operator was down, or whose DELETED event was missed. ``handlers.agent_event`` revokes it at once on the DELETED
  event (:func:`release`). While ``GATEHOUSE_MIGRATE_TOKENREVIEW_BINDINGS`` is on, the same pass lists the per-Agent
  bindings of earlier releases (by label) and migrates each (:meth:`~gatehouse_operator.tokenreview.TokenReviewBinding.migrate`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

import kopf
from pydantic import ValidationError

from agent_runtime.contract.resources import Agent

# leadership first: its startup handler (this replica leads) runs before start_periodic (kopf keeps their order)
from gatehouse_operator import builders, leadership, tokenreview
from gatehouse_operator.dependencies import Dependencies, changed_secrets
from gatehouse_operator.kube import ApiException
from gatehouse_operator.reconcile import reconcile
from gatehouse_operator.settings import OperatorState

__all__ = ["FIRST_COLLECTION_SECONDS", "MAX_IN_FLIGHT", "Periodic", "check_secrets", "collect_bindings", "migrate",
           "release"]

MAX_IN_FLIGHT = 4  # periodic jobs in worker threads at once: the Agents' own handlers keep the rest of the pool
MAX_TICK = 1.0
FIRST_COLLECTION_SECONDS = 15.0
_BINDINGS = ("", "")  # the key of the binding clean-up among the busy Agents

Key = tuple[str, str]


def check_secrets(state: OperatorState, deps: Dependencies, namespace: str, name: str, logger: kopf.Logger) -> None:
    """Read the Agent's Secrets again by name; reconcile it when one changed."""
    with state.lock_for(namespace, name):  # compared with a record no reconcile is filling meanwhile
        try:
            versions = state.secret_versions(namespace, name, builders.config_secret_name(name))
            changed = changed_secrets(state.kube, namespace, versions)
        finally:  # a failed check waits a full interval too, rather than retrying at every tick
            state.secrets_checked(namespace, name)
    if changed:
        logger.info("Secret %s of agent %s/%s changed: reconciling", ", ".join(sorted(changed)), namespace, name)
        reconcile(state, deps, namespace, name, logger)


def _gone(agent: dict[str, Any] | None) -> bool:
    return agent is None or bool((agent.get("metadata") or {}).get("deletionTimestamp"))


def release(state: OperatorState, namespace: str, name: str, logger: kopf.Logger) -> bool:
    """Revoke the TokenReview right of an Agent that is gone or being deleted, and forget the Agent; whether that took
    a write. An Agent of that name that exists (say, created again since) keeps it."""
    with state.lock_for(namespace, name):  # no reconcile of this Agent runs (and grants it again) meanwhile
        agent = state.kube.get_agent(namespace, name)
        if not _gone(agent):
            return False
        # The subject may be an MCPGateway's runtime (a ServiceAccount named like it): kept while the gateway is there.
        if not _gone(state.kube.get_agent(namespace, name, builders.GATEWAY.plural)):
            return False
        revoked = state.tokenreview.revoke(namespace, name)
    if agent is None:
        state.forget(namespace, name)
    if revoked:
        logger.info("the runtime of agent %s/%s may no longer create TokenReviews", namespace, name)
    return revoked


def _wants_tokenreviews(agent: dict[str, Any] | None) -> bool:
    """Whether an Agent (as read) still wants TokenReviews; an Agent that does not parse is left to its reconcile."""
    if _gone(agent):
        return False
    try:
        return Agent.model_validate(agent).spec.access.kubernetes_tokens
    except ValidationError:
        return False


def migrate(state: OperatorState, logger: kopf.Logger) -> int:
    """Replace the per-Agent TokenReview bindings of earlier releases by subjects of the shared one; how many went."""
    try:
        legacy = state.kube.list_cluster_role_bindings(tokenreview.LEGACY_SELECTOR)
    except ApiException as exc:  # RBAC without list: the chart's rbac.migrateTokenReviewBindings is off
        logger.warning("cannot list the TokenReview ClusterRoleBindings of earlier releases (%s %s): they stay; "
                       "set GATEHOUSE_MIGRATE_TOKENREVIEW_BINDINGS=false once there are none", exc.status, exc.reason)
        return 0
    migrated = 0
    for binding in legacy:
        owner = tokenreview.legacy_owner(binding)
        if owner is None:
            continue
        try:
            with state.lock_for(*owner):  # no reconcile of this Agent decides meanwhile
                migrated += state.tokenreview.migrate(binding, _wants_tokenreviews(state.kube.get_agent(*owner)))
        except ApiException as exc:  # e.g. an Agent of a namespace this operator may not read: not ours to judge
            logger.debug("ClusterRoleBinding %s left alone: %s %s", binding["metadata"]["name"], exc.status, exc.reason)
            continue
        logger.info("ClusterRoleBinding %s of an earlier release replaced by a subject of %s",
                    binding["metadata"]["name"], state.tokenreview.name)
    return migrated


def collect_bindings(state: OperatorState, known: set[tuple[str, str]], logger: kopf.Logger) -> int:
    """Revoke the TokenReview right of Agents that are gone (not ``known``, and not found), and migrate the bindings of
    earlier releases; how many subjects and bindings went."""
    done = migrate(state, logger) if state.config.migrate_tokenreview_bindings else 0
    try:
        subjects = state.tokenreview.refresh()
    except (ApiException, tokenreview.BindingUnusable) as exc:
        logger.warning("cannot read the TokenReview ClusterRoleBinding %s: %s", state.tokenreview.name, exc)
        return done
    for owner in sorted(subjects - known):
        try:
            done += release(state, *owner, logger)
        except ApiException as exc:  # e.g. an Agent of a namespace this operator may not read: not ours to judge
            logger.debug("subject %s/%s of %s left alone: %s %s", *owner, state.tokenreview.name, exc.status, exc.reason)
    return done


class Periodic:
    """The loop (:meth:`run`); :meth:`tick` starts what is due at ``now`` (``time.monotonic()``)."""

    def __init__(self, state: OperatorState, deps: Dependencies, logger: kopf.Logger) -> None:
        self._state, self._deps, self._logger = state, deps, logger
        self._busy: set[Key] = set()
        self._jobs: set[asyncio.Task[None]] = set()
        self._slots = asyncio.Semaphore(MAX_IN_FLIGHT)
        self._started = time.monotonic()
        self._collected: float | None = None  # when the bindings were last collected

    async def run(self) -> None:
        try:
            while True:
                self.tick(time.monotonic())
                await asyncio.sleep(self._pause())
        finally:
            for job in list(self._jobs):
                job.cancel()

    def tick(self, now: float) -> None:
        resyncs, checks = self._state.due(now, self._busy)
        for namespace, name in resyncs:
            self._start((namespace, name), "resync", reconcile, self._state, self._deps, namespace, name, self._logger)
        for namespace, name in checks:
            self._start((namespace, name), "Secret check", check_secrets, self._state, self._deps, namespace, name,
                        self._logger)
        if self._collection_due(now):
            self._collected = now
            known = self._deps.known_agents()  # kopf's index, read here in the event loop that updates it
            self._start(_BINDINGS, "binding clean-up", collect_bindings, self._state, known, self._logger)

    def _collection_due(self, now: float) -> bool:
        if _BINDINGS in self._busy:
            return False
        if self._collected is None:  # the first: once kopf's index holds every Agent there is
            return self._state.agents_listed or now - self._started >= FIRST_COLLECTION_SECONDS
        return now - self._collected >= self._state.config.resync_seconds

    def _pause(self) -> float:
        config = self._state.config
        return max(0.05, min(MAX_TICK, config.resync_seconds / 4, config.secret_check_seconds / 4))

    def _start(self, key: Key, what: str, job: Callable[..., Any], *args: Any) -> None:
        self._busy.add(key)
        task = asyncio.create_task(self._run_job(key, what, job, *args))
        self._jobs.add(task)
        task.add_done_callback(self._jobs.discard)

    async def _run_job(self, key: Key, what: str, job: Callable[..., Any], *args: Any) -> None:
        try:
            async with self._slots:
                await asyncio.to_thread(job, *args)
        except Exception:  # retried at the next period; the trigger handlers report a failing reconcile
            self._logger.exception("%s of %s failed", what, "/".join(key) if key != _BINDINGS else "the operator")
        finally:
            self._busy.discard(key)


@kopf.on.startup()
async def start_periodic(memo: kopf.Memo, logger: kopf.Logger, **kwargs: Any) -> None:
    """Start the loop (settings.configure, registered before this, has built ``memo.state``). The indexes kopf passes
    here fill in as it lists and watches; the loop reads them live."""
    periodic = Periodic(memo.state, Dependencies.from_kwargs(kwargs), logger)
    memo.periodic = asyncio.create_task(periodic.run(), name="gatehouse periodic")


@kopf.on.cleanup()
async def stop_periodic(memo: kopf.Memo, logger: kopf.Logger, **_: Any) -> None:
    """Stop the loop, then give up the leader Lease (if this replica held it): nothing acts after that."""
    task: asyncio.Task[None] | None = getattr(memo, "periodic", None)
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    await leadership.step_down(memo, logger)
