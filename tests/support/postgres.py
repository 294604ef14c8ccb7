"""A throwaway PostgreSQL server for the tests: ``initdb`` into a temp dir, ``postgres`` on a free port.

Fixtures (import them into a ``conftest.py``):

``postgres_server``        session-scoped; yields the server's asyncpg URL (database ``postgres``) and stops
                           the server at the end. ``GATEHOUSE_TEST_POSTGRES_URL`` overrides it: that URL is used
                           as it is and nothing is started.
``postgres_database_url``  a fresh, empty database on that server for one test (on the override URL: the
                           override itself).

The binaries come from Debian's ``postgresql`` package (``/usr/lib/postgresql/<major>/bin``; ``make test``
installs it when it is missing). PostgreSQL refuses to run as root, so as root the server runs as the
``postgres`` system user (``setpriv``, else ``runuser``) in a temp dir that user owns. Authentication is
``trust`` on 127.0.0.1 only. Without binaries the tests are skipped with the reason, except in CI
(``CI`` set), where that is a failure: a skipped replica test must never pass for a green run.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.processes import free_port
from tests.support.runtime import RuntimeProcess, Tools, demo_tools, write_manifests

__all__ = ["PostgresServer", "find_bin_dir", "postgres_database_url", "postgres_server", "running_postgres"]

OVERRIDE_ENV = "GATEHOUSE_TEST_POSTGRES_URL"
SYSTEM_USER = "postgres"


def find_bin_dir() -> Path | None:
    """The directory holding ``initdb``, ``postgres`` and ``pg_ctl`` (newest major version first), or None."""
    candidates: list[Path] = []
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(os.path.realpath(on_path)).parent)
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name or 0), reverse=True)
    candidates += [Path(p) for p in versions]
    for directory in candidates:
        if all((directory / name).exists() for name in ("initdb", "postgres")):
            return directory
    return None


def _as_user(user: str | None) -> list[str]:
    """The command prefix that drops root to ``user`` (exec, so the child's pid is the server's)."""
    if user is None:
        return []
    if shutil.which("setpriv"):
        return ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", "--"]
    return ["runuser", "-u", user, "--"]


@dataclass
class PostgresServer:
    """One running server; ``url(database)`` is its asyncpg URL."""

    port: int
    directory: Path
    process: subprocess.Popen[bytes]
    log: Path

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self) -> str:
        """A new empty database; returns its URL."""
        name = f"gh_{uuid.uuid4().hex[:12]}"
        asyncio.run(_execute(self.port, f'CREATE DATABASE "{name}"'))
        return self.url(name)


async def _execute(port: int, sql: str) -> None:
    import asyncpg  # the postgres extra; imported here so that collecting tests never needs it

    conn = await asyncpg.connect(host="127.0.0.1", port=port, user="postgres", database="postgres", timeout=10)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def _wait_ready(server: PostgresServer, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"postgres exited {server.process.returncode}:\n{server.log.read_text()[-4000:]}")
        try:
            with socket.create_connection(("127.0.0.1", server.port), timeout=1):
                pass
            asyncio.run(_execute(server.port, "SELECT 1"))
            return
        except (OSError, Exception):  # refused while starting; "the database system is starting up"
            time.sleep(0.2)
    raise RuntimeError(f"postgres not ready after {timeout}s:\n{server.log.read_text()[-4000:]}")


@contextlib.contextmanager
def running_postgres(
    bin_dir: Path, timeout: float = 60.0, also_listen: str | None = None, allow_from: str | None = None
) -> Iterator[PostgresServer]:
    """initdb + postgres in a fresh temp dir, on a free port of 127.0.0.1; everything removed afterwards.

    ``also_listen``: one more address to listen on (the kubelet stand-in's gateway, which its pods reach);
    ``allow_from``: a CIDR whose clients are trusted too (the pods' subnet)."""
    user = SYSTEM_USER if os.geteuid() == 0 else None
    if user is not None:
        try:
            owner = pwd.getpwnam(user)
        except KeyError:
            raise RuntimeError(f"running as root, and there is no '{user}' system user to run PostgreSQL as") from None
    # Not under pytest's tmp_path: its parents are private to root, and the server user must reach the dir.
    directory = Path(tempfile.mkdtemp(prefix="gatehouse-pg-"))
    data, sockets, log = directory / "data", directory / "sockets", directory / "postgres.log"
    sockets.mkdir()
    log.touch()
    if user is not None:
        for path in (directory, sockets, log):
            os.chown(path, owner.pw_uid, owner.pw_gid)
    process: subprocess.Popen[bytes] | None = None
    try:
        initdb = [*_as_user(user), str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
                  "-E", "UTF8", "--locale=C", "--no-sync"]
        done = subprocess.run(initdb, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
        if allow_from:
            with (data / "pg_hba.conf").open("a") as hba:
                hba.write(f"host all all {allow_from} trust\n")
        port = free_port()
        args = [
            *_as_user(user), str(bin_dir / "postgres"), "-D", str(data), "-p", str(port), "-k", str(sockets),
            "-c", f"listen_addresses={','.join(['127.0.0.1', *([also_listen] if also_listen else [])])}",
            "-c", "max_connections=200",
            # A throwaway server: durability against power loss is not what these tests are about.
            "-c", "fsync=off", "-c", "full_page_writes=off", "-c", "synchronous_commit=off",
        ]
        with log.open("ab") as out:
            process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
        server = PostgresServer(port, directory, process, log)
        _wait_ready(server, timeout)
        yield server
    finally:
        if process is not None and process.poll() is None:
            process.terminate()  # SIGTERM: "smart" shutdown; fall back to SIGQUIT/SIGKILL
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
        shutil.rmtree(directory, ignore_errors=True)


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI must run the Postgres tests: `make test` installs Debian's postgresql package)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer | str]:
    """A running :class:`PostgresServer`, or the override URL (``GATEHOUSE_TEST_POSTGRES_URL``) as a string."""
    try:
        import asyncpg  # noqa: F401
    except ImportError:
        _unavailable("the postgres extra (asyncpg) is not installed")
    override = os.environ.get(OVERRIDE_ENV, "")
    if override:
        yield override
        return
    bin_dir = find_bin_dir()
    if bin_dir is None:
        _unavailable(f"no PostgreSQL binaries (initdb) found; install Debian's postgresql package or set {OVERRIDE_ENV}")
        return
    with running_postgres(bin_dir) as server:
        yield server


@pytest.fixture
def postgres_database_url(postgres_server: PostgresServer | str) -> str:
    """A fresh database for one test (the override URL as it is)."""
    if isinstance(postgres_server, str):
        return postgres_server
    return postgres_server.create_database()


@pytest.fixture
def replicas(tmp_path: Path, postgres_database_url: str) -> Iterator[tuple[Tools, RuntimeProcess, RuntimeProcess]]:
    """Demo tools and two runtime processes serving one agent from one Postgres database."""
    with demo_tools(tmp_path / "tools") as tools:
        files = write_manifests(tmp_path / "m", tools.url)
        a = RuntimeProcess(files, tmp_path / "a", tmp_path / "a.log", ["--database-url", postgres_database_url])
        b = RuntimeProcess(files, tmp_path / "b", tmp_path / "b.log", ["--database-url", postgres_database_url])
        a.start()
        b.start()
        try:
            yield tools, a, b
        finally:
            a.stop()
            b.stop()
