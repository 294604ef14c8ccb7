"""The mirror: every approval request becomes a ``ToolApproval`` whose status follows its outcome.

It listens to :class:`~agent_runtime.approvals.events.ApprovalEvents` (published after each commit) and
only *queues* work there, so the decision path never waits for Kubernetes. :data:`WORKERS` background workers do
the writes, each retried with exponential backoff while the API is unreachable (a request the API refuses for good —
a 4xx other than 409/429, and a 401 or 403 still there after :data:`AUTH_REFUSAL_TRIES` tries — is logged and
dropped). The writes of one ToolApproval always go to the same worker, in
the order they were queued; different ToolApprovals are written side by side. Events wait on a worker of their own
until no object write is queued (at most a second each): the objects kubectl reads come first. (One worker
writing object, status and Event one after the other fell ~100 s behind a runtime pausing 100 calls a second; see
bench/README.md, "kubectl".) What it writes:

- on ``requested``: the ToolApproval (:func:`~agent_runtime.kube.objects.tool_approval`; an
  ownerReference to the Agent when the Agent exists, looked up once), then ``status.phase: Pending``;
- on ``decided``: the status (phase, decidedBy, decidedAt, reason, source), creating the object first if
  it never made it to the API; a status is set to Pending only right after the object was created, so a
  late retry can never undo an outcome;
- on ``executed``: the status again, now with ``execution`` (what became of the approved call: Ran, Failed, Unknown,
  NotSent, with the redacted error), and an Event saying the same (Warning unless it ran);
- an Event on the Agent per request and per outcome (best effort: three tries);
- the Agent's ``status.pendingApprovals`` when it differs from the count in the store, once the queue is drained
  (compared with the Agent as it is, not with what this replica wrote last: replicas sharing a database, a pod
  that restarted and the operator all write that status), and again at every orphan check (``orphans``).

A ``hitl_request`` question is mirrored the same way (:meth:`Mirror.hitl_listener`, subscribed to the
:class:`~agent_runtime.questions.store.QuestionStore`): a ToolApproval labelled ``gatehouse.dev/kind:
hitl_request`` (:func:`~agent_runtime.kube.objects.hitl_approval`), Pending while open, then Approved,
Denied, Canceled or Expired (:func:`~agent_runtime.kube.objects.hitl_status`). It gets no Events and does
not count in ``pendingApprovals`` (which counts tool approvals only), and kubectl cannot answer it.

Finished ToolApprovals are deleted ``retention_seconds`` after their decision; at start-up
:meth:`Mirror.reconcile` catches up with what happened while the runtime or the API was down. A status is
always written whole (:func:`~agent_runtime.kube.objects.replacing`), so nothing of an earlier one lingers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from agent_runtime.approvals import ApprovalRecord, ApprovalService
from agent_runtime.approvals.events import ApprovalEvent
from agent_runtime.approvals.votes import CastVote
from agent_runtime.contract.channels import BALLOT_CHANNELS
from agent_runtime.contract.resources import GROUP, VERSION
from agent_runtime.contract.resources.tool_approval import PLURAL
from agent_runtime.infra.tasks import cancel_and_wait
from agent_runtime.kube import objects
from agent_runtime.kube.client import KubeClient, KubeError
from agent_runtime.questions.store import QuestionRecord, QuestionStore

log = logging.getLogger(__name__)

Op = Callable[[], Awaitable[None]]
WORKERS = 32  # object writers; measured at 1,000 paused in 9 s: 8 created 26/s meanwhile, 32 created 58/s
EVENT_WAIT_SECONDS = 1.0  # an Event waits for the object writes queued at most this long
# An API server that has just started answers 401 and 403 until its caches of ServiceAccounts and RBAC rules are
# filled (seen on the real kube-apiserver restarted: 'clusterrole ... not found'), so such a refusal is retried this
# many times (0.2 s doubling, ~50 s in all) before it counts as for good.
AUTH_REFUSAL_TRIES = 8


def _parse_time(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


class Mirror:
    def __init__(
        self,
        client: KubeClient,
        approvals: ApprovalService,
        agent: str,
        namespace: str,
        retention_seconds: float = 3600.0,
        clock: Callable[[], float] = time.time,
        max_backoff: float = 30.0,
        questions: QuestionStore | None = None,
        of: objects.OwnerKind = objects.AGENT,
    ) -> None:
        self._client = client
        self.of = of  # an Agent's runtime, or an MCPGateway's (its held calls)
        self._approvals = approvals
        self._questions = questions
        self.agent = agent
        self.namespace = namespace
        self._retention = retention_seconds
        self._clock = clock
        self._max_backoff = max_backoff
        # the pod's name: the operator passes it from the downward API; else the hostname (a pod's, in a pod)
        self.instance = os.environ.get("GATEHOUSE_POD_NAME") or socket.gethostname()
        # One queue per worker; a key (the ToolApproval's name) always lands on the same one: its writes stay in order.
        self._queues: list[asyncio.Queue[tuple[str, Op, int]]] = [asyncio.Queue() for _ in range(WORKERS)]
        self._outstanding = 0  # queued or being written, over all queues
        self._events: asyncio.Queue[tuple[str, Op, int]] = asyncio.Queue()  # Events: written when no object write waits
        self._objects = 0  # object writes queued or being written
        self._objects_done = asyncio.Event()
        self._objects_done.set()
        self._owner_lock = asyncio.Lock()
        self._deciders: dict[str, str] = {}
        self._owner: dict[str, Any] | None = None
        self._owner_looked_up = False
        self._count_dirty = True
        self._finished: dict[str, float] = {}  # ToolApproval name -> when it was decided
        self._tasks: list[asyncio.Task[None]] = []
        self._idle = asyncio.Event()
        self._idle.set()

    # -- paths --------------------------------------------------------------------------------------

    @property
    def collection(self) -> str:
        return f"/apis/{GROUP}/{VERSION}/namespaces/{self.namespace}/{PLURAL}"

    def path(self, name: str) -> str:
        return f"{self.collection}/{name}"

    @property
    def agent_status_path(self) -> str:
        return f"/apis/{GROUP}/{VERSION}/namespaces/{self.namespace}/{self.of.plural}/{self.agent}/status"

    @property
    def selector(self) -> str:
        """The label selector of this runtime's ToolApprovals."""
        return objects.selector(self.agent, self.of)

    # -- the listener (never blocks, never raises into the decision path) ----------------------------

    def on_event(self, event: ApprovalEvent) -> None:
        if event.kind == "voted":  # still pending: show the votes so far, whatever channel they came through
            for record in event.records:
                self.sync_votes(record)
            return
        if event.kind == "executed":  # the outcome is written already: the status gains what became of the call
            for record in event.records:
                self.sync(record)
                self._announce_execution(record)
            return
        for record in event.records:
            self.sync(record, announce=True)
        self._count_dirty = True

    def note_decider(self, request_id: str, who: str) -> None:
        """Who decided ``request_id`` (kubectl's ``spec.decision.decidedBy``), for its status and Event."""
        self._deciders[request_id] = who

    def sync(self, record: ApprovalRecord, announce: bool = False) -> None:
        """Queue: make the ToolApproval of ``record`` show its current state (and announce it as an Event)."""
        name = objects.approval_name(self.agent, record.id)
        who = self._deciders.pop(record.id, "") if record.status != "pending" else ""
        self._put(name, f"sync {name}", lambda: self._sync(record, who), attempts=0)
        if announce:
            self._put_event(f"event {name}", lambda: self._event(record, who))

    def question_listener(self, kind: str, record: QuestionRecord) -> None:
        """:meth:`QuestionStore.subscribe <agent_runtime.questions.store.QuestionStore.subscribe>` listener: a question
        is mirrored as a ToolApproval labelled ``gatehouse.dev/kind: hitl_request`` (no Events, and it does not
        count in the Agent's ``pendingApprovals``, which counts tool approvals only)."""
        self.sync_question(record)

    def sync_question(self, record: QuestionRecord) -> None:
        name = objects.approval_name(self.agent, record.id)
        self._put(name, f"sync {name}", lambda: self._sync_question(record), attempts=0)

    def _put(self, key: str, what: str, op: Op, attempts: int) -> None:
        self._idle.clear()
        self._outstanding += 1
        self._objects += 1
        self._objects_done.clear()
        self._queues[hash(key) % len(self._queues)].put_nowait((what, op, attempts))

    def _put_event(self, what: str, op: Op) -> None:
        """Queue an Event (best effort: three tries), written once no object write is waiting."""
        self._idle.clear()
        self._outstanding += 1
        self._events.put_nowait((what, op, 3))

    def enqueue(self, name: str, what: str, op: Op, attempts: int = 0) -> None:
        """Queue another write on the ToolApproval ``name`` (``attempts`` 0: retried until it succeeds), in order with
        the mirror's own writes of that object."""
        self._put(name, what, op, attempts)

    def recount(self) -> None:
        """Queue: make the Agent's ``status.pendingApprovals`` match the store."""
        self._count_dirty = True
        self._put("pendingApprovals", "pendingApprovals", self._sync_count, attempts=0)

    # -- life ---------------------------------------------------------------------------------------

    def start(self) -> None:
        self._tasks = [
            *(asyncio.create_task(self._work(queue), name=f"gatehouse-kube-mirror-{i}") for i, queue in enumerate(self._queues)),
            asyncio.create_task(self._announce(), name="gatehouse-kube-events"),
            asyncio.create_task(self._janitor(), name="gatehouse-kube-janitor"),
        ]

    async def stop(self) -> None:
        await cancel_and_wait(self._tasks)

    async def drained(self, timeout: float = 10.0) -> None:
        """Wait until every queued write is done (tests)."""
        await asyncio.wait_for(self._idle.wait(), timeout)

    async def _work(self, queue: asyncio.Queue[tuple[str, Op, int]]) -> None:
        while True:
            what, op, attempts = await queue.get()
            try:
                await self._attempt(what, op, attempts)
            finally:
                self._objects -= 1
                if self._objects == 0:
                    self._objects_done.set()
            await self._done()

    async def _announce(self) -> None:
        while True:
            what, op, attempts = await self._events.get()
            with contextlib.suppress(TimeoutError):  # never starved for long by a runtime that never stops pausing
                await asyncio.wait_for(self._objects_done.wait(), EVENT_WAIT_SECONDS)
            await self._attempt(what, op, attempts)
            await self._done()

    async def _done(self) -> None:
        """One queued write is over; when it was the last: the count, then idle."""
        self._outstanding -= 1
        if self._outstanding == 0:
            if self._count_dirty:
                self._outstanding += 1
                try:
                    await self._attempt("pendingApprovals", self._sync_count, attempts=0)
                finally:
                    self._outstanding -= 1
            if self._outstanding == 0:
                self._idle.set()

    async def _attempt(self, what: str, op: Op, attempts: int) -> None:
        """Run ``op`` until it succeeds (``attempts`` 0: no limit), backing off exponentially."""
        delay, tries = 0.2, 0
        while True:
            tries += 1
            try:
                await op()
                return
            except asyncio.CancelledError:
                raise
            except KubeError as exc:
                if exc.permanent and not (exc.status in (401, 403) and tries < AUTH_REFUSAL_TRIES):
                    log.error("kube mirror: %s refused, dropped: %s", what, exc)
                    return
                problem = str(exc)
            except Exception as exc:  # a bug must not stop the worker
                log.exception("kube mirror: %s failed", what)
                problem = f"{type(exc).__name__}: {exc}"
            if attempts and tries >= attempts:
                log.warning("kube mirror: %s gave up after %d tries: %s", what, tries, problem)
                return
            log.warning("kube mirror: %s failed (retrying in %.1fs): %s", what, delay, problem)
            await asyncio.sleep(delay)
            delay = min(delay * 2, self._max_backoff)

    # -- the writes ---------------------------------------------------------------------------------

    async def _agent(self) -> dict[str, Any] | None:
        """The Agent (through its status subresource, which the runtime's Role may read), looked up once."""
        async with self._owner_lock:  # the workers' first writes all want it: one GET
            if not self._owner_looked_up:
                try:
                    self._owner = await self._client.get(self.agent_status_path)
                except KubeError as exc:
                    if exc.status != 404:
                        raise
                    log.warning("Agent %s/%s not found: ToolApprovals get no ownerReference", self.namespace, self.agent)
                self._owner_looked_up = True
        return self._owner

    async def _create(self, body: dict[str, Any]) -> bool:
        """Create the ToolApproval; False when it exists already. The uid of a ToolApproval of a tool call is kept
        in the database: only votes on objects this runtime created count (kube/watcher.py)."""
        try:
            created = await self._client.create(self.collection, body)
        except KubeError as exc:
            if exc.status == 409:
                return False
            raise
        request_id = (body.get("spec") or {}).get("requestId", "")
        uid = (created.get("metadata") or {}).get("uid")
        if uid and not objects.is_question(body):
            await self._approvals.remember_object(request_id, uid)
        return True

    def sync_votes(self, record: ApprovalRecord) -> None:
        """Queue: show the votes so far on a still-pending ToolApproval (``APPROVALS 1/2``)."""
        name = objects.approval_name(self.agent, record.id)
        self._put(name, f"votes {name}", lambda: self._sync_votes(record), attempts=5)

    async def _sync_votes(self, record: ApprovalRecord) -> None:
        cast = (await self._approvals.cast_votes([record.id])).get(record.id, [])
        body = {"status": {"phase": "Pending", **objects.votes_status(record, cast)}}
        await self._client.merge_patch(f"{self.path(objects.approval_name(self.agent, record.id))}/status", body)

    async def _sync(self, record: ApprovalRecord, decided_by: str = "") -> None:
        async def body() -> dict[str, Any]:
            return objects.tool_approval(record, self.agent, self.namespace, await self._agent(), self.of)

        finished = None if record.status == "pending" else record.decided_at or self._clock()
        cast = (await self._approvals.cast_votes([record.id])).get(record.id, []) if finished is not None else []
        status = objects.status(record, decided_by or await self.decider(record, cast), cast)
        await self._write(objects.approval_name(self.agent, record.id), body, status, finished)

    async def _sync_question(self, record: QuestionRecord) -> None:
        async def body() -> dict[str, Any]:
            return objects.question_approval(record, self.agent, self.namespace, await self._agent())

        finished = None if record.open else record.updated_at or self._clock()
        await self._write(objects.approval_name(self.agent, record.id), body, objects.question_status(record), finished)

    async def _write(
        self, name: str, body: Callable[[], Awaitable[dict[str, Any]]], status: dict[str, Any], finished: float | None
    ) -> None:
        """Create-if-missing and set the status; a Pending status only right after creating (never undoes an outcome)."""
        patch = {"status": objects.replacing(status)}
        if finished is None:
            if await self._create(await body()):
                await self._client.merge_patch(f"{self.path(name)}/status", patch)
            elif status.get("reason"):  # a question waiting for its confirmation says what was chosen
                await self._client.merge_patch(f"{self.path(name)}/status", patch)
            return
        try:
            await self._client.merge_patch(f"{self.path(name)}/status", patch)
        except KubeError as exc:
            if exc.status != 404:
                raise
            await self._create(await body())
            await self._client.merge_patch(f"{self.path(name)}/status", patch)
        self._finished[name] = finished

    def warn(self, obj: dict[str, Any], reason: str, message: str) -> None:
        """Queue: a Warning Event on the ToolApproval ``obj`` (best effort: three tries)."""
        namespace = (obj.get("metadata") or {}).get("namespace") or self.namespace
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = objects.warning_event(obj, self.instance, now, reason, message)

        async def create() -> None:
            await self._client.create(f"/api/v1/namespaces/{namespace}/events", body)

        self._put_event(f"warning {reason}", create)

    async def decider(self, record: ApprovalRecord, cast: Sequence[CastVote]) -> str:
        """Who decided a finished request: the voters, or for a call run under a session grant who granted it."""
        if record.source == "grant":
            return (await self._approvals.deciders_of([record.id])).get(record.id, "")
        return objects.voters(record, cast)

    async def _event(self, record: ApprovalRecord, decided_by: str = "") -> None:
        agent = await self._agent() or {"metadata": {"name": self.agent, "namespace": self.namespace}}
        if not decided_by and record.status != "pending":  # who decided, as in the status
            decided_by = await self.decider(record, (await self._approvals.cast_votes([record.id])).get(record.id, []))
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = objects.event(record, agent, self.instance, now, decided_by, self.of)
        await self._client.create(f"/api/v1/namespaces/{self.namespace}/events", body)

    def _announce_execution(self, record: ApprovalRecord) -> None:
        """Queue: the Event saying what became of an approved call."""
        self._put_event(f"execution event {objects.approval_name(self.agent, record.id)}",
                        lambda: self._execution_event(record))

    async def _execution_event(self, record: ApprovalRecord) -> None:
        agent = await self._agent() or {"metadata": {"name": self.agent, "namespace": self.namespace}}
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = objects.execution_event(record, agent, self.instance, now, self.of)
        if body is not None:
            await self._client.create(f"/api/v1/namespaces/{self.namespace}/events", body)

    async def _sync_count(self) -> None:
        """Write the count when the Agent shows another one: what this replica wrote last proves nothing (another
        replica, or an operator writing back the status it read a moment ago, may have changed it since)."""
        self._count_dirty = False
        count = await self._approvals.pending_count()
        try:
            agent = await self._client.get(self.agent_status_path)
            if (agent.get("status") or {}).get("pendingApprovals") != count:
                await self._client.merge_patch(self.agent_status_path, {"status": {"pendingApprovals": count}})
        except KubeError as exc:
            if exc.status == 404:
                return  # no Agent object to report on
            self._count_dirty = True
            raise

    # -- catching up and cleaning up ------------------------------------------------------------------

    async def reconcile(self) -> None:
        """Queue what the cluster missed: every pending request, outcomes of ToolApprovals still Pending, and the
        Agent's ``pendingApprovals`` (ToolApprovals of requests the runtime does not know: ``orphans``)."""
        pending = await self._approvals.expired(now=float("inf"), limit=100_000)
        for records in pending.values():
            for record in records:
                self.sync(record)
        if self._questions is not None:
            for question in await self._questions.open_questions():
                self.sync_question(question)
        listed = await self._client.get(self.collection, {"labelSelector": self.selector})
        for item in listed.get("items", []):
            self.observe(item)
            spec, phase = item.get("spec") or {}, (item.get("status") or {}).get("phase", "Pending")
            if phase != "Pending" or not spec.get("taskId"):
                continue
            if objects.is_question(item):
                if self._questions is not None:
                    for question in await self._questions.for_task(spec["taskId"]):
                        if question.id == spec.get("requestId") and not question.open:
                            self.sync_question(question)
                continue
            for record in await self._approvals.for_task(spec["taskId"]):
                if record.id == spec.get("requestId") and record.status != "pending":
                    who = (spec.get("decision") or {}).get("decidedBy")
                    if record.source in BALLOT_CHANNELS and who:
                        self.note_decider(record.id, who)
                    self.sync(record)
        self.recount()

    def observe(self, obj: dict[str, Any]) -> None:
        """Remember a finished ToolApproval seen in the cluster, for deletion after the retention."""
        status = obj.get("status") or {}
        if status.get("phase") in objects.FINAL_PHASES:
            decided = _parse_time(status.get("decidedAt")) or _parse_time(obj["metadata"].get("creationTimestamp"))
            self._finished.setdefault(obj["metadata"]["name"], decided or self._clock())

    def forget(self, name: str) -> None:
        self._finished.pop(name, None)

    async def _janitor(self) -> None:
        interval = min(max(self._retention / 4, 0.5), 60.0)
        while True:
            await asyncio.sleep(interval)
            await self.collect()

    async def collect(self) -> int:
        """Delete finished ToolApprovals older than the retention; return how many were deleted."""
        due = [name for name, at in self._finished.items() if at + self._retention <= self._clock()]
        deleted = 0
        for name in due:
            try:
                await self._client.delete(self.path(name))
                deleted += 1
            except KubeError as exc:
                if exc.status != 404:
                    log.warning("kube mirror: deleting %s failed (will retry): %s", name, exc)
                    continue
            self._finished.pop(name, None)
        return deleted


__all__ = ["Mirror"]
