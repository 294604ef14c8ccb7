"""Who decided a request: the principal behind a REST token, a Kubernetes user, or just the channel.

The approvals table records the *source* of a decision (``a2a``, ``timeout``, ``rest``, ``kubernetes``…). A
channel that knows the person writes a row here in the same transaction as the decision itself (through
``ApprovalService.decide(..., also=...)``), so the two are committed together or not at all. Requests with
no row were decided by their source alone: ``decided_by`` is then the source.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import Connection, bindparam, select

from agent_runtime.approvals.tables import deciders  # on the approvals' own metadata: created with them at start-up
from agent_runtime.infra.database import Database
from agent_runtime.infra.prepared import Prepared

_INSERT = Prepared(deciders.insert())  # built once: a statement made per call with .values() is rebuilt and re-keyed each time
# Built once, the list expanded at execution (one built per call also left a reference cycle for the collector).
_FOR_REQUESTS = select(deciders.c.request_id, deciders.c.decided_by).where(
    deciders.c.request_id.in_(bindparam("ids", expanding=True)))


def record(conn: Connection, request_id: str, decided_by: str, decided_at: float) -> None:
    """Write who decided ``request_id``; call inside the deciding transaction."""
    _INSERT(conn, {"request_id": request_id, "decided_by": decided_by, "decided_at": decided_at})


async def lookup(db: Database, request_ids: Iterable[str]) -> dict[str, str]:
    """``{request_id: decided_by}`` for the ids that have a row."""
    ids = list(request_ids)
    if not ids:
        return {}
    return await db.run(lambda conn: {row[0]: row[1] for row in conn.execute(_FOR_REQUESTS, {"ids": ids})}, write=False)


__all__ = ["deciders", "lookup", "record"]
