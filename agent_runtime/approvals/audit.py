"""The audit log: one append-only record per event of a gated call, read back as one ordered stream.

The events of one call::

    requested ─► voted … (edited ─► voted …) ─► decided | timed_out | canceled ─► started ─► executed   (or refused: not run)
    granted (ran at once under a session grant) ───────────────────────► executed

One store, not two. Every vote is already a row of ``gatehouse_approval_votes`` (approvals/votes.py: counted or
refused, written in the transaction that judged it); the audit reads votes from there and never copies them.
Every other event is a row of ``gatehouse_audit_events``, written by
:class:`~agent_runtime.approvals.service.ApprovalService` inside the transaction of the change it records, so a
decision and its audit row are committed together or not at all. What a row does not repeat (the tool, the
arguments' hash, the task, who asked) is joined from the request in ``gatehouse_approvals``.

:class:`AuditLog` reads the merged stream in a stable order (time, then the event's place in a call's life,
then insertion order), a page at a time behind an opaque cursor, filtered by time, tool, principal, requester,
request and event. Nothing here or anywhere else updates an audit row; :meth:`AuditLog.prune` (retention)
deletes rows older than the configured time, never those of a request that is still pending.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict
from sqlalchemy import (
    Boolean,
    Connection,
    case,
    cast,
    delete,
    literal_column,
    null,
    select,
    tuple_,
    union_all,
)

from agent_runtime.approvals import execution
from agent_runtime.approvals.records import ApprovalRecord
from agent_runtime.approvals.tables import approvals, audit_events, votes
from agent_runtime.contract.durations import parse_duration
from agent_runtime.contract.principals import INTERNAL
from agent_runtime.infra.database import Database
from agent_runtime.infra.prepared import Prepared

EventKind = Literal[
    "requested", "voted", "edited", "decided", "timed_out", "canceled", "granted", "started", "executed", "refused",
    "abandoned",
]
EVENTS: tuple[str, ...] = (
    "requested", "voted", "edited", "decided", "timed_out", "canceled", "granted", "started", "executed", "refused",
    "abandoned",
)
# An event's place in a call's life: orders events written at the same instant (a vote and the decision it made).
_RANK = {"requested": 0, "edited": 1, "voted": 1, "decided": 2, "timed_out": 2, "canceled": 2, "granted": 2, "started": 3,
         "refused": 3, "abandoned": 3, "executed": 4}
# The decision of a request by a channel that is not a vote, as an event (sources of ApprovalService.decide).
_DECISION_EVENT = {"timeout": "timed_out", "cancel": "canceled"}
MAX_PAGE = 1000


class AuditEntry(BaseModel):
    """One audit event as ``GET /audit`` and ``gatehouse audit export`` show it (the CSV's columns, in order)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str  # e<n> (an audit event) or v<n> (a vote): unique and stable
    at: str  # ISO 8601, UTC, microseconds
    event: EventKind
    agent: str
    request_id: str
    task_id: str = ""
    context_id: str = ""
    tool: str = ""
    server: str = ""
    args_hash: str = ""  # sha256 of the canonical tool + arguments: what was approved, without the arguments
    rule: str = ""  # requested, granted: the policy rule that gated the call
    principal: str = ""  # who acted: the requester, the voter, who decided (N-of-M: "alice, bob"), gatehouse:internal
    seen_as: str = ""  # voted: the name the channel authenticated, before identities were applied
    channel: str = ""  # a2a, rest, kubectl, timeout, cancel, grant
    # requested: pending; voted: approve|deny; decided: approved|denied|expired; executed: ran|failed|unknown|not_sent
    outcome: str = ""
    counted: bool | None = None  # voted: whether the vote counted
    # requested: the policy's hint; voted/decided: the reason given; edited: what changed; refused: why not run;
    # executed: the error the call reported (redacted)
    reason: str = ""
    note: str = ""  # voted: why a vote did not count
    requested_by: str = ""
    wait_seconds: float | None = None  # decided, timed_out, canceled: from the request to its decision


FIELDS: tuple[str, ...] = tuple(AuditEntry.model_fields)


class AuditPage(BaseModel):
    """One page of ``GET /audit`` (agent_runtime/rest/audit.py); ``next_cursor`` None: nothing more matches now."""

    entries: list[AuditEntry]
    next_cursor: str | None = None


@dataclass(frozen=True)
class AuditQuery:
    """Which events: ``since`` <= at < ``until`` (epoch seconds), and the equalities that are set."""

    since: float | None = None
    until: float | None = None
    tool: str | None = None
    principal: str | None = None  # who acted
    requested_by: str | None = None  # whose call it was
    request_id: str | None = None
    event: str | None = None


# --- writing (inside the caller's transaction) ------------------------------------------------------------

_INSERT = Prepared(audit_events.insert())
def _row(event: str, request_id: str, at: float, principal: str = INTERNAL, channel: str = "", outcome: str = "",
         reason: str = "", rule: str = "") -> dict[str, Any]:
    return {"at": at, "event": event, "request_id": request_id, "principal": principal, "channel": channel,
            "outcome": outcome, "reason": reason, "rule": rule}


def requested(conn: Connection, records: Sequence[ApprovalRecord], rules: Mapping[str, str]) -> None:
    """New pending requests (one model turn), asked for over A2A by their requester."""
    _INSERT(conn, [
        _row("requested", r.id, r.created_at, r.requested_by, "a2a", "pending", rule=rules.get(r.id, "")) for r in records
    ])


def decided(conn: Connection, request_id: str, at: float, *, status: str, source: str, by: str, reason: str) -> None:
    """A request's outcome: ``decided`` by people, ``timed_out`` or ``canceled`` by the runtime (``source``)."""
    event = _DECISION_EVENT.get(source, "decided")
    _INSERT(conn, _row(event, request_id, at, by or (INTERNAL if event != "decided" else source), source, status,
                               reason))


def edited(conn: Connection, request_id: str, at: float, *, by: str, channel: str, reason: str) -> None:
    """An approver replaced the pending call's arguments (agent_runtime/contract/edits.py); ``reason`` says what changed and gives
    both arguments' hashes (the arguments themselves stay in the request: ``original_args_json`` and ``args_json``)."""
    _INSERT(conn, _row("edited", request_id, at, by, channel, "edited", reason))


def granted(conn: Connection, record: ApprovalRecord, granted_by: str, rule: str) -> None:
    """A call that ran at once under a session grant (``record.reason`` names the grant)."""
    _INSERT(conn, _row("granted", record.id, record.created_at, granted_by, "grant", "approved", record.reason, rule))


def started(conn: Connection, request_id: str, at: float) -> None:
    """The approved call was claimed for execution: the tool is called next."""
    _INSERT(conn, _row("started", request_id, at, outcome="started"))


def refused(conn: Connection, request_id: str, at: float, problem: str) -> None:
    """A claim to run the call was refused (a replay, arguments that differ from the approved ones): not run."""
    _INSERT(conn, _row("refused", request_id, at, outcome="not run", reason=problem))


def abandoned(conn: Connection, request_id: str, at: float, reason: str) -> None:
    """A gateway's held call nobody waits for any more, past its lifetime: it will never run (ApprovalService.abandon)."""
    _INSERT(conn, _row("abandoned", request_id, at, outcome="abandoned", reason=reason))


def executed(conn: Connection, request_id: str, at: float, outcome: execution.Outcome, error: str) -> None:
    """The claimed call's tool returned: ran, failed, unknown or not_sent (approvals/execution.py), with the error
    (redacted) as the reason."""
    _INSERT(conn, _row("executed", request_id, at, outcome=outcome, reason=error))


def last_executed() -> tuple[Any, Any]:
    """The outcome and time of the last ``executed`` event of each request, as scalar subqueries correlated with the
    approvals table (the state upgrade of approvals/schema.py reads older calls' outcomes from them)."""
    e, a = audit_events, approvals
    last = (select(e.c.id).where(e.c.request_id == a.c.id, e.c.event == "executed").order_by(e.c.id.desc()).limit(1)
            .correlate(a).scalar_subquery())
    return (select(e.c.outcome).where(e.c.id == last).scalar_subquery(),
            select(e.c.at).where(e.c.id == last).scalar_subquery())


# --- reading --------------------------------------------------------------------------------------------

def _stream() -> Any:
    """Audit events and votes as one relation: (at, rank, src, seq) orders it; the rest are the entry's fields."""
    e, v = audit_events, votes
    events = select(
        e.c.at.label("at"), case(_RANK, value=e.c.event, else_=9).label("rank"), literal_column("'e'").label("src"),
        e.c.id.label("seq"), e.c.event.label("event"), e.c.request_id.label("request_id"),
        e.c.principal.label("principal"), literal_column("''").label("seen_as"), e.c.channel.label("channel"),
        e.c.outcome.label("outcome"), cast(null(), Boolean).label("counted"), e.c.reason.label("reason"),
        literal_column("''").label("note"), e.c.rule.label("rule"),
    )
    cast_votes = select(
        v.c.cast_at, literal_column("1"), literal_column("'v'"), v.c.id, literal_column("'voted'"), v.c.request_id,
        v.c.principal, v.c.seen_as, v.c.channel, v.c.ballot, v.c.counted, v.c.reason, v.c.note, literal_column("''"),
    )
    return union_all(events, cast_votes).subquery("audit_stream")


def _cursor(at: float, rank: int, src: str, seq: int) -> str:
    return base64.urlsafe_b64encode(json.dumps([at, rank, src, seq]).encode()).decode().rstrip("=")


def parse_cursor(text: str) -> tuple[float, int, str, int]:
    """The position a cursor stands for; ``ValueError`` for anything this module did not hand out."""
    try:
        at, rank, src, seq = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
        if not (isinstance(at, int | float) and isinstance(rank, int) and src in ("e", "v") and isinstance(seq, int)):
            raise ValueError
        return float(at), rank, src, seq
    except (ValueError, TypeError, json.JSONDecodeError):
        raise ValueError(f"not a cursor of this audit log: {text!r}") from None


def iso_micro(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def parse_time(text: str, now: float) -> float:
    """Epoch seconds from ``2026-11-01`` (midnight UTC), an ISO 8601 time (no offset: UTC) or a duration back from
    ``now`` (``24h``, ``7d``); ``ValueError`` says what is accepted."""
    value = text.strip()
    if re.fullmatch(r"(\d+(\.\d+)?(ms|s|m|h|d))+", value):
        return now - parse_duration(value)
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
            return datetime.combine(date.fromisoformat(value), datetime.min.time(), UTC).timestamp()
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"invalid time {text!r}: use a date (2026-11-01), a time (2026-11-01T08:00:00Z) or a duration back (24h, 7d)"
        ) from None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()


class AuditLog:
    """Reads the audit of one runtime's database (``agent``: the name its entries carry) and applies retention."""

    def __init__(self, db: Database, agent: str = "") -> None:
        self._db = db
        self.agent = agent

    async def page(self, query: AuditQuery = AuditQuery(), cursor: str | None = None, limit: int = 100) -> AuditPage:
        """Up to ``limit`` entries after ``cursor`` (the start when None), oldest first."""
        limit = max(1, min(limit, MAX_PAGE))
        after = parse_cursor(cursor) if cursor else None
        stream, a = _stream(), approvals
        stmt = select(
            stream, a.c.task_id, a.c.context_id, a.c.tool, a.c.server, a.c.args_hash, a.c.requested_by, a.c.hint,
            a.c.created_at,
        ).select_from(stream.outerjoin(a, a.c.id == stream.c.request_id))
        for column, wanted in ((stream.c.principal, query.principal), (stream.c.request_id, query.request_id),
                               (stream.c.event, query.event), (a.c.tool, query.tool), (a.c.requested_by, query.requested_by)):
            if wanted is not None:
                stmt = stmt.where(column == wanted)
        if query.since is not None:
            stmt = stmt.where(stream.c.at >= query.since)
        if query.until is not None:
            stmt = stmt.where(stream.c.at < query.until)
        if after is not None:
            stmt = stmt.where(tuple_(stream.c.at, stream.c.rank, stream.c.src, stream.c.seq) > tuple_(*after))
        stmt = stmt.order_by(stream.c.at, stream.c.rank, stream.c.src, stream.c.seq).limit(limit + 1)
        rows = await self._db.run(lambda conn: [row._mapping for row in conn.execute(stmt)], write=False)
        entries = [self._entry(m) for m in rows[:limit]]
        last = rows[limit - 1] if len(rows) > limit else None
        following = _cursor(last["at"], last["rank"], last["src"], last["seq"]) if last is not None else None
        return AuditPage(entries=entries, next_cursor=following)

    async def entries(self, query: AuditQuery = AuditQuery(), page_size: int = MAX_PAGE) -> list[AuditEntry]:
        """Every matching entry (tests, small exports)."""
        found: list[AuditEntry] = []
        cursor: str | None = None
        while True:
            page = await self.page(query, cursor, page_size)
            found += page.entries
            if page.next_cursor is None:
                return found
            cursor = page.next_cursor

    def _entry(self, m: Any) -> AuditEntry:  # a row mapping of the stream joined with its request
        event = m["event"]
        decision = event in ("decided", "timed_out", "canceled")
        wait = round(m["at"] - m["created_at"], 6) if decision and m["created_at"] is not None else None
        return AuditEntry(
            id=f"{m['src']}{m['seq']}", at=iso_micro(m["at"]), event=event, agent=self.agent, request_id=m["request_id"],
            task_id=m["task_id"] or "", context_id=m["context_id"] or "", tool=m["tool"] or "", server=m["server"] or "",
            args_hash=m["args_hash"] or "", rule=m["rule"] or "", principal=m["principal"] or "", seen_as=m["seen_as"] or "",
            channel=m["channel"] or "", outcome=_outcome(event, m["outcome"] or ""),
            counted=bool(m["counted"]) if event == "voted" else None,
            reason=(m["hint"] or "") if event == "requested" else m["reason"] or "", note=m["note"] or "",
            requested_by=m["requested_by"] or "", wait_seconds=wait,
        )

    async def prune(self, before: float) -> int:
        """Delete audit events and votes older than ``before`` (epoch seconds), except those of requests still
        pending (their votes are still being counted); returns how many rows went."""
        pending = select(approvals.c.id).where(approvals.c.status == "pending")

        def transaction(conn: Connection) -> int:
            gone = conn.execute(
                delete(audit_events).where(audit_events.c.at < before, audit_events.c.request_id.not_in(pending))
            ).rowcount
            return int(gone) + int(conn.execute(
                delete(votes).where(votes.c.cast_at < before, votes.c.request_id.not_in(pending))
            ).rowcount)

        return await self._db.run(transaction)


def _outcome(event: str, stored: str) -> str:
    """An ``executed`` event written by a release before the execution outcomes (ok, error) in today's words."""
    return execution.LEGACY.get(stored, stored) if event == "executed" else stored


def csv_row(entry: AuditEntry) -> list[str]:
    """The entry as CSV cells, in :data:`FIELDS` order (None: empty; booleans: true/false)."""
    cells = []
    for name in FIELDS:
        value = getattr(entry, name)
        cells.append("" if value is None else ("true" if value is True else "false" if value is False else str(value)))
    return cells


__all__ = [
    "EVENTS", "FIELDS", "MAX_PAGE", "AuditEntry", "AuditLog", "AuditPage", "AuditQuery", "EventKind", "csv_row",
    "decided", "edited", "executed", "granted", "iso_micro", "last_executed", "parse_cursor", "parse_time", "refused",
    "requested", "started",
]
