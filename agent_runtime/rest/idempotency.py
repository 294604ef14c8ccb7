"""Idempotency keys of ``POST /approvals/{id}/decision``, stored in the runtime's database.

A key belongs to the principal who sent it: the same key from another principal is another key, handled afresh
(it never returns the first one's answer). It is bound to the request it was first used with (its fingerprint:
request id + decision + reason) and remembers the answer given (status code and JSON). The same principal sending
the same key again gets the very same answer; the same key with another body is refused (422). For the answer that
applied a decision, the key is written in the decision's own transaction (``vote(..., also=...)``), so there is
never a decision without its key, nor a key for a decision that lost.

A key lives ``ttl`` seconds (``--idempotency-ttl``, default 24h) from its first use: after that it is unknown
again (a retry then is a new decision, which the approvals table answers "Already decided" if it was decided), and
:class:`KeyPurge` deletes it.

The ``key`` column holds a digest of the principal and the client's key (at most 64 characters, whatever the
principal's length). Rows written before state version 3 (``approvals/schema.py`` adds the ``principal`` column
with ``''``) hold the client's key itself and no principal: they answer nobody and expire like the others.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Column, Connection, Float, Integer, MetaData, String, Table, Text, bindparam, delete, select
from sqlalchemy.exc import IntegrityError

from agent_runtime.infra.database import Database
from agent_runtime.infra.periodic import PeriodicSweep
from agent_runtime.infra.prepared import Prepared

metadata = MetaData()

keys = Table(
    "gatehouse_idempotency_keys",
    metadata,
    Column("key", String(256), primary_key=True),  # since state version 3: scoped(principal, the client's key)
    Column("principal", String(256), nullable=False, default=""),  # since state version 3
    Column("request_id", String(64), nullable=False),
    Column("fingerprint", String(64), nullable=False),
    Column("status_code", Integer, nullable=False),
    Column("response_json", Text, nullable=False),
    Column("created_at", Float, nullable=False),
)

MAX_KEY_LENGTH = 256
DEFAULT_TTL_SECONDS = 24 * 3600.0

# Built once (agent_runtime/infra/prepared.py): every REST decision reads its key, and writes it in the decision's transaction.
_GET = Prepared(select(keys.c.fingerprint, keys.c.status_code, keys.c.response_json).where(
    keys.c.key == bindparam("scoped"), keys.c.principal == bindparam("principal"), keys.c.created_at > bindparam("since"),
))
_EXPIRED_ONE = Prepared(delete(keys).where(keys.c.key == bindparam("scoped"), keys.c.created_at <= bindparam("since")))
_INSERT = Prepared(keys.insert())
_EXPIRED = delete(keys).where(keys.c.created_at <= bindparam("since"))


def scoped(principal: str, key: str) -> str:
    """The stored key: one principal's ``key`` (a digest of both, unambiguous whatever either contains)."""
    return hashlib.sha256(json.dumps([principal, key]).encode()).hexdigest()


@dataclass(frozen=True)
class StoredAnswer:
    fingerprint: str
    status_code: int
    response_json: str


class IdempotencyKeys:
    """The keys of one runtime; ``ttl``: seconds a key is remembered after its first use."""

    def __init__(self, db: Database, ttl: float = DEFAULT_TTL_SECONDS, clock: Callable[[], float] = time.time) -> None:
        self._db = db
        self.ttl = ttl
        self._clock = clock

    async def create_tables(self) -> None:
        """Create the table where it is missing (an existing one is upgraded by approvals/schema.py at start-up)."""
        await self._db.create_tables(metadata)

    async def get(self, principal: str, key: str) -> StoredAnswer | None:
        """``principal``'s answer for ``key``, unless the key is unknown or expired."""
        params = {"scoped": scoped(principal, key), "principal": principal, "since": self._clock() - self.ttl}
        row = await self._db.run(lambda conn: _GET.first(conn, params), write=False)
        return StoredAnswer(row["fingerprint"], row["status_code"], row["response_json"]) if row else None

    def write(
        self, conn: Connection, principal: str, key: str, request_id: str, fingerprint: str, status_code: int,
        response_json: str,
    ) -> None:
        """Insert inside a caller's transaction (an expired row of the same key makes way); a live key raises
        IntegrityError (and rolls the transaction back)."""
        now, stored = self._clock(), scoped(principal, key)
        _EXPIRED_ONE(conn, {"scoped": stored, "since": now - self.ttl})
        _INSERT(conn, {
            "key": stored, "principal": principal, "request_id": request_id, "fingerprint": fingerprint,
            "status_code": status_code, "response_json": response_json, "created_at": now,
        })

    async def put(
        self, principal: str, key: str, request_id: str, fingerprint: str, status_code: int, response_json: str,
    ) -> StoredAnswer:
        """Store an answer unless the key exists already; returns whichever answer is stored for the key."""
        try:
            await self._db.run(lambda conn: self.write(conn, principal, key, request_id, fingerprint, status_code, response_json))
        except IntegrityError:
            stored = await self.get(principal, key)
            assert stored is not None
            return stored
        return StoredAnswer(fingerprint, status_code, response_json)

    async def purge(self) -> int:
        """Delete the expired keys (every principal's, and those written before keys had one); how many."""
        since = self._clock() - self.ttl
        return int(await self._db.run(lambda conn: conn.execute(_EXPIRED, {"since": since}).rowcount))


class KeyPurge(PeriodicSweep):
    """Deletes expired keys every ``ttl / 2`` (at least every second, at most every hour), from start-up on."""

    name = "gatehouse-idempotency-purge"

    def __init__(self, keys: IdempotencyKeys) -> None:
        super().__init__(min(max(keys.ttl / 2, 1.0), 3600.0))
        self._keys = keys

    async def sweep(self) -> int:
        return await self._keys.purge()


__all__ = ["DEFAULT_TTL_SECONDS", "MAX_KEY_LENGTH", "IdempotencyKeys", "KeyPurge", "StoredAnswer", "keys", "metadata", "scoped"]
