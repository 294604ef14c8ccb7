"""``decide_one``: decide ONE request from outside A2A (REST, kubectl), then resume its task once none is pending.

A2A decisions arrive per task (every pending request at once); REST and Kubernetes decide per request. So a
task with several pending requests may be decided piece by piece by different people and channels:

1. :func:`decide_one` records the decision durably and exactly once: one
   :meth:`~agent_runtime.approvals.ApprovalService.decide` transaction for that single request (the same
   conditional update every channel uses, so the first channel wins and the others get
   :class:`~agent_runtime.approvals.AlreadyDecided`), with who decided (:mod:`agent_runtime.approvals.deciders`)
   and any caller's extra writes (an idempotency key) committed in the same transaction.
2. While another request of the task is still pending, nothing else happens: the task stays input-required
   and an A2A client still decides the rest with ``approve``/``deny``/``batch`` over the remaining ids.
3. When it was the last pending one, the task is resumed through the one decision path,
   :meth:`~agent_runtime.server.resume.Resumer.resume`, with an *empty* resolution set, which the executor reads
   as "resume what is recorded": it runs the turn on with every decision of that pause (approved calls run,
   each once; denied ones get their reason). Whichever decision completes a pause — this one, an A2A
   message for the remaining ids, or the timeout sweeper — the executor answers all calls of the pause.

The resume runs in the background by default (a caller such as a REST handler answers as soon as the
decision is recorded); ``wait=True`` awaits it. If the runtime stops in between, :func:`resume_recorded`
finishes such tasks at the next start (every ``decide_one`` decision has a row in the deciders table).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from a2a.server.context import ServerCallContext
from a2a.types import TaskState
from sqlalchemy import Connection, select

from agent_runtime.approvals import ApprovalRecord, Resolution, deciders
from agent_runtime.approvals.service import approvals
from agent_runtime.server.executor import OUTCOME_LABEL

if TYPE_CHECKING:
    from agent_runtime.server.app import Runtime

log = logging.getLogger(__name__)

_resuming: set[asyncio.Task[None]] = set()  # strong references to background resumes until they finish


class UnknownRequest(LookupError):
    """No approval request has this id."""


@dataclass(frozen=True)
class OneDecided:
    """The decided record, who decided it, and the background resume (None while others are still pending)."""

    record: ApprovalRecord
    decided_by: str
    resume: asyncio.Task[None] | None


async def decide_one(
    runtime: Runtime,
    request_id: str,
    resolution: Resolution,
    source: str,
    decided_by: str,
    *,
    also: Callable[[Connection, float], None] | None = None,
    wait: bool = False,
) -> OneDecided:
    """Decide ``request_id``; raises :class:`UnknownRequest` or :class:`~agent_runtime.approvals.AlreadyDecided`.

    ``also(conn, decided_at)`` adds writes to the deciding transaction (committed only if this decision wins).
    """
    record = await runtime.approvals.get(request_id)
    if record is None:
        raise UnknownRequest(request_id)

    def write(conn: Connection, decided_at: float) -> None:
        deciders.record(conn, request_id, decided_by, decided_at)
        if also is not None:
            also(conn, decided_at)

    (decided,) = await runtime.approvals.decide(record.task_id, {request_id: resolution}, source, known=[record], also=write)
    runtime.metrics.pending.dec()
    runtime.metrics.decisions.labels(outcome=OUTCOME_LABEL[decided.status], source=source).inc()
    if await runtime.approvals.for_task(record.task_id, pending_only=True):
        return OneDecided(decided, decided_by, None)
    note = f"{decided.describe_decision()} (decided by {decided_by}); every request of this pause is decided: resuming."
    resume = asyncio.create_task(_resume(runtime, decided, source, note), name=f"gatehouse-resume-{record.task_id}")
    _resuming.add(resume)
    resume.add_done_callback(_resuming.discard)
    if wait:
        await asyncio.shield(resume)
    return OneDecided(decided, decided_by, resume)


async def _resume(runtime: Runtime, record: ApprovalRecord, source: str, note: str) -> None:
    try:
        await runtime.resumer.resume(record.task_id, record.context_id, {}, source, note)
    except Exception:  # the decision is recorded; the next message to the task (or a restart) finishes it
        log.exception("resuming task %s after %s failed", record.task_id, record.id)


async def resume_recorded(runtime: Runtime, window: float = 24 * 3600) -> int:
    """At start-up: resume tasks whose last pause was completed by :func:`decide_one` but which were never run
    on (the runtime stopped between the decision and the resume). Returns how many were resumed."""
    since = time.time() - window
    stmt = (
        select(approvals.c.task_id, approvals.c.context_id)
        .join(deciders.deciders, deciders.deciders.c.request_id == approvals.c.id)
        .where(deciders.deciders.c.decided_at >= since)
        .distinct()
    )
    candidates = await runtime.db.run(lambda conn: [tuple(row) for row in conn.execute(stmt)], write=False)
    resumed = 0
    for task_id, context_id in candidates:
        if await runtime.approvals.for_task(task_id, pending_only=True):
            continue
        task = await runtime.task_store.get(task_id, ServerCallContext())
        if task is None or task.status.state != TaskState.TASK_STATE_INPUT_REQUIRED:
            continue
        note = "Every request of this pause was decided before a restart: resuming."
        await runtime.resumer.resume(task_id, context_id, {}, "restart", note)
        resumed += 1
    return resumed


async def wait_for_resumes() -> None:
    """Let background resumes finish (used on shutdown and by tests)."""
    while _resuming:
        await asyncio.gather(*list(_resuming), return_exceptions=True)


__all__ = ["OneDecided", "UnknownRequest", "decide_one", "resume_recorded", "wait_for_resumes"]
