"""The durable ``gatehouse_delegations`` table: one row per sub-agent call that paused, and the only code that changes it.

A row holds what the parent needs to go on after a restart: which of its calls waits (``call_id``, the model's
arguments), on which sub-agent task, and the sub-agent's latest pause as this agent shows it. Its life:

    waiting ──the sub-agent paused again (a vote counted, a new gated call)──► waiting (pause updated)
    waiting ──the sub-agent's task ended (forwarded decision, its own timeout, decided elsewhere)──► done
    waiting ──this task canceled | the sub-agent unreachable past the expiry──► done  (result: an error for the model)

Every change is a compare-and-swap on ``status`` and ``version`` (:class:`agent_runtime.pauses.store.PauseStore`): two
forwarded decisions racing cannot both hand the sub-agent's result to the model, and only the request that moved the
row to ``done`` resumes the model.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import Column, MetaData, String, Text, bindparam, select

from agent_runtime.approvals.records import iso_utc
from agent_runtime.pauses.store import AlreadyMoved, PauseStore, pause_table
from agent_runtime.runs.run_scope import Pause

Status = Literal["waiting", "done"]

metadata = MetaData()

delegations = pause_table(
    "gatehouse_delegations",
    metadata,
    Column("call_id", String(128), nullable=False),
    Column("tool", String(128), nullable=False),
    Column("agent", Text, nullable=False),
    Column("args_json", Text, nullable=False),
    Column("child_task_id", String(128), nullable=False),
    Column("child_context_id", String(128), nullable=False),
    Column("pause_json", Text, nullable=False),
    Column("status", String(16), nullable=False, index=True),
    Column("result_json", Text),
    Column("outcome", String(32), nullable=False, default=""),
    Column("note", Text, nullable=False, default=""),
    expires_index=False,
)


@dataclass(frozen=True)
class DelegationRecord:
    id: str
    task_id: str
    context_id: str
    call_id: str
    tool: str  # the tool name the model called
    agent: str  # who the sub-agent is (SubAgentConfig.agent)
    args: dict[str, Any]
    child_task_id: str
    child_context_id: str
    pause: Pause
    created_at: float
    expires_at: float  # no later than the earliest request inside the sub-agent's pause
    status: Status = "waiting"
    result: dict[str, Any] | None = None  # what the model receives (relay.result_for_model)
    outcome: str = ""  # the sub-agent task's final state, or canceled / unreachable
    note: str = ""  # what the model is told with the result (an approver's edit of the delegation call itself)
    updated_at: float = 0.0
    version: int = 0

    @property
    def open(self) -> bool:
        return self.status == "waiting"

    def describe(self) -> str:
        if self.open:
            return f"{self.id} ({self.tool} → task {self.child_task_id}) is still waiting"
        when = f" at {iso_utc(self.updated_at)}" if self.updated_at else ""
        return f"{self.id} ({self.tool} → task {self.child_task_id}) ended {self.outcome or 'done'}{when}"


class AlreadyFinished(AlreadyMoved):
    """A change to a row that is no longer where the caller saw it. ``str(exc)`` is for the client."""

    prefix = "Already decided"
    nothing = "no sub-agent request is open on this task"


_WAITING = select(delegations).where(delegations.c.status == "waiting").order_by(delegations.c.created_at) \
    .limit(bindparam("limit"))


def _row_to_record(m: Mapping[str, Any]) -> DelegationRecord:
    return DelegationRecord(
        id=m["id"], task_id=m["task_id"], context_id=m["context_id"], call_id=m["call_id"], tool=m["tool"],
        agent=m["agent"], args=json.loads(m["args_json"]), child_task_id=m["child_task_id"],
        child_context_id=m["child_context_id"], pause=Pause.from_json(m["pause_json"]), created_at=m["created_at"],
        expires_at=m["expires_at"], status=m["status"], result=json.loads(m["result_json"]) if m["result_json"] else None,
        outcome=m["outcome"], note=m["note"], updated_at=m["updated_at"], version=m["version"],
    )


def _record_to_row(r: DelegationRecord) -> dict[str, Any]:
    return {
        "id": r.id, "task_id": r.task_id, "context_id": r.context_id, "call_id": r.call_id, "tool": r.tool,
        "agent": r.agent, "args_json": json.dumps(r.args, sort_keys=True), "child_task_id": r.child_task_id,
        "child_context_id": r.child_context_id, "pause_json": r.pause.to_json(), "status": r.status,
        "result_json": json.dumps(r.result) if r.result is not None else None, "outcome": r.outcome, "note": r.note,
        "created_at": r.created_at, "expires_at": r.expires_at, "updated_at": r.updated_at or r.created_at,
        "version": r.version,
    }


class DelegationStore(PauseStore[DelegationRecord]):
    table = delegations
    metadata = metadata
    state, done = "status", "done"
    moved = ("status", "pause_json", "result_json", "outcome", "expires_at", "updated_at", "version")
    already = AlreadyFinished
    to_record = staticmethod(_row_to_record)
    to_row = staticmethod(_record_to_row)

    async def waiting(self, limit: int = 200) -> list[DelegationRecord]:
        """Open rows, oldest first (the watcher's round)."""
        return await self._select(_WAITING, {"limit": limit})

    async def repause(self, record: DelegationRecord, pause: Pause, expires_at: float) -> DelegationRecord:
        """waiting → waiting with the sub-agent's newer pause."""
        return await self._move(record, "waiting", pause=pause, expires_at=expires_at)

    async def finish(self, record: DelegationRecord, result: dict[str, Any], outcome: str) -> DelegationRecord:
        """waiting → done with ``result`` (what the model receives)."""
        return await self._move(record, "waiting", status="done", result=result, outcome=outcome)


__all__ = ["AlreadyFinished", "DelegationRecord", "DelegationStore", "Pause", "Status", "delegations", "metadata"]
