"""The database's own checks (:mod:`agent_runtime.infra.database`): where a sqlite file can live (before start-up), and
what is wrong with an open one (``/readyz``)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from agent_runtime.infra.database import Database, LocationError, check_location, default_database_url
from tests.support.processes import free_port


def test_a_usable_state_directory_is_created_with_its_database(tmp_path: Path) -> None:
    state = tmp_path / "a" / "state"
    check_location(default_database_url(state))
    assert (state / "gatehouse.db").is_file() and [p.name for p in state.iterdir()] == ["gatehouse.db"]


def test_an_unusable_location_is_one_line_naming_the_path_and_the_cause(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(LocationError, match=f"^the state directory {tmp_path / 'file'} is not a directory"):
        check_location(default_database_url(tmp_path / "file"))
    with pytest.raises(LocationError, match=f"^the database directory {tmp_path / 'file' / 'x'} cannot be created: Not a"):
        check_location(default_database_url(tmp_path / "file" / "x"), "the database directory")
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "gatehouse.db").write_text("not a database, but long enough to have a header " * 4)
    with pytest.raises(LocationError, match=r"gatehouse\.db cannot be opened: file is not a database$"):
        check_location(default_database_url(tmp_path / "s"))


def test_postgres_and_memory_have_no_location() -> None:
    check_location("postgresql+asyncpg://u:p@127.0.0.1:1/db")
    check_location("sqlite+aiosqlite:///:memory:")


async def _open(path: Path) -> Database:
    db = Database(f"sqlite+aiosqlite:///{path}")
    await db.run(lambda conn: conn.exec_driver_sql("CREATE TABLE IF NOT EXISTS t (x INTEGER)"))
    db.pin()
    return db


async def test_an_open_database_that_is_removed_or_replaced_is_said_so(tmp_path: Path) -> None:
    path = tmp_path / "g.db"
    db = await _open(path)
    try:
        assert sorted(p.name for p in tmp_path.iterdir()) == ["g.db", "g.db-shm", "g.db-wal"]
        assert await db.check() is None
        os.rename(path, tmp_path / "moved.db")
        sqlite3.connect(path).close()  # another file where it was
        removed = f"the database file {path} was removed or replaced: pending approvals would be lost; restart the runtime"
        assert await db.check() == removed
    finally:
        await db.dispose()


async def test_a_removed_wal_file_is_said_so_a_wal_sqlite_made_again_is_not(tmp_path: Path) -> None:
    path = tmp_path / "g.db"
    db = await _open(path)
    try:
        wal = Path(f"{path}-wal")
        wal.unlink()  # the runtime still writes into it
        assert f"the database file {wal} was removed or replaced" in (await db.check() or "")
    finally:
        await db.dispose()
    db = await _open(path)  # a new WAL, the old one closed by sqlite
    try:
        assert await db.check() is None
        pinned = dict(db._pinned)
        await db.dispose()  # the last connection closes: sqlite removes its WAL…
        assert not Path(f"{path}-wal").exists()
        (tmp_path / "taker").write_text("")  # (takes the freed inode, should the file system hand it out again)
        await db.run(lambda conn: conn.exec_driver_sql("INSERT INTO t VALUES (1)"))  # …and makes another
        assert await db.check() is None
        assert db._pinned[Path(f"{path}-wal")] != pinned[Path(f"{path}-wal")]  # the new one is watched
    finally:
        await db.dispose()


async def test_postgres_is_checked_with_select_1(postgres_database_url: str) -> None:
    db = Database(postgres_database_url)
    try:
        assert await db.check() is None
    finally:
        await db.dispose()


async def test_a_postgres_that_does_not_answer_is_named_without_its_password() -> None:
    db = Database(f"postgresql+asyncpg://gatehouse:s3cret@127.0.0.1:{free_port()}/agents")  # nothing listens there
    try:
        problem = await db.check(timeout=5.0) or ""
    finally:
        await db.dispose()
    assert problem.startswith("the database postgresql+asyncpg://gatehouse:***@127.0.0.1:"), problem
    assert "/agents did not answer SELECT 1: " in problem and "s3cret" not in problem
