"""Signing out is kept in the database: every runtime on it (a replica, the same one after a restart) refuses the
signed-out cookie until it would have expired, and rows of expired sessions are swept."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from agent_runtime.access.revocations import StoredRevocations
from agent_runtime.access.sessions import Sessions
from agent_runtime.contract.principals import Principal
from agent_runtime.infra.database import Database, default_database_url

KEY = b"k" * 32
ALICE = Principal("alice", frozenset({"sre"}), "token", "alice")


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


async def runtime_sessions(url: str, clock: Clock | None = None, ttl: float = 3600.0) -> tuple[Sessions, Database]:
    """What one runtime process has: its database, the table opened, sessions signed with the shared key."""
    db = Database(url)
    revocations = StoredRevocations(db)
    await revocations.open(clock() if clock else None)
    return Sessions(KEY, ttl, clock or Clock(), revocations=revocations), db


def rows(state: Path) -> list[tuple[str, float]]:
    with closing(sqlite3.connect(state / "gatehouse.db")) as conn:
        return conn.execute("SELECT jti, expires_at FROM gatehouse_ui_revoked_sessions ORDER BY expires_at").fetchall()


async def test_a_sign_out_holds_on_another_runtime_and_after_a_restart(tmp_path: Path) -> None:
    url = default_database_url(tmp_path)
    clock = Clock()
    one, db_one = await runtime_sessions(url, clock)
    two, db_two = await runtime_sessions(url, clock)
    value, _ = one.issue(ALICE)
    kept, _ = one.issue(ALICE)  # another tab's session: not signed out
    session = await two.read(value)
    assert session is not None and await two.valid(session)
    await one.revoke(session)
    assert await two.read(value) is None and not await two.valid(session)
    assert await two.read(kept) is not None
    await db_one.dispose()
    await db_two.dispose()
    again, db = await runtime_sessions(url, clock)  # restarted
    try:
        assert await again.read(value) is None and await again.read(kept) is not None
        await again.revoke(session)  # signed out twice (two tabs): still refused, no error
        assert await again.read(value) is None
    finally:
        await db.dispose()


async def test_expired_rows_are_swept_on_sign_out_and_on_opening(tmp_path: Path) -> None:
    url = default_database_url(tmp_path)
    clock = Clock()
    sessions, db = await runtime_sessions(url, clock, ttl=60)
    first, _ = sessions.issue(ALICE)
    read = await sessions.read(first)
    assert read is not None
    await sessions.revoke(read)
    assert [jti for jti, _ in rows(tmp_path)] == [read.id]
    clock.now += 30
    second, _ = sessions.issue(ALICE)
    read_second = await sessions.read(second)
    assert read_second is not None
    clock.now += 31  # the first session has expired (its cookie is refused by its expiry now), the second has not
    assert await sessions.read(first) is None
    await sessions.revoke(read_second)
    assert [jti for jti, _ in rows(tmp_path)] == [read_second.id]
    await db.dispose()
    clock.now += 60
    _, db = await runtime_sessions(url, clock)  # a runtime starting later sweeps what expired meanwhile
    await db.dispose()
    assert rows(tmp_path) == []


@pytest.mark.e2e
async def test_replicas_on_postgres_share_sign_outs(postgres_database_url: str) -> None:
    one, db_one = await runtime_sessions(postgres_database_url)
    two, db_two = await runtime_sessions(postgres_database_url)
    try:
        value, _ = one.issue(ALICE)
        session = await two.read(value)
        assert session is not None
        await two.revoke(session)
        assert await one.read(value) is None
    finally:
        await db_one.dispose()
        await db_two.dispose()
