"""The durable ``gatehouse_hitl`` table: one row per ``hitl_request`` question, and the only code that changes it.

A question lives in its own table, not in ``gatehouse_approvals``, so no approval path (decide, claim, the
approval sweeper, session grants) can ever touch it, and no answer can ever approve a tool. Its life:

    stage answer ──answer──► confirm ──confirm|cancel──► done        (requireConfirmation)
    stage answer ──answer|cancel──► done                             (no confirmation)
    any open stage ──expires_at passed (sweeper)──► done, source timeout

Every change is a compare-and-swap on ``version`` (``UPDATE … WHERE id = ? AND version = ?``,
:class:`agent_runtime.pauses.store.PauseStore`), committed
before anyone is told, so two answers racing for one question (two clients, a client and the sweeper, two
replicas) cannot both win, and a replay after ``done`` changes nothing. ``result_json`` holds the
:class:`~agent_runtime.questions.question_wire.QuestionResult` the model receives, so a restart between "answered" and "model
resumed" resumes with exactly the recorded result.

For a Kubernetes mirror: :meth:`QuestionStore.subscribe` hears ``requested`` / ``answered`` / ``resolved`` after each
commit; the agreed way to tell a mirrored question from a tool approval is the label
``gatehouse.dev/kind: hitl_request`` on the ``ToolApproval``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Column, MetaData, String, Text, func, select

from agent_runtime.approvals.records import iso_utc
from agent_runtime.pauses.store import AlreadyMoved, Listener, PauseStore, pause_table
from agent_runtime.questions import question_wire

metadata = MetaData()

questions = pause_table(
    "gatehouse_hitl",
    metadata,
    Column("confirmation_id", String(128), nullable=False),
    Column("call_id", String(128), nullable=False, unique=True),
    Column("tool", String(64), nullable=False),
    Column("args_json", Text, nullable=False),
    Column("stage", String(16), nullable=False, index=True),
    Column("selected", Text),
    Column("result_json", Text),
    Column("source", String(64), nullable=False, default=""),
)


@dataclass(frozen=True)
class QuestionRecord:
    id: str
    task_id: str
    context_id: str
    confirmation_id: str
    call_id: str
    tool: str
    args: question_wire.QuestionArgs
    created_at: float
    expires_at: float
    stage: question_wire.Stage = "answer"
    selected: str | None = None
    result: question_wire.QuestionResult | None = None
    source: str = ""
    updated_at: float = 0.0
    version: int = 0

    @property
    def open(self) -> bool:
        return self.stage != "done"

    @property
    def expires_iso(self) -> str:
        return iso_utc(self.expires_at)

    def state(self) -> question_wire.QuestionState:
        return question_wire.QuestionState(request_id=self.id, args=self.args, stage=self.stage, selected=self.selected)

    def prompt(self) -> question_wire.QuestionPrompt:
        return self.state().prompt(self.expires_iso)

    def describe(self) -> str:
        if self.open:
            return f"{self.id} ({self.tool}) is still waiting for {'a confirmation' if self.stage == 'confirm' else 'an answer'}"
        when = f" at {iso_utc(self.updated_at)}" if self.updated_at else ""
        status = self.result.status if self.result else "done"
        chosen = f" ({self.result.selected_option!r})" if self.result and self.result.selected_option else ""
        return f"{self.id} ({self.tool}) ended {status}{chosen} by {self.source or 'unknown'}{when}"


class QuestionAlreadyAnswered(AlreadyMoved):
    """An answer to a question that is no longer open (or changed meanwhile). ``str(exc)`` is for the client."""

    prefix = "Already answered"
    nothing = "no question is open on this task"


def _row_to_record(m: Mapping[str, Any]) -> QuestionRecord:
    return QuestionRecord(
        id=m["id"], task_id=m["task_id"], context_id=m["context_id"], confirmation_id=m["confirmation_id"],
        call_id=m["call_id"], tool=m["tool"], args=question_wire.QuestionArgs.model_validate_json(m["args_json"]),
        created_at=m["created_at"], expires_at=m["expires_at"], stage=m["stage"], selected=m["selected"],
        result=question_wire.QuestionResult.model_validate_json(m["result_json"]) if m["result_json"] else None,
        source=m["source"], updated_at=m["updated_at"], version=m["version"],
    )


def _record_to_row(r: QuestionRecord) -> dict[str, Any]:
    return {
        "id": r.id, "task_id": r.task_id, "context_id": r.context_id, "confirmation_id": r.confirmation_id,
        "call_id": r.call_id, "tool": r.tool, "args_json": r.args.model_dump_json(), "stage": r.stage,
        "selected": r.selected, "result_json": r.result.model_dump_json() if r.result else None, "source": r.source,
        "created_at": r.created_at, "expires_at": r.expires_at, "updated_at": r.updated_at or r.created_at,
        "version": r.version,
    }


QuestionListener = Listener
"""Called after a commit with ``("requested" | "answered" | "resolved", record)``; must be quick, never raises out."""


class QuestionStore(PauseStore[QuestionRecord]):
    table = questions
    metadata = metadata
    state, done = "stage", "done"
    moved = ("stage", "selected", "source", "updated_at", "result_json", "version")
    already = QuestionAlreadyAnswered
    to_record = staticmethod(_row_to_record)
    to_row = staticmethod(_record_to_row)

    async def advance(
        self, record: QuestionRecord, state: question_wire.QuestionState, result: question_wire.QuestionResult | None, source: str
    ) -> QuestionRecord:
        """Move ``record`` to ``state`` (and ``result``) if nobody changed it since it was read; else QuestionAlreadyAnswered."""
        updated = await self._move(record, None, stage=state.stage, selected=state.selected, result=result, source=source)
        await self._publish("resolved" if result is not None else "answered", updated)
        return updated

    async def open_questions(self, limit: int = 100_000) -> list[QuestionRecord]:
        """Every open question, oldest first (the Kubernetes mirror catches up with them at start-up)."""
        stmt = select(questions).where(questions.c.stage != "done").order_by(questions.c.created_at).limit(limit)
        return await self._select(stmt)

    async def open_count(self) -> int:
        stmt = select(func.count()).select_from(questions).where(questions.c.stage != "done")
        return int(await self._db.run(lambda conn: conn.execute(stmt).scalar() or 0, write=False))


def result_json(result: question_wire.QuestionResult) -> dict[str, Any]:
    return json.loads(result.model_dump_json())


__all__ = ["QuestionAlreadyAnswered", "QuestionListener", "QuestionRecord", "QuestionStore", "questions", "result_json"]
