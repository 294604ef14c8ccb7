"""Idempotency keys of ``POST /approvals/{id}/decision``, stored in the runtime's database.

A key is bound to the request it was first used with (its fingerprint: request id + decision + reason)
and remembers the answer given (status code and JSON). The same key again gets the very same answer; the
same key with another body is refused (422). For the answer that applied a decision, the key is written
in the decision's own transaction (``decide(..., also=...)``), so there is never a decision without its
key, nor a key for a decision that lost.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from sqlalchemy import Column, Connection, Float, Integer, MetaData, String, Table, Text, select
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError

from agent_runtime.database import Database

metadata = MetaData()

keys = Table(
    "gatehouse_idempotency_keys",
    metadata,
    Column("key", String(256), primary_key=True),
    Column("request_id", String(64), nullable=False),
    Column("fingerprint", String(64), nullable=False),
    Column("status_code", Integer, nullable=False),
    Column("response_json", Text, nullable=False),
    Column("created_at", Float, nullable=False),
)

MAX_KEY_LENGTH = 256


@dataclass(frozen=True)
class StoredAnswer:
    fingerprint: str
    status_code: int
    response_json: str


class IdempotencyKeys:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def create_tables(self) -> None:
        try:
            await self._db.run(metadata.create_all)
        except (IntegrityError, OperationalError, ProgrammingError):
            await self._db.run(metadata.create_all)  # another replica created it at the same moment

    async def get(self, key: str) -> StoredAnswer | None:
        stmt = select(keys.c.fingerprint, keys.c.status_code, keys.c.response_json).where(keys.c.key == key)
        row = await self._db.run(lambda conn: conn.execute(stmt).first(), write=False)
        return StoredAnswer(row[0], row[1], row[2]) if row else None

    @staticmethod
    def write(conn: Connection, key: str, request_id: str, fingerprint: str, status_code: int, response_json: str) -> None:
        """Insert inside a caller's transaction; an existing key raises IntegrityError (and rolls it back)."""
        conn.execute(keys.insert().values(
            key=key, request_id=request_id, fingerprint=fingerprint, status_code=status_code,
            response_json=response_json, created_at=time.time(),
        ))

    async def put(self, key: str, request_id: str, fingerprint: str, status_code: int, response_json: str) -> StoredAnswer:
        """Store an answer unless the key exists already; returns whichever answer is stored for the key."""
        try:
            await self._db.run(lambda conn: self.write(conn, key, request_id, fingerprint, status_code, response_json))
        except IntegrityError:
            stored = await self.get(key)
            assert stored is not None
            return stored
        return StoredAnswer(fingerprint, status_code, response_json)


__all__ = ["MAX_KEY_LENGTH", "IdempotencyKeys", "StoredAnswer", "keys", "metadata"]
