"""Signed-out inbox sessions: refused until they would have expired, by every replica and after a restart.

A session cookie is self-contained (a signed JWT, :mod:`agent_runtime.access.sessions`), so signing out cannot take it
back from a browser, or from whoever kept a copy: the runtime remembers its id (``jti``) instead, until its expiry,
after which the signature check refuses it anyway.

- :class:`StoredRevocations`, the runtime's: a row per signed-out session in ``gatehouse_ui_revoked_sessions``, in the
  database that also keeps the signing key (:mod:`agent_runtime.access.session_keys`). Replicas share it, and a
  restart keeps it. Rows whose session has expired are swept when the runtime opens the table and on every sign-out,
  so the table holds at most the sessions signed out within one ``--ui-session-ttl``. The table is created whole on
  start-up (an older state gains it empty: nobody had signed out in a way that outlived the process).
- :class:`MemoryRevocations`, ``kubectl gatehouse inbox``'s: one process, whose key is made per launch anyway.
"""

from __future__ import annotations

import time
from typing import Protocol

from sqlalchemy import Column, Connection, Float, MetaData, String, Table, delete, select
from sqlalchemy.exc import IntegrityError

from agent_runtime.infra.database import Database

metadata = MetaData()
revoked_sessions = Table(
    "gatehouse_ui_revoked_sessions",
    metadata,
    Column("jti", String(64), primary_key=True),
    Column("expires_at", Float, nullable=False, index=True),  # the session's own expiry: after it, the row goes
    Column("revoked_at", Float, nullable=False),
)


class Revocations(Protocol):
    async def revoke(self, jti: str, expires_at: float, now: float) -> None:
        """Refuse session ``jti`` from now on (until ``expires_at``); forget what expired by ``now``."""
        ...

    async def revoked(self, jti: str) -> bool:
        ...


class MemoryRevocations:
    def __init__(self) -> None:
        self._revoked: dict[str, float] = {}

    async def revoke(self, jti: str, expires_at: float, now: float) -> None:
        self._revoked = {j: exp for j, exp in self._revoked.items() if exp > now}
        self._revoked[jti] = expires_at

    async def revoked(self, jti: str) -> bool:
        return jti in self._revoked


class StoredRevocations:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def open(self, now: float | None = None) -> None:
        """Create the table where missing (an older state gains it), and sweep what expired meanwhile."""
        await self.db.create_tables(metadata)
        await self.db.run(lambda conn: _sweep(conn, time.time() if now is None else now))

    async def revoke(self, jti: str, expires_at: float, now: float) -> None:
        def write(conn: Connection) -> None:
            _sweep(conn, now)
            conn.execute(revoked_sessions.insert().values(jti=jti, expires_at=expires_at, revoked_at=now))

        try:
            await self.db.run(write)
        except IntegrityError:  # signed out already (another tab, another replica): it stays refused
            pass

    async def revoked(self, jti: str) -> bool:
        def read(conn: Connection) -> bool:
            return conn.execute(select(revoked_sessions.c.jti).where(revoked_sessions.c.jti == jti)).first() is not None

        return await self.db.run(read, write=False)


def _sweep(conn: Connection, now: float) -> None:
    conn.execute(delete(revoked_sessions).where(revoked_sessions.c.expires_at <= now))


__all__ = ["MemoryRevocations", "Revocations", "StoredRevocations", "revoked_sessions"]
