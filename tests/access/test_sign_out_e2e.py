"""Signing out of the inbox holds for good (issue 31, item 5): the signed-out session is kept in the database, so a copy
of its cookie is refused after a restart and by every replica, while the person's other sessions go on."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.support.runtime import RuntimeProcess, demo_tools, write_manifests

pytestmark = pytest.mark.e2e

TOKENS = "alice:groups=sre:tok-alice\n"


@dataclass
class Browser:
    """One browser's session cookie on a runtime."""

    cookie: str

    def page(self, url: str) -> httpx.Response:
        return httpx.get(f"{url}/ui/", cookies={"gatehouse_session": self.cookie}, follow_redirects=False)

    def signed_in(self, url: str) -> bool:
        reply = self.page(url)
        if reply.status_code == 200:
            assert 'data-testid="viewer">alice<' in reply.text
            return True
        assert (reply.status_code, reply.headers["location"]) == (303, "/ui/login?next=/ui/"), reply
        assert httpx.get(f"{url}/ui/events", cookies={"gatehouse_session": self.cookie}).status_code == 401
        return False

    def sign_out(self, url: str) -> None:
        csrf = re.search(r'<meta name="csrf-token" content="([^"]+)">', self.page(url).text)
        assert csrf is not None
        out = httpx.post(f"{url}/ui/logout", cookies={"gatehouse_session": self.cookie}, headers={"X-CSRF-Token": csrf.group(1)})
        assert out.status_code == 303 and out.headers["location"] == "/ui/login"


def sign_in(url: str) -> Browser:
    login = httpx.post(f"{url}/ui/login", data={"token": "tok-alice", "next": "/ui/"})
    assert login.status_code == 303, login.text
    return Browser(login.headers["set-cookie"].split(";")[0].split("=", 1)[1])


@pytest.fixture
def runtimes(tmp_path: Path) -> Iterator[tuple[Path, list[Path]]]:
    (tmp_path / "tokens").write_text(TOKENS)
    with demo_tools(tmp_path / "tools") as tools:
        yield tmp_path, write_manifests(tmp_path / "manifests", tools.url)


def serve(base: Path, files: list[Path], name: str, *args: str) -> RuntimeProcess:
    proc = RuntimeProcess(files, base / name, base / f"{name}.log",
                          serve_args=["--api-token-file", str(base / "tokens"), *args])
    proc.start()
    return proc


def test_a_signed_out_cookie_stays_refused_after_a_restart(runtimes: tuple[Path, list[Path]]) -> None:
    base, files = runtimes
    proc = serve(base, files, "state")
    try:
        leaving, staying = sign_in(proc.url), sign_in(proc.url)  # two browsers of alice's
        leaving.sign_out(proc.url)
        assert not leaving.signed_in(proc.url) and staying.signed_in(proc.url)
        proc.stop()
        proc.start()
        assert not leaving.signed_in(proc.url)
        assert staying.signed_in(proc.url)  # the key is kept: the session she did not end goes on
    finally:
        proc.stop()
    with closing(sqlite3.connect(base / "state" / "gatehouse.db")) as conn:
        assert conn.execute("SELECT count(*) FROM gatehouse_ui_revoked_sessions").fetchone() == (1,)


def test_a_sign_out_on_one_replica_holds_on_the_other(runtimes: tuple[Path, list[Path]], postgres_database_url: str) -> None:
    base, files = runtimes
    a = serve(base, files, "a", "--database-url", postgres_database_url)
    try:
        b = serve(base, files, "b", "--database-url", postgres_database_url)
        try:
            leaving, staying = sign_in(a.url), sign_in(a.url)
            assert leaving.signed_in(b.url) and staying.signed_in(b.url)  # one key: signed in on both
            leaving.sign_out(a.url)
            assert not leaving.signed_in(b.url) and not leaving.signed_in(a.url)
            assert staying.signed_in(b.url)
        finally:
            b.stop()
    finally:
        a.stop()
