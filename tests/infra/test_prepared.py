"""agent_runtime.infra.prepared: a Prepared write leaves the database exactly as SQLAlchemy's own execution would, and a
Prepared select reads the rows back exactly as SQLAlchemy would (same values, same Python types)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import JSON, Boolean, Column, Float, Integer, MetaData, String, Table, bindparam, event, select, update
from sqlalchemy.exc import DBAPIError, IntegrityError

from agent_runtime.infra.database import Database
from agent_runtime.infra.prepared import Prepared

metadata = MetaData()
things = Table(
    "things", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(32), nullable=False),
    Column("weight", Float),
    Column("ok", Boolean),
    Column("doc", JSON),
    Column("note", String(32), nullable=False, default="none"),
)
INSERT = things.insert()
RENAME = update(things).where(things.c.name == bindparam("w_name")).values(name=bindparam("new_name"))

rows = st.fixed_dictionaries({
    "name": st.text(max_size=8),
    "weight": st.none() | st.integers(-10, 10) | st.floats(allow_nan=False, allow_infinity=False),
    "ok": st.none() | st.booleans(),
    "doc": st.none() | st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    "note": st.text(max_size=4),
})


async def _db(tmp_path: Path, name: str) -> Database:
    db = Database(f"sqlite+aiosqlite:///{tmp_path / name}")
    await db.create_tables(metadata)
    return db


def _stored(db: Database) -> Any:
    return db.run(lambda conn: [tuple(r) for r in conn.execute(select(things).order_by(things.c.id))], write=False)


@settings(max_examples=40, deadline=None)
@given(batch=st.lists(rows, min_size=1, max_size=4))
async def test_rows_written_prepared_read_back_as_sqlalchemy_writes_them(
    tmp_path_factory: Any, batch: list[dict[str, Any]],
) -> None:
    tmp = tmp_path_factory.mktemp("p")
    ours, theirs = await _db(tmp, "ours.db"), await _db(tmp, "theirs.db")
    prepared = Prepared(INSERT)
    try:
        assert await ours.run(lambda conn: prepared(conn, batch)) == len(batch)
        await ours.run(lambda conn: prepared(conn, batch[0]))
        await theirs.run(lambda conn: conn.execute(INSERT, batch))
        await theirs.run(lambda conn: conn.execute(INSERT, batch[0]))
        assert await _stored(ours) == await _stored(theirs)
        read = Prepared(select(things).where(things.c.id > bindparam("after")).order_by(things.c.id))
        prepared_rows = await ours.run(lambda conn: read.mappings(conn, {"after": 0}), write=False)
        their_rows = await ours.run(lambda conn: [dict(r._mapping) for r in conn.execute(read.stmt, {"after": 0})], write=False)
        assert prepared_rows == their_rows and [type(v) for r in prepared_rows for v in r.values()] == [
            type(v) for r in their_rows for v in r.values()]
    finally:
        await ours.dispose()
        await theirs.dispose()


async def test_an_update_returns_the_rows_it_changed(tmp_path: Path) -> None:
    db = await _db(tmp_path, "u.db")
    insert, rename = Prepared(INSERT), Prepared(RENAME)
    await db.run(lambda conn: insert(conn, [{"name": "a", "note": ""}, {"name": "a", "note": ""}, {"name": "b", "note": ""}]))
    assert await db.run(lambda conn: rename(conn, {"w_name": "a", "new_name": "c"})) == 2
    assert await db.run(lambda conn: rename(conn, {"w_name": "zzz", "new_name": "d"})) == 0
    assert sorted(r[1] for r in await _stored(db)) == ["b", "c", "c"]
    await db.dispose()


async def test_first_is_the_first_row_or_none(tmp_path: Path) -> None:
    db = await _db(tmp_path, "f.db")
    insert = Prepared(INSERT)
    by_name = Prepared(select(things.c.name, things.c.ok).where(things.c.name == bindparam("name")).order_by(things.c.id))
    await db.run(lambda conn: insert(conn, [{"name": "a", "ok": True, "note": ""}, {"name": "a", "ok": False, "note": ""}]))
    assert await db.run(lambda conn: by_name.first(conn, {"name": "a"}), write=False) == {"name": "a", "ok": True}
    assert await db.run(lambda conn: by_name.first(conn, {"name": "b"}), write=False) is None
    await db.dispose()


async def test_literals_written_in_a_statement_are_bound_on_the_driver_path(tmp_path: Path) -> None:
    """``exec_state="done"`` style literals (the claim, the finish, a decision's ``status == "pending"``) run on the
    driver too: SQLAlchemy's own execution (its cursor events) is not used for them."""
    db = await _db(tmp_path, "l.db")
    insert = Prepared(INSERT)
    finish = Prepared(update(things).where(things.c.name == bindparam("w_name"), things.c.note == "started").values(note="done"))
    await db.run(lambda conn: insert(conn, [{"name": "a", "note": "started"}, {"name": "b", "note": "none"}]))
    executed: list[str] = []
    assert db._sync is not None
    event.listen(db._sync, "before_cursor_execute", lambda *args: executed.append(args[2]))
    assert await db.run(lambda conn: finish(conn, {"w_name": "a"})) == 1
    assert await db.run(lambda conn: finish(conn, {"w_name": "a"})) == 0  # no longer "started"
    assert await db.run(lambda conn: finish(conn, {"w_name": "b"})) == 0
    assert executed == []
    assert [(r[1], r[-1]) for r in await _stored(db)] == [("a", "done"), ("b", "none")]
    await db.dispose()


async def test_a_column_default_the_caller_left_out_is_filled_in_as_sqlalchemy_does(tmp_path: Path) -> None:
    db = await _db(tmp_path, "d.db")
    insert = Prepared(INSERT)
    await db.run(lambda conn: insert(conn, {"name": "x"}))  # no "note": SQLAlchemy's default applies
    assert [r[-1] for r in await _stored(db)] == ["none"]
    await db.dispose()


async def test_a_failing_write_rolls_back_with_its_transaction(tmp_path: Path) -> None:
    db = await _db(tmp_path, "r.db")
    insert = Prepared(INSERT)

    def half(conn: Any) -> None:
        insert(conn, {"name": "kept?", "note": ""})
        raise RuntimeError("after the write")

    with pytest.raises(RuntimeError):
        await db.run(half)
    assert await _stored(db) == []
    await db.dispose()


async def test_a_driver_error_is_raised_as_sqlalchemy_raises_it(tmp_path: Path) -> None:
    """A duplicate key on the driver path is SQLAlchemy's IntegrityError (callers such as the REST idempotency keys
    catch that one), and the transaction it happened in is rolled back."""
    db = await _db(tmp_path, "e.db")
    insert = Prepared(INSERT)
    bad = Prepared(select(things.c.name).where(things.c.name == bindparam("name")).limit(bindparam("n")))
    await db.run(lambda conn: insert(conn, {"id": 1, "name": "a", "note": ""}))

    def twice(conn: Any) -> None:
        insert(conn, {"id": 2, "name": "b", "note": ""})
        insert(conn, {"id": 1, "name": "c", "note": ""})

    with pytest.raises(IntegrityError) as raised:
        await db.run(twice)
    assert isinstance(raised.value.orig, sqlite3.IntegrityError)
    with pytest.raises(IntegrityError):
        await db.run(lambda conn: insert(conn, [{"id": 3, "name": "d", "note": ""}, {"id": 1, "name": "e", "note": ""}]))
    with pytest.raises(DBAPIError):  # a select the driver refuses (a text limit)
        await db.run(lambda conn: bad.mappings(conn, {"name": "a", "n": "x"}), write=False)
    assert [r[1] for r in await _stored(db)] == ["a"]
    await db.dispose()
