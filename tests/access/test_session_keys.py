"""The inbox's session key lives in the database: every runtime on it signs with the same key, made once."""

from __future__ import annotations

import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

from agent_runtime.access.session_keys import shared_key
from agent_runtime.access.sessions import Sessions
from agent_runtime.contract.principals import Principal
from agent_runtime.infra.database import Database, default_database_url

STATE_V2 = Path(__file__).parents[1] / "testdata" / "state-v2" / "gatehouse.db"


async def key_of(state: Path) -> bytes:
    db = Database(default_database_url(state))
    try:
        return await shared_key(db)
    finally:
        await db.dispose()


async def test_one_key_per_database_made_once_and_kept(tmp_path: Path) -> None:
    first, again, other = await key_of(tmp_path / "a"), await key_of(tmp_path / "a"), await key_of(tmp_path / "b")
    assert len(first) == 32 and first == again and first != other
    # So a cookie signed by one runtime (or replica) on this database is read by the next.
    before, after = Sessions(), Sessions()
    before.use_key(first)
    after.use_key(again)
    value, _ = before.issue(Principal("alice"))
    assert await after.read(value) is not None


async def test_a_state_written_before_the_inbox_gains_the_key_and_keeps_the_rest(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    shutil.copy(STATE_V2, state / "gatehouse.db")
    with closing(sqlite3.connect(state / "gatehouse.db")) as conn:
        approvals_before = conn.execute("SELECT id, status FROM gatehouse_approvals ORDER BY id").fetchall()
    assert len(await key_of(state)) == 32
    with closing(sqlite3.connect(state / "gatehouse.db")) as conn:
        assert conn.execute("SELECT count(*) FROM gatehouse_ui_session_keys").fetchone() == (1,)
        assert conn.execute("SELECT id, status FROM gatehouse_approvals ORDER BY id").fetchall() == approvals_before
