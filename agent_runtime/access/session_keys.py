"""The key that signs the inbox's session cookies, kept in the runtime's database.

Replicas behind one Service share the database, so they share the key: a browser signed in through one replica is
signed in on all of them, and a rollout or restart keeps people signed in. The first runtime to start makes the key
(32 random bytes); every later one reads it. ``--ui-session-key-file`` overrides it (a key the operator of the
cluster manages). Whoever can read the database can forge a session, as they could write a vote: the database is
already the runtime's most trusted part.
"""

from __future__ import annotations

import secrets
import time

from sqlalchemy import Column, Connection, Float, MetaData, String, Table, select
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError

from agent_runtime.infra.database import Database

metadata = MetaData()
session_keys = Table(
    "gatehouse_ui_session_keys",
    metadata,
    Column("name", String(32), primary_key=True),
    Column("key", String(128), nullable=False),  # hex
    Column("created_at", Float, nullable=False),
)
_NAME = "session"


async def shared_key(db: Database) -> bytes:
    """The stored key, made on first use (by whichever replica gets there first)."""
    try:
        await db.run(metadata.create_all)
    except (IntegrityError, OperationalError, ProgrammingError):
        await db.run(metadata.create_all)  # another replica created the table at the same moment

    def read_or_make(conn: Connection) -> str:
        found = conn.execute(select(session_keys.c.key).where(session_keys.c.name == _NAME)).scalar()
        if found:
            return str(found)
        made = secrets.token_hex(32)
        conn.execute(session_keys.insert().values(name=_NAME, key=made, created_at=time.time()))
        return made

    try:
        key = await db.run(read_or_make)
    except IntegrityError:  # another replica made it first: use theirs
        key = await db.run(read_or_make)
    return bytes.fromhex(key)


__all__ = ["session_keys", "shared_key"]
