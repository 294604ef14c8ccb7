"""The durable record of votes: every approve or deny a person cast on a request, counted or refused.

One row per vote, written in the same transaction that judged it (:meth:`ApprovalService.vote
<agent_runtime.approvals.service.ApprovalService.vote>`), so the record and the outcome never disagree.
A refused vote (a principal not among the approvers, the requester under separation of duties, a second
vote by the same person) is kept with ``counted`` false and the reason in ``note``: the audit shows every
attempt, and only counted rows ever feed :func:`agent_runtime.authority.tally`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, bindparam, select

from agent_runtime.approvals.tables import votes
from agent_runtime.authority import Vote
from agent_runtime.database import Database

_FOR_REQUEST = select(votes).where(votes.c.request_id == bindparam("request_id")).order_by(votes.c.id)


@dataclass(frozen=True)
class CastVote:
    """A vote as recorded: the vote, when, whether it counted and, if not, why."""

    vote: Vote
    cast_at: float
    counted: bool
    note: str = ""


def _row(row: object) -> CastVote:
    m = row._mapping  # type: ignore[attr-defined]
    vote = Vote(m["principal"], frozenset(json.loads(m["groups_json"])), m["ballot"], m["reason"], m["channel"], m["seen_as"])
    return CastVote(vote, m["cast_at"], bool(m["counted"]), m["note"])


def for_request(conn: Connection, request_id: str) -> list[CastVote]:
    return [_row(row) for row in conn.execute(_FOR_REQUEST, {"request_id": request_id})]


def counted(cast: Sequence[CastVote]) -> list[Vote]:
    return [c.vote for c in cast if c.counted]


def write(conn: Connection, request_id: str, cast: CastVote) -> None:
    v = cast.vote
    conn.execute(votes.insert().values(
        request_id=request_id, principal=v.principal, seen_as=v.seen_as, groups_json=json.dumps(sorted(v.groups)),
        ballot=v.ballot, reason=v.reason, channel=v.channel, cast_at=cast.cast_at, counted=cast.counted, note=cast.note,
    ))


async def lookup(db: Database, request_ids: Iterable[str]) -> dict[str, list[CastVote]]:
    """``{request_id: [votes in order]}`` for the ids that have votes."""
    ids = list(request_ids)
    if not ids:
        return {}
    stmt = select(votes).where(votes.c.request_id.in_(ids)).order_by(votes.c.id)

    def read(conn: Connection) -> dict[str, list[CastVote]]:
        found: dict[str, list[CastVote]] = {}
        for row in conn.execute(stmt):
            found.setdefault(row._mapping["request_id"], []).append(_row(row))
        return found

    return await db.run(read, write=False)


__all__ = ["CastVote", "counted", "for_request", "lookup", "votes", "write"]
