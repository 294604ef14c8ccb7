"""The runtime's one database, and how its own stores run transactions on it.

:class:`Database` runs a whole transaction — a plain function of a SQLAlchemy ``Connection`` — in one go:

- sqlite (default, a file under the state directory): on ONE dedicated thread with a synchronous engine,
  so a transaction costs one thread hop instead of one per statement, and writers queue in-process (FIFO)
  instead of sleeping in sqlite's busy handler. WAL journal, ``synchronous=NORMAL``, a busy timeout (for
  other processes) and ``BEGIN IMMEDIATE`` for writes, plain ``BEGIN`` for reads.
- Postgres (``postgresql+asyncpg://…``): the async engine's pool; the function runs through ``run_sync``.

``async_engine`` is also kept for code that wants one (a2a-sdk's task store uses it for listing and on
Postgres). Tables are created once at start-up, never per request.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Connection, event
from sqlalchemy import create_engine as create_sync_engine
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

SQLITE_BUSY_TIMEOUT_MS = 30_000
T = TypeVar("T")


def default_database_url(state_dir: Path) -> str:
    return f"sqlite+aiosqlite:///{(state_dir / 'gatehouse.db').resolve()}"


def is_sqlite(url: str) -> bool:
    return make_url(url).get_backend_name() == "sqlite"


def create_engine(url: str) -> AsyncEngine:
    """An async engine; sqlite files get their directory created and the pragmas above."""
    if not is_sqlite(url):
        return create_async_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=20)
    _make_dir(url)
    engine = create_async_engine(url, pool_size=1, max_overflow=0, pool_timeout=120)
    _sqlite_events(engine.sync_engine)
    return engine


class Database:
    def __init__(self, url: str) -> None:
        self.url = url
        self.sqlite = is_sqlite(url)
        self.async_engine = create_engine(url)
        self._sync: Engine | None = None
        self._thread: ThreadPoolExecutor | None = None
        if self.sqlite:
            sync_url = make_url(url).set(drivername="sqlite")
            self._sync = create_sync_engine(sync_url, pool_size=1, max_overflow=0, connect_args={"check_same_thread": False})
            _sqlite_events(self._sync)
            self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gatehouse-db")

    async def run(self, fn: Callable[[Connection], T], *, write: bool = True) -> T:
        """Run ``fn(conn)`` in one transaction (committed when it returns, rolled back when it raises)."""
        if self._sync is None:
            engine = self.async_engine if write else self.async_engine.execution_options(read_only=True)
            async with engine.begin() as conn:
                return await conn.run_sync(fn)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, self._run_sync, fn, write)

    def _run_sync(self, fn: Callable[[Connection], T], write: bool) -> T:
        assert self._sync is not None
        engine = self._sync if write else self._sync.execution_options(read_only=True)
        with engine.begin() as conn:
            return fn(conn)

    async def dispose(self) -> None:
        await self.async_engine.dispose()
        if self._sync is not None:
            engine, self._sync = self._sync, None
            assert self._thread is not None
            with contextlib.suppress(RuntimeError):
                await asyncio.get_running_loop().run_in_executor(self._thread, engine.dispose)
            self._thread.shutdown(wait=False)


def _make_dir(url: str) -> None:
    database = make_url(url).database
    if database and database != ":memory:":
        Path(database).parent.mkdir(parents=True, exist_ok=True)


def _sqlite_events(engine: Engine) -> None:
    event.listen(engine, "connect", _sqlite_on_connect)
    event.listen(engine, "begin", _sqlite_on_begin)


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    # Let SQLAlchemy's "begin" event emit BEGIN itself (the driver's implicit BEGIN is always deferred).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def _sqlite_on_begin(conn: Any) -> None:
    conn.exec_driver_sql("BEGIN" if conn.get_execution_options().get("read_only") else "BEGIN IMMEDIATE")


__all__ = ["Database", "create_engine", "default_database_url", "is_sqlite"]
