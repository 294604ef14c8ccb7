"""The runtime's one database, and how its own stores run transactions on it.

:class:`Database` runs a whole transaction — a plain function of a SQLAlchemy ``Connection`` — in one go:

- sqlite (default, a file under the state directory): inline on the event loop with a synchronous engine
  and one connection. A transaction is a few hundred microseconds of local I/O (WAL journal,
  ``synchronous=NORMAL``: no fsync per commit), far cheaper than handing each statement to a thread and
  back (measured: 3-5x, and thread hand-offs queue behind the GIL under load). Transactions never
  interleave, so writers never wait on each other; ``BEGIN IMMEDIATE`` for writes, plain ``BEGIN`` for
  reads, and a busy timeout only matters when another process holds the file.
- Postgres (``postgresql+asyncpg://…``): the async engine's pool; the function runs through ``run_sync``.

``async_engine`` is also kept for code that wants one (a2a-sdk's task store uses it for listing and on
Postgres). Tables are created once at start-up, never per request.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Connection, event
from sqlalchemy import create_engine as create_sync_engine
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

SQLITE_BUSY_TIMEOUT_MS = 5_000
T = TypeVar("T")


def default_database_url(state_dir: Path) -> str:
    return f"sqlite+aiosqlite:///{(state_dir / 'gatehouse.db').resolve()}"


def is_sqlite(url: str) -> bool:
    return make_url(url).get_backend_name() == "sqlite"


def create_engine(url: str) -> AsyncEngine:
    """An async engine. On sqlite it is for start-up DDL and reads beside :meth:`Database.run` (listing
    tasks): its transactions stay deferred, so a reader never holds the write lock the inline writer needs."""
    if not is_sqlite(url):
        return create_async_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=20)
    _make_dir(url)
    engine = create_async_engine(url, pool_size=1, max_overflow=0, pool_timeout=120)
    event.listen(engine.sync_engine, "connect", _sqlite_on_connect)
    event.listen(engine.sync_engine, "begin", lambda conn: conn.exec_driver_sql("BEGIN"))
    return engine


class Database:
    def __init__(self, url: str) -> None:
        self.url = url
        self.sqlite = is_sqlite(url)
        self.async_engine = create_engine(url)
        self._sync: Engine | None = None
        self._conn: Connection | None = None  # sqlite: the one connection, kept open (no pool checkout per call)
        self._reading = False  # what the next BEGIN is for (read: deferred; write: IMMEDIATE)
        self._async_read = self.async_engine.execution_options(read_only=True)
        if self.sqlite:
            sync_url = make_url(url).set(drivername="sqlite")
            self._sync = create_sync_engine(sync_url, pool_size=1, max_overflow=0, connect_args={"check_same_thread": False})
            event.listen(self._sync, "connect", _sqlite_on_connect)
            event.listen(self._sync, "begin", self._sqlite_begin)

    async def run(self, fn: Callable[[Connection], T], *, write: bool = True) -> T:
        """Run ``fn(conn)`` in one transaction (committed when it returns, rolled back when it raises)."""
        if self._sync is None:
            async with (self.async_engine if write else self._async_read).begin() as async_conn:
                return await async_conn.run_sync(fn)
        # Inline and synchronous: transactions never interleave, so one long-lived connection serves them all.
        conn = self._conn
        if conn is None or conn.closed or conn.invalidated:
            conn = self._conn = self._sync.connect()
        self._reading = not write
        try:
            with conn.begin():
                return fn(conn)
        finally:
            if conn.invalidated:  # e.g. the file went away: reconnect next time
                self._conn = None
                conn.close()

    def _sqlite_begin(self, conn: Connection) -> None:
        # Straight to the driver: BEGIN through SQLAlchemy's execution path cost as much as the transaction's work.
        conn.connection.driver_connection.execute("BEGIN" if self._reading else "BEGIN IMMEDIATE")  # type: ignore[union-attr]

    async def dispose(self) -> None:
        await self.async_engine.dispose()
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._sync is not None:
            self._sync.dispose()


def _make_dir(url: str) -> None:
    database = make_url(url).database
    if database and database != ":memory:":
        Path(database).parent.mkdir(parents=True, exist_ok=True)


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    # Let SQLAlchemy's "begin" event emit BEGIN itself (the driver's implicit BEGIN is always deferred).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


__all__ = ["Database", "create_engine", "default_database_url", "is_sqlite"]
