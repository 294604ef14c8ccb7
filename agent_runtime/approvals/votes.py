"""The durable record of votes: every approve or deny a person cast on a request, counted or refused.

One row per vote, written in the same transaction that judged it (:meth:`ApprovalService.vote
<agent_runtime.approvals.service.ApprovalService.vote>`), so the record and the outcome never disagree.
A refused vote (a principal not among the approvers, the requester under separation of duties, a second
vote by the same person) is kept with ``counted`` false and the reason in ``note``: the audit shows every
attempt, and only counted rows ever feed :func:`agent_runtime.contract.authority.tally`.

A vote is for the arguments it was cast on (``args_hash``, since state version 4). When an approver edits a
request's arguments (agent_runtime/contract/edits.py), the votes cast before stop counting: they are read back as not counted,
with why, while their rows stay as they were written (the table is append-only, like the audit it feeds).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, bindparam, select

from agent_runtime.approvals.tables import approvals, votes
from agent_runtime.contract.authority import Vote
from agent_runtime.infra.database import Database
from agent_runtime.infra.prepared import Prepared, mappings

# Each vote with the request's current arguments' hash and who edited them: a vote cast on other arguments is stale.
_WITH_REQUEST = select(
    votes, approvals.c.args_hash.label("current_hash"), approvals.c.original_args_json.label("original_args"),
    approvals.c.edited_by.label("editor"),
).join(approvals, approvals.c.id == votes.c.request_id)
_INSERT = Prepared(votes.insert())  # built once: a statement made per call with .values() is rebuilt and re-keyed each time
_FOR_REQUEST = Prepared(_WITH_REQUEST.where(votes.c.request_id == bindparam("request_id")).order_by(votes.c.id))
# Built once too (the list expanded at execution): one made per call (every pause reads its requests' votes) also left
# its cloned column in a reference cycle (SQLAlchemy's ``_cloned_set``) for the garbage collector.
_FOR_REQUESTS = _WITH_REQUEST.where(votes.c.request_id.in_(bindparam("ids", expanding=True))).order_by(votes.c.id)


@dataclass(frozen=True)
class CastVote:
    """A vote as recorded: the vote, when, whether it counted and, if not, why."""

    vote: Vote
    cast_at: float
    counted: bool
    note: str = ""


def _row(m: Mapping[str, Any]) -> CastVote:
    vote = Vote(m["principal"], frozenset(json.loads(m["groups_json"])), m["ballot"], m["reason"], m["channel"], m["seen_as"])
    cast_on = m["args_hash"] or ""  # "" : cast before votes said on what (state version < 4): on the model's arguments
    edited = m["original_args"] is not None
    stale = cast_on != m["current_hash"] if cast_on else edited
    if m["counted"] and stale:
        return CastVote(vote, m["cast_at"], False, f"cast on the arguments before {m['editor'] or 'an approver'} edited them")
    return CastVote(vote, m["cast_at"], bool(m["counted"]), m["note"])


def for_request(conn: Connection, request_id: str) -> list[CastVote]:
    return [_row(row) for row in _FOR_REQUEST.mappings(conn, {"request_id": request_id})]


def counted(cast: Sequence[CastVote]) -> list[Vote]:
    return [c.vote for c in cast if c.counted]


def write(conn: Connection, request_id: str, cast: CastVote, args_hash: str) -> None:
    """Record ``cast`` on ``request_id`` as it stands with arguments ``args_hash``."""
    v = cast.vote
    _INSERT(conn, {
        "request_id": request_id, "principal": v.principal, "seen_as": v.seen_as, "groups_json": json.dumps(sorted(v.groups)),
        "ballot": v.ballot, "reason": v.reason, "channel": v.channel, "cast_at": cast.cast_at, "counted": cast.counted,
        "note": cast.note, "args_hash": args_hash,
    })


async def lookup(db: Database, request_ids: Iterable[str]) -> dict[str, list[CastVote]]:
    """``{request_id: [votes in order]}`` for the ids that have votes."""
    ids = list(request_ids)
    if not ids:
        return {}

    def read(conn: Connection) -> dict[str, list[CastVote]]:
        found: dict[str, list[CastVote]] = {}
        for row in mappings(conn, _FOR_REQUESTS, {"ids": ids}):
            found.setdefault(row["request_id"], []).append(_row(row))
        return found

    return await db.run(read, write=False)


__all__ = ["CastVote", "counted", "for_request", "lookup", "votes", "write"]
