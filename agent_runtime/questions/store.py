"""The durable ``gatehouse_hitl`` table: one row per ``hitl_request`` question, and the only code that changes it.

A question lives in its own table, not in ``gatehouse_approvals``, so no approval path (decide, claim, the
approval sweeper, session grants) can ever touch it, and no answer can ever approve a tool. Its life:

    stage answer ──answer──► confirm ──confirm|cancel──► done        (requireConfirmation)
    stage answer ──answer|cancel──► done                             (no confirmation)
    any open stage ──expires_at passed (sweeper)──► done, source timeout

Every change is a compare-and-swap on ``version`` (``UPDATE … WHERE id = ? AND version = ?``), committed
before anyone is told, so two answers racing for one question (two clients, a client and the sweeper, two
replicas) cannot both win, and a replay after ``done`` changes nothing. ``result_json`` holds the
:class:`~agent_runtime.questions.wire.HitlResult` the model receives, so a restart between "answered" and "model
resumed" resumes with exactly the recorded result.

For a Kubernetes mirror: :meth:`HitlStore.subscribe` hears ``requested`` / ``answered`` / ``resolved`` after each
commit; the agreed way to tell a mirrored question from a tool approval is the label
``gatehouse.dev/kind: hitl_request`` on the ``ToolApproval``.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import Column, Float, Integer, MetaData, String, Table, Text, bindparam, func, select, update

from agent_runtime.approvals.records import iso_utc
from agent_runtime.database import Database
from agent_runtime.fresh_ids import FreshIds
from agent_runtime.prepared import Prepared, mappings
from agent_runtime.questions import wire as question_wire

log = logging.getLogger(__name__)

metadata = MetaData()

questions = Table(
    "gatehouse_hitl",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("task_id", String(128), nullable=False, index=True),
    Column("context_id", String(128), nullable=False, index=True),
    Column("confirmation_id", String(128), nullable=False),
    Column("call_id", String(128), nullable=False, unique=True),
    Column("tool", String(64), nullable=False),
    Column("args_json", Text, nullable=False),
    Column("stage", String(16), nullable=False, index=True),
    Column("selected", Text),
    Column("result_json", Text),
    Column("source", String(64), nullable=False, default=""),
    Column("created_at", Float, nullable=False),
    Column("expires_at", Float, nullable=False, index=True),
    Column("updated_at", Float, nullable=False),
    Column("version", Integer, nullable=False, default=0),
)


@dataclass(frozen=True)
class HitlRecord:
    id: str
    task_id: str
    context_id: str
    confirmation_id: str
    call_id: str
    tool: str
    args: question_wire.HitlArgs
    created_at: float
    expires_at: float
    stage: question_wire.Stage = "answer"
    selected: str | None = None
    result: question_wire.HitlResult | None = None
    source: str = ""
    updated_at: float = 0.0
    version: int = 0

    @property
    def open(self) -> bool:
        return self.stage != "done"

    @property
    def expires_iso(self) -> str:
        return iso_utc(self.expires_at)

    def state(self) -> question_wire.HitlState:
        return question_wire.HitlState(request_id=self.id, args=self.args, stage=self.stage, selected=self.selected)

    def prompt(self) -> question_wire.HitlPrompt:
        return self.state().prompt(self.expires_iso)

    def describe(self) -> str:
        if self.open:
            return f"{self.id} ({self.tool}) is still waiting for {'a confirmation' if self.stage == 'confirm' else 'an answer'}"
        when = f" at {iso_utc(self.updated_at)}" if self.updated_at else ""
        status = self.result.status if self.result else "done"
        chosen = f" ({self.result.selected_option!r})" if self.result and self.result.selected_option else ""
        return f"{self.id} ({self.tool}) ended {status}{chosen} by {self.source or 'unknown'}{when}"


# Statements of the request path and the sweeper, built once (bind parameters).
_FOR_TASK = Prepared(select(questions).where(questions.c.task_id == bindparam("task_id")).order_by(questions.c.created_at))
_OPEN_IN_CONTEXT = select(questions).where(questions.c.context_id == bindparam("context_id"), questions.c.stage != "done")
_EXPIRED = (
    select(questions).where(questions.c.stage != "done", questions.c.expires_at <= bindparam("now"))
    .order_by(questions.c.expires_at).limit(bindparam("limit"))
)


class AlreadyAnswered(Exception):
    """An answer to a question that is no longer open (or changed meanwhile). ``str(exc)`` is for the client."""

    def __init__(self, records: Sequence[HitlRecord]) -> None:
        self.records = list(records)
        details = "; ".join(r.describe() for r in records) or "no question is open on this task"
        super().__init__(f"Already answered: {details}. Nothing changed.")


def _row_to_record(m: Mapping[str, Any]) -> HitlRecord:
    return HitlRecord(
        id=m["id"], task_id=m["task_id"], context_id=m["context_id"], confirmation_id=m["confirmation_id"],
        call_id=m["call_id"], tool=m["tool"], args=question_wire.HitlArgs.model_validate_json(m["args_json"]),
        created_at=m["created_at"], expires_at=m["expires_at"], stage=m["stage"], selected=m["selected"],
        result=question_wire.HitlResult.model_validate_json(m["result_json"]) if m["result_json"] else None,
        source=m["source"], updated_at=m["updated_at"], version=m["version"],
    )


def _record_to_row(r: HitlRecord) -> dict[str, Any]:
    return {
        "id": r.id, "task_id": r.task_id, "context_id": r.context_id, "confirmation_id": r.confirmation_id,
        "call_id": r.call_id, "tool": r.tool, "args_json": r.args.model_dump_json(), "stage": r.stage,
        "selected": r.selected, "result_json": r.result.model_dump_json() if r.result else None, "source": r.source,
        "created_at": r.created_at, "expires_at": r.expires_at, "updated_at": r.updated_at or r.created_at,
        "version": r.version,
    }


HitlListener = Callable[[str, HitlRecord], Awaitable[None] | None]
"""Called after a commit with ``("requested" | "answered" | "resolved", record)``; must be quick, never raises out."""


class HitlStore:
    def __init__(self, db: Database, clock: Callable[[], float] = time.time, fresh: FreshIds | None = None) -> None:
        self._db = db
        self.clock = clock
        self._listeners: list[HitlListener] = []
        self._fresh = fresh  # contexts with nothing stored yet (agent_runtime/fresh_ids.py)

    def subscribe(self, listener: HitlListener) -> Callable[[], None]:
        """Add a listener; returns the function that removes it again."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    async def _publish(self, kind: str, record: HitlRecord) -> None:
        for listener in list(self._listeners):
            try:
                result = listener(kind, record)
                if result is not None:
                    await result
            except Exception:  # a listener must never break an answer
                log.exception("hitl listener failed on %s", kind)

    async def create_tables(self) -> None:
        await self._db.create_tables(metadata)

    async def add(self, record: HitlRecord) -> None:
        if self._fresh is not None:
            self._fresh.written(record.context_id)
        row = _record_to_row(record)
        await self._db.run(lambda conn: conn.execute(questions.insert(), [row]))
        await self._publish("requested", record)

    async def _select(self, stmt: Any, params: dict[str, Any] | None = None) -> list[HitlRecord]:
        return await self._db.run(lambda conn: [_row_to_record(m) for m in mappings(conn, stmt, params)], write=False)

    async def for_task(self, task_id: str) -> list[HitlRecord]:
        """Every question of the task, oldest first."""
        return await self._select(_FOR_TASK, {"task_id": task_id})

    async def open_in_context(self, context_id: str) -> list[HitlRecord]:
        if self._fresh is not None and context_id in self._fresh:
            return []
        return await self._select(_OPEN_IN_CONTEXT, {"context_id": context_id})

    async def advance(
        self, record: HitlRecord, state: question_wire.HitlState, result: question_wire.HitlResult | None, source: str
    ) -> HitlRecord:
        """Move ``record`` to ``state`` (and ``result``) if nobody changed it since it was read; else AlreadyAnswered."""
        now = self.clock()
        values = {
            "stage": state.stage, "selected": state.selected, "source": source, "updated_at": now,
            "result_json": result.model_dump_json() if result else None, "version": record.version + 1,
        }
        stmt = (
            update(questions)
            .where(questions.c.id == record.id, questions.c.version == record.version, questions.c.stage != "done")
            .values(**values)
        )
        if await self._db.run(lambda conn: conn.execute(stmt).rowcount) != 1:
            current = await self._select(select(questions).where(questions.c.id == record.id))
            raise AlreadyAnswered(current)
        updated = replace(
            record, stage=state.stage, selected=state.selected, result=result, source=source, updated_at=now,
            version=record.version + 1,
        )
        await self._publish("resolved" if result is not None else "answered", updated)
        return updated

    async def expired(self, limit: int = 100) -> list[HitlRecord]:
        return await self._select(_EXPIRED, {"now": self.clock(), "limit": limit})

    async def open_questions(self, limit: int = 100_000) -> list[HitlRecord]:
        """Every open question, oldest first (the Kubernetes mirror catches up with them at start-up)."""
        stmt = select(questions).where(questions.c.stage != "done").order_by(questions.c.created_at).limit(limit)
        return await self._select(stmt)

    async def open_count(self) -> int:
        stmt = select(func.count()).select_from(questions).where(questions.c.stage != "done")
        return int(await self._db.run(lambda conn: conn.execute(stmt).scalar() or 0, write=False))


def result_json(result: question_wire.HitlResult) -> dict[str, Any]:
    return json.loads(result.model_dump_json())


__all__ = ["AlreadyAnswered", "HitlListener", "HitlRecord", "HitlStore", "questions", "result_json"]
