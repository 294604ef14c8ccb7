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

Faults (what ``/readyz`` reports, :mod:`agent_runtime.app.readiness`): :func:`check_location` before start-up
(a sqlite file's directory can be created and written, the file read and written: else one line naming the path
and the cause); :meth:`Database.pin` once the stores are open, then :meth:`Database.check`, cheap enough to poll
every few seconds: the sqlite files are still the ones opened (device and inode: a removed file goes on taking
writes that a restart loses) and writable; Postgres answers ``SELECT 1``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Connection, MetaData, event
from sqlalchemy import create_engine as create_sync_engine
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

SQLITE_BUSY_TIMEOUT_MS = 5_000
SQLITE_COMPANIONS = ("-wal",)  # beside the file while it is open in WAL mode; holds commits not yet checkpointed
T = TypeVar("T")


class LocationError(ValueError):
    """The sqlite database cannot be created or opened where it should be; ``str(exc)`` is one line naming the path
    and the cause."""


def default_database_url(state_dir: Path) -> str:
    return f"sqlite+aiosqlite:///{(state_dir / 'gatehouse.db').resolve()}"


def is_sqlite(url: str) -> bool:
    return make_url(url).get_backend_name() == "sqlite"


def sqlite_path(url: str) -> Path | None:
    """The file of a sqlite URL; None for Postgres and in-memory sqlite."""
    database = make_url(url).database if is_sqlite(url) else None
    return Path(database) if database and database != ":memory:" else None


def check_location(url: str, directory_name: str = "the state directory") -> None:
    """Raise :class:`LocationError` when a sqlite database could not be used where ``url`` puts it: its directory
    cannot be created or written (a read-only file system, no permission, a file in its place), or the file,
    when it exists, cannot be read and written or is no sqlite database. Checked by doing it (create a file,
    open the database), which also holds for root, whom permission bits do not stop. Postgres: nothing to check."""
    path = sqlite_path(url)
    if path is None:
        return
    directory = path.parent
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise LocationError(f"{directory_name} {directory} is not a directory (a file is in its place)") from None
    except OSError as exc:
        raise LocationError(f"{directory_name} {directory} cannot be created: {_cause(exc)}") from None
    try:
        fd, probe = tempfile.mkstemp(prefix=".gatehouse-probe-", dir=directory)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise LocationError(f"{directory_name} {directory} cannot be written: {_cause(exc)}") from None
    for file in _files_of(path):
        if not file.exists() and file != path:
            continue
        try:
            with file.open("ab"):  # opened for writing, nothing written; creates the database file if missing
                pass
        except OSError as exc:
            raise LocationError(f"the database file {file} cannot be opened for writing: {_cause(exc)}") from None
    try:
        with contextlib.closing(sqlite3.connect(path, timeout=1.0)) as conn:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as exc:
        raise LocationError(f"the database file {path} cannot be opened: {exc}") from None


def _files_of(path: Path) -> list[Path]:
    return [path, *(Path(f"{path}{suffix}") for suffix in SQLITE_COMPANIONS)]


def _held_open(identity: tuple[int, int]) -> bool:
    """Whether this process still has the file (device, inode) open, removed or not (Linux: /proc/self/fd;
    elsewhere assumed so)."""
    fds = Path("/proc/self/fd")
    if not fds.is_dir():
        return True
    for fd in fds.iterdir():
        with contextlib.suppress(OSError):
            stat = fd.stat()
            if (stat.st_dev, stat.st_ino) == identity:
                return True
    return False


def _read_only_fs(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _cause(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


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
        self.path = sqlite_path(url)
        self._pinned: dict[Path, tuple[int, int]] = {}  # sqlite: the files opened, by (device, inode); see check
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

    async def create_tables(self, metadata: MetaData) -> None:
        """Create ``metadata``'s tables where missing, once more when another replica created one at the same moment."""
        try:
            await self.run(metadata.create_all)
        except (IntegrityError, OperationalError, ProgrammingError):
            await self.run(metadata.create_all)  # another replica created it at the same moment: it exists now

    def pin(self) -> None:
        """Remember which sqlite files the runtime opened (call once the stores are open), for :meth:`check`."""
        for file in _files_of(self.path) if self.path is not None else []:
            with contextlib.suppress(OSError):
                stat = file.stat()
                self._pinned.setdefault(file, (stat.st_dev, stat.st_ino))

    async def check(self, timeout: float = 2.0) -> str | None:
        """What is wrong with the database now, in words; None when nothing is. sqlite: a few ``stat`` and
        ``access`` calls (the files :meth:`pin` saw are still there, the same inodes, and writable); Postgres:
        ``SELECT 1`` within ``timeout`` seconds."""
        if self.path is None:
            return None if self.sqlite else await self._answers(timeout)
        return self._sqlite_problem()

    def _sqlite_problem(self) -> str | None:
        self.pin()  # a WAL file made since
        for file, identity in list(self._pinned.items()):
            try:
                stat = file.stat()
            except FileNotFoundError:
                stat = None
            except OSError as exc:
                return f"the database file {file} cannot be looked at: {_cause(exc)}"
            if stat is not None and (stat.st_dev, stat.st_ino) == identity:
                continue
            if file != self.path and not _held_open(identity):  # sqlite closed that WAL since: watch the one there now
                if stat is None:
                    del self._pinned[file]
                else:
                    self._pinned[file] = (stat.st_dev, stat.st_ino)
                continue
            return f"the database file {file} was removed or replaced: pending approvals would be lost; restart the runtime"
        for file in self._pinned:
            if not os.access(file, os.W_OK):
                why = "read-only file system" if _read_only_fs(file) else "not writable by the runtime"
                return f"the database file {file} cannot be written ({why}): approvals and decisions would fail"
        return None

    async def _answers(self, timeout: float) -> str | None:
        where = make_url(self.url).render_as_string(hide_password=True)
        try:
            async with asyncio.timeout(timeout):
                async with self.async_engine.connect() as conn:
                    await conn.exec_driver_sql("SELECT 1")
        except TimeoutError:
            return f"the database {where} did not answer SELECT 1 within {timeout:g} s"
        except Exception as exc:
            first = (str(exc).splitlines() or [""])[0]
            return f"the database {where} did not answer SELECT 1: {type(exc).__name__}: {first}"
        return None

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


__all__ = [
    "Database", "LocationError", "check_location", "create_engine", "default_database_url", "is_sqlite", "sqlite_path",
]
