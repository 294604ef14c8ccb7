"""``decide_one``: a vote on ONE request from outside A2A (REST, kubectl), then resume its task once none is pending.

A2A decisions arrive per task (every pending request at once); REST and Kubernetes decide per request. So a
task with several pending requests may be decided piece by piece by different people and channels:

1. :class:`DecideOne` records the person's vote durably: one :meth:`~agent_runtime.approvals.ApprovalService.vote`
   transaction for that single request, judged by the one authority function (:mod:`agent_runtime.contract.authority`:
   who may decide, N-of-M, separation of duties). When the vote makes the outcome final, the same transaction
   decides the request with the conditional update every channel uses (the first channel wins, the others get
   :class:`~agent_runtime.approvals.AlreadyDecided`), with who decided and any caller's extra writes (an
   idempotency key).
2. While another request of the task is still pending (or the vote counted but more approvals are needed), the
   task stays input-required and its pause is restated through the same path with an empty resolution set:
   the status lists only what is still pending, with the votes so far (GetTask and subscribers agree with the
   approvals table), before the caller is answered. An A2A client still decides the rest with
   ``approve``/``deny``/``batch`` over the remaining ids.
3. When it was the last pending one, the task is resumed through the one decision path,
   :meth:`~agent_runtime.server.resume.Resumer.resume`, with an *empty* resolution set, which the executor reads
   as "resume what is recorded": it runs the turn on with every decision of that pause (approved calls run,
   each once; denied ones get their reason). Whichever decision completes a pause — this one, an A2A
   message for the remaining ids, or the timeout sweeper — the executor answers all calls of the pause.

Edit and approve: every channel that calls ``DecideOne`` shows the arguments redacted (REST, the inbox, kubectl and
the Slack bridge's ToolApproval votes), so the ``arguments`` it is given are edited from what was *shown*. They are
un-redacted once, inside the vote's transaction against the locked request (:func:`agent_runtime.contract.redaction.unredact`:
a field left ``«redacted»`` keeps its real value, a changed one refuses the edit), then checked against the policy
(:func:`~agent_runtime.server.batches.plan_edits`). A2A owners see the real arguments and edit through the executor.

The resume runs in the background by default (a caller such as a REST handler answers as soon as the
decision is recorded); ``wait=True`` awaits it. If the runtime stops in between, :meth:`DecideOne.resume_recorded`
finishes such tasks at the next start (every ``decide_one`` decision has a row in the deciders table).

:class:`DecideOne` holds the few collaborators this needs (the approvals, the metrics, the resumer, the task
store); the app builds one and hands it to the channels that decide one request at a time.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from a2a.server.context import ServerCallContext
from sqlalchemy import Connection

from agent_runtime.approvals import ApprovalRecord, ApprovalService, Voted
from agent_runtime.contract import redaction
from agent_runtime.contract.agent_config import ApprovalPolicy
from agent_runtime.contract.authority import Judgement, Vote, refusal
from agent_runtime.contract.edits import EditPlan, EditRefused
from agent_runtime.contract.policy import PolicySource
from agent_runtime.pauses.resumptions import A2AResumer
from agent_runtime.server.batches import OUTCOME_LABEL, plan_edits
from agent_runtime.server.owners import acting_for
from agent_runtime.server.task_store import CachedTaskStore
from agent_runtime.server.waiting_on import Waiting, waiting_on
from agent_runtime.telemetry.metrics import Metrics

log = logging.getLogger(__name__)

_resuming: set[asyncio.Task[None]] = set()  # strong references to background resumes until they finish


class UnknownRequest(LookupError):
    """No approval request has this id."""


@dataclass(frozen=True)
class OneDecided:
    """One vote's effect: the request after it, the authority's judgement, the background resume (None unless this
    vote decided the last pending request of the pause), and whether its edit was applied."""

    voted: Voted
    resume: asyncio.Task[None] | None
    edited: bool = False

    @property
    def record(self) -> ApprovalRecord:
        return self.voted.record

    @property
    def judgement(self) -> Judgement:
        return self.voted.judgement


@dataclass(frozen=True)
class DecideOne:
    """Votes on one request at a time for the channels that do (REST, Kubernetes): ``await decide_one(request_id, …)``."""

    approvals: ApprovalService
    metrics: Metrics
    resumer: A2AResumer  # pauses.resumptions.Resumptions: a taskless kind's callback, or the A2A resumer
    tasks: CachedTaskStore  # read under each task's owner (start-up recovery acts for the owner, like every resume)
    config: PolicySource | None = None  # the policy an edit is checked against (agent_runtime/contract/edits.py); None: no edits

    async def __call__(
        self,
        request_id: str,
        vote: Vote,
        *,
        also: Callable[[Connection, float, list[Voted]], None] | None = None,
        wait: bool = False,
        scope: str = "once",
        arguments: dict[str, Any] | None = None,
        seen: str | None = None,
        record: ApprovalRecord | None = None,
    ) -> OneDecided:
        """Cast ``vote`` on ``request_id`` (:meth:`ApprovalService.vote`); raises :class:`UnknownRequest` or
        :class:`~agent_runtime.approvals.AlreadyDecided`. A vote that is refused or does not yet decide is recorded
        and answered as such. ``also(conn, decided_at, results)`` adds writes to the same transaction. ``scope``
        ``session`` makes an approval that decides the request a session grant lasting the Agent's ``grantTTL`` (the
        inbox offers it where the Agent allows session grants). ``arguments``: approve the call with these arguments
        instead (edit and approve), edited from the arguments as shown (redacted); raises
        :class:`~agent_runtime.contract.edits.EditRefused` where the policy does not allow it or a redacted field was changed.
        ``seen``: the arguments' hash the voter saw; raises :class:`~agent_runtime.approvals.ArgumentsChanged` when an
        edit changed them since. ``record``: the request as the caller has just read it (the vote re-reads it under its
        lock), to spare a read."""
        if record is None or record.id != request_id:
            record = await self.approvals.get(request_id)
        if record is None:
            raise UnknownRequest(request_id)
        planned: dict[str, EditPlan] = {}
        planners = None
        if arguments is not None:
            planners = {request_id: self._planner(request_id, arguments, planned)}
        # A session grant lasts the Agent's grantTTL, as one made over A2A does (not the service's default hour).
        ttl = (self.config.approval if self.config is not None else ApprovalPolicy()).grant_ttl_seconds
        (voted,) = await self.approvals.vote(record.task_id, {request_id: vote}, also=also, scope=scope,
                                             planners=planners, seen={request_id: seen} if seen is not None else None,
                                             grant_ttl=ttl)
        edited = request_id in planned and voted.record.args == planned[request_id].args
        if not voted.decided:
            if edited:
                changed = ", ".join(planned[request_id].changed)
                await self._restate(voted.record, vote.channel, f"{vote.principal} edited the arguments of {request_id} "
                                                                 f"({changed}); votes cast before the edit no longer count.")
            elif voted.judgement.counted:
                await self._restate(voted.record, vote.channel, f"{vote.principal}'s approval of {request_id} was counted; "
                                                                 f"{voted.judgement.tally.progress()}.")
            return OneDecided(voted, None, edited)
        decided = voted.record
        self.metrics.pending.dec()
        self.metrics.decisions.labels(outcome=OUTCOME_LABEL[decided.status], source=vote.channel).inc()
        if await self.approvals.for_task(record.task_id, pending_only=True):
            await self._restate(decided, vote.channel, f"{decided.describe_decision()} (decided by "
                                                       f"{voted.judgement.tally.decided_by}); other requests of this pause "
                                                       "are still pending.")
            return OneDecided(voted, None, edited)
        note = (f"{decided.describe_decision()} (decided by {voted.judgement.tally.decided_by}); "
                "every request of this pause is decided: resuming.")
        resume = asyncio.create_task(self._resume(decided, vote.channel, note), name=f"gatehouse-resume-{record.task_id}")
        _resuming.add(resume)
        resume.add_done_callback(_resuming.discard)
        if wait:
            await asyncio.shield(resume)
        return OneDecided(voted, resume, edited)

    async def refuse_unseen(self, record: ApprovalRecord, vote: Vote) -> None:
        """A vote on a request its voter may not see (REST, the inbox answer "no such request", never that it exists):
        recorded all the same, as not counted and why, so the attempt is in the record the approvers read."""
        if record.status == "pending":
            why = refusal(record.approvers, record.requested_by, vote.principal, vote.groups)
            await self.approvals.refuse_vote(record.id, vote, why or f"{vote.principal} may not see this request")

    def _planner(
        self, request_id: str, shown: dict[str, Any], planned: dict[str, EditPlan],
    ) -> Callable[[ApprovalRecord], EditPlan | None]:
        """The edit of ``request_id`` from the arguments as ``shown``, planned inside the vote's transaction against the
        locked request (``planned`` keeps what it planned, for the answer)."""
        config = self.config

        def plan(locked: ApprovalRecord) -> EditPlan | None:
            if config is None:
                raise EditRefused("this channel cannot edit a call's arguments")
            try:
                real = redaction.unredact(shown, locked.args, locked.shown)
            except redaction.RedactedEdit as exc:
                raise EditRefused(f"{request_id} ({locked.tool}): {exc} (they are hidden from you; left as shown they "
                                  "keep their values)") from None
            found = plan_edits(config, [locked], {request_id: real}).get(request_id)
            planned.pop(request_id, None)
            if found is not None:
                planned[request_id] = found
            return found

        return plan

    async def _restate(self, record: ApprovalRecord, source: str, note: str) -> None:
        """The pause goes on: restate it on the task with what is still pending and the votes so far (an internal
        message with no resolutions, like a resume), before the caller is answered, so that GetTask, subscribers
        and the task history agree with the approvals table."""
        restate = asyncio.create_task(self._run_restate(record, source, note), name=f"gatehouse-restate-{record.task_id}")
        _resuming.add(restate)
        restate.add_done_callback(_resuming.discard)
        await asyncio.shield(restate)  # a caller that goes away does not cut it short

    async def _run_restate(self, record: ApprovalRecord, source: str, note: str) -> None:
        try:
            await self.resumer.resume(record.task_id, record.context_id, {}, source, note)
        except Exception:  # the vote is recorded; the pause shows it at the next change
            log.exception("restating the pause of task %s after %s failed", record.task_id, record.id)

    async def _resume(self, record: ApprovalRecord, source: str, note: str) -> None:
        try:
            await self.resumer.resume(record.task_id, record.context_id, {}, source, note)
        except Exception:  # the decision is recorded; the next message to the task (or a restart) finishes it
            log.exception("resuming task %s after %s failed", record.task_id, record.id)

    async def resume_recorded(self, window: float = 24 * 3600) -> int:
        """At start-up: resume tasks whose last pause was completed one request at a time but which were never
        run on (the runtime stopped between the decision and the resume). Only a task whose current pause is its own
        tool approval, every request of which is decided, is resumed (:mod:`agent_runtime.server.waiting_on`): an
        approved call may since have paused again on its tool's question, a sub-agent or the model's question, and
        that pause waits for its own answer. Returns how many were resumed."""
        resumed = 0
        for task_id, context_id in await self.approvals.tasks_decided_with_decider(time.time() - window):
            records = await self.approvals.for_task(task_id)
            if any(r.status == "pending" for r in records):
                continue
            owner = await self.tasks.owner_of(task_id)
            task = await self.tasks.get(task_id, ServerCallContext(user=acting_for(owner or "")))
            if task is None:
                continue
            pause = waiting_on(task)
            if pause.waiting is not Waiting.APPROVAL:
                if pause.waiting is not Waiting.NOTHING:
                    log.info("not resuming task %s at start-up: it waits on %s, not on a decided approval",
                             task_id, pause.waiting.value)
                continue
            if not pause.request_ids <= {r.id for r in records}:
                log.warning("not resuming task %s at start-up: its pause lists requests %s it has no record of",
                            task_id, sorted(pause.request_ids - {r.id for r in records}))
                continue
            note = "Every request of this pause was decided before a restart: resuming."
            await self.resumer.resume(task_id, context_id, {}, "restart", note)
            resumed += 1
        return resumed


async def wait_for_resumes() -> None:
    """Let background resumes finish (used on shutdown and by tests)."""
    while _resuming:
        await asyncio.gather(*list(_resuming), return_exceptions=True)


__all__ = ["DecideOne", "OneDecided", "UnknownRequest", "wait_for_resumes"]
