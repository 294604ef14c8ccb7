"""One SQLAlchemy async engine for everything the runtime persists (ADK sessions, A2A tasks, approvals).

- sqlite (default, a file under the state directory): ``sqlite+aiosqlite``, WAL journal, ``synchronous=NORMAL``,
  one pooled connection (requests queue for it in-process), a busy timeout for other processes, and
  ``BEGIN IMMEDIATE`` for write transactions so two writers queue on the busy timeout
  instead of failing with "database is locked" when a read transaction tries to upgrade. Read-only
  transactions (ADK marks them with the ``read_only`` execution option) stay deferred and never block writers.
- Postgres (``postgresql+asyncpg://…``): a pooled engine with pre-ping, for several replicas of one agent.

Tables are created once at start-up by :func:`agent_runtime.server.app.open_stores`, never per request.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

SQLITE_BUSY_TIMEOUT_MS = 30_000


def default_database_url(state_dir: Path) -> str:
    return f"sqlite+aiosqlite:///{(state_dir / 'gatehouse.db').resolve()}"


def is_sqlite(url: str) -> bool:
    return make_url(url).get_backend_name() == "sqlite"


def create_engine(url: str) -> AsyncEngine:
    """The shared engine; sqlite files get their directory created and the pragmas above."""
    if not is_sqlite(url):
        return create_async_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=20)
    database = make_url(url).database
    if database and database != ":memory:":
        Path(database).parent.mkdir(parents=True, exist_ok=True)
    # One connection: sqlite has one writer anyway, and queueing on the pool (FIFO, no polling) beats
    # sqlite's sleep-and-retry busy handler by far under concurrency. Other processes still get the
    # busy timeout. Nothing in the runtime holds a connection while it waits for another.
    engine = create_async_engine(url, pool_size=1, max_overflow=0, pool_timeout=120)
    event.listen(engine.sync_engine, "connect", _sqlite_on_connect)
    event.listen(engine.sync_engine, "begin", _sqlite_on_begin)
    return engine


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
    if conn.get_execution_options().get("read_only"):
        conn.exec_driver_sql("BEGIN")
    else:
        conn.exec_driver_sql("BEGIN IMMEDIATE")


__all__ = ["create_engine", "default_database_url", "is_sqlite"]
