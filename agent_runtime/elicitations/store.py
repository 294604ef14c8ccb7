"""The durable ``gatehouse_elicitations`` table: one row per round of an MCP tool's question, and the only code that
changes it.

A round lives in its own table, apart from ``gatehouse_approvals`` and ``gatehouse_hitl``, so no approval or question
path can touch it. It holds what the retry needs — the call's exact arguments and the tool server's opaque
``request_state`` — so a restart between the pause and the answer loses nothing. ``request_state`` never leaves
this table: not in a pause, a log or the task history. Its life:

    pending ──answer──► answered ──claim──► retrying ──tool returned──► done  (result_json: what the model gets)
                                                     └─asked again────► done, and round n+1 pending (one transaction)
    pending ──expires_at passed (sweeper) | task canceled──► done            (no retry)

Every change is a compare-and-swap on ``status`` and ``version`` (:class:`agent_runtime.pauses.store.PauseStore`),
committed before anything follows from it: two answers racing cannot both win, and the claim (answered → retrying) is
committed before the tool is called, so an answered call is retried at most once — a restart after the claim finds
``retrying`` and tells the model the call was continued once and never reported back, never retries it again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import Column, Integer, MetaData, String, Text

from agent_runtime.approvals.records import iso_utc
from agent_runtime.elicitations.elicitation_wire import ElicitationPrompt, FormRequest
from agent_runtime.pauses.store import AlreadyMoved, PauseStore, pause_table

Status = Literal["pending", "answered", "retrying", "done"]

metadata = MetaData()

elicitations = pause_table(
    "gatehouse_elicitations",
    metadata,
    Column("call_id", String(128), nullable=False, index=True),
    Column("tool", String(128), nullable=False),
    Column("server", String(128)),
    Column("args_json", Text, nullable=False),
    Column("round", Integer, nullable=False, default=1),
    Column("requests_json", Text, nullable=False),
    Column("preset_json", Text, nullable=False, default="{}"),
    Column("request_state", Text),
    Column("status", String(16), nullable=False, index=True),
    Column("responses_json", Text),
    Column("result_json", Text),
    Column("outcome", String(32), nullable=False, default=""),
    Column("source", String(64), nullable=False, default=""),
    Column("note", Text, nullable=False, default=""),
)


@dataclass(frozen=True)
class ElicitationRecord:
    id: str
    task_id: str
    context_id: str
    call_id: str
    tool: str
    server: str | None
    args: dict[str, Any]
    requests: dict[str, FormRequest]
    request_state: str | None
    created_at: float
    expires_at: float
    round: int = 1
    preset: dict[str, Any] | None = None
    status: Status = "pending"
    responses: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    outcome: str = ""  # accept | decline | cancel | timeout | canceled | error | asked again
    source: str = ""  # user | timeout | cancel | runtime
    note: str = ""
    updated_at: float = 0.0
    version: int = 0

    @property
    def open(self) -> bool:
        return self.status != "done"

    def prompt(self) -> ElicitationPrompt:
        return ElicitationPrompt(id=self.id, call_id=self.call_id, tool=self.tool, server=self.server, requests=self.requests,
                                 round=self.round, expires_at=iso_utc(self.expires_at))

    def describe(self) -> str:
        if self.status == "pending":
            return f"{self.id} ({self.tool}) is still waiting for an answer"
        if self.status != "done":
            return f"{self.id} ({self.tool}) was answered ({self.outcome or 'accept'}) and is being continued"
        when = f" at {iso_utc(self.updated_at)}" if self.updated_at else ""
        return f"{self.id} ({self.tool}) ended {self.outcome or 'done'} by {self.source or 'unknown'}{when}"


class ElicitationAlreadyAnswered(AlreadyMoved):
    """A change to a round that is no longer where the caller saw it. ``str(exc)`` is for the client."""

    prefix = "Already answered"
    nothing = "no tool question is open on this task"


def _row_to_record(m: Mapping[str, Any]) -> ElicitationRecord:
    requests = {k: FormRequest.model_validate(v) for k, v in json.loads(m["requests_json"]).items()}
    return ElicitationRecord(
        id=m["id"], task_id=m["task_id"], context_id=m["context_id"], call_id=m["call_id"], tool=m["tool"],
        server=m["server"], args=json.loads(m["args_json"]), requests=requests, request_state=m["request_state"],
        created_at=m["created_at"], expires_at=m["expires_at"], round=m["round"], preset=json.loads(m["preset_json"]),
        status=m["status"], responses=json.loads(m["responses_json"]) if m["responses_json"] else None,
        result=json.loads(m["result_json"]) if m["result_json"] else None, outcome=m["outcome"], source=m["source"],
        note=m["note"], updated_at=m["updated_at"], version=m["version"],
    )


def _record_to_row(r: ElicitationRecord) -> dict[str, Any]:
    return {
        "id": r.id, "task_id": r.task_id, "context_id": r.context_id, "call_id": r.call_id, "tool": r.tool,
        "server": r.server, "args_json": json.dumps(r.args, sort_keys=True),
        "requests_json": json.dumps({k: v.model_dump(mode="json") for k, v in r.requests.items()}),
        "preset_json": json.dumps(r.preset or {}), "request_state": r.request_state, "round": r.round, "status": r.status,
        "responses_json": json.dumps(r.responses) if r.responses is not None else None,
        "result_json": json.dumps(r.result) if r.result is not None else None, "outcome": r.outcome, "source": r.source,
        "note": r.note, "created_at": r.created_at, "expires_at": r.expires_at, "updated_at": r.updated_at or r.created_at,
        "version": r.version,
    }


class ElicitationStore(PauseStore[ElicitationRecord]):
    table = elicitations
    metadata = metadata
    state, done, expiring = "status", "done", "pending"  # an answered round is the retry's, never timed out
    moved = ("status", "responses_json", "result_json", "outcome", "source", "updated_at", "version")
    order = ("created_at", "round")
    already = ElicitationAlreadyAnswered
    to_record = staticmethod(_row_to_record)
    to_row = staticmethod(_record_to_row)

    async def answer(self, record: ElicitationRecord, responses: dict[str, Any], source: str) -> ElicitationRecord:
        """pending → answered with ``responses`` (every question's ElicitResult, the runtime's own answers included)."""
        outcome = _outcome_of({k: v for k, v in responses.items() if k in record.requests})  # the human's, not presets
        return await self._move(record, "pending", status="answered", responses=responses, outcome=outcome, source=source)

    async def claim_retry(self, record: ElicitationRecord) -> ElicitationRecord:
        """answered → retrying, committed before the tool is called: the one retry of this round."""
        return await self._move(record, "answered", status="retrying")

    async def finish(
        self, record: ElicitationRecord, result: dict[str, Any], *, outcome: str | None = None, source: str | None = None,
        then: ElicitationRecord | None = None,
    ) -> ElicitationRecord:
        """→ done with ``result`` (what the model receives); ``then``: the tool asked again, the next round is added in
        the same transaction."""
        values: dict[str, Any] = {"status": "done", "result": result}
        if outcome is not None:
            values["outcome"] = outcome
        if source is not None:
            values["source"] = source
        return await self._move(record, record.status, also=then, **values)


def _outcome_of(responses: dict[str, Any]) -> str:
    actions = {str(r.get("action")) for r in responses.values() if isinstance(r, dict)}
    for action in ("cancel", "decline"):
        if action in actions and "accept" not in actions:
            return action
    return "accept" if actions == {"accept"} else "/".join(sorted(actions))


__all__ = ["ElicitationAlreadyAnswered", "ElicitationRecord", "ElicitationStore", "Status", "elicitations", "metadata"]
