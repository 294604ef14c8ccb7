"""A trusted proxy's headers on a real runtime, started as docs/security.md says: never believed from anyone else, however
the request dresses itself up or whatever ``$FORWARDED_ALLOW_IPS`` says; a proxy on loopback (a sidecar) only with
its shared secret; and the session cookie ``Secure`` when the proxy terminated TLS, or always when told.

The attack of issue 31, item 1: the runtime trusts ``10.0.0.0/8``; a request from 127.0.0.1 (any local process: a
port-forward, a sidecar) claims ``X-Forwarded-For: 10.1.2.3`` and names bob, of group sre, who may decide. uvicorn
used to believe X-Forwarded-For from 127.0.0.1 and rewrite the client address before the runtime looked at it.
"""

from __future__ import annotations

import re
import secrets
import sqlite3
import subprocess
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import httpx
import pytest

from tests.support.runtime import RUNTIME_CMD, Rpc, RuntimeProcess, Tools, demo_tools, request_ids, state, write_manifests

pytestmark = pytest.mark.e2e

TOKENS = "alice:tok-alice\ncarol:groups=sre:tok-carol\n"  # alice asks; sre decides (carol, and bob were he real)
SRE = {"groups": ["sre"], "required": 1}
ATTACK = {"X-Forwarded-For": "10.1.2.3", "X-Forwarded-User": "bob", "X-Forwarded-Groups": "sre"}
SECRET_HEADER = "X-Gatehouse-Proxy-Secret"
CSRF = re.compile(r'<meta name="csrf-token" content="([^"]+)">')


@pytest.fixture(scope="module")
def tools(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tools]:
    with demo_tools(tmp_path_factory.mktemp("proxy-tools")) as running:
        yield running


@contextmanager
def runtime(base: Path, tools: Tools, *serve_args: str) -> Iterator[RuntimeProcess]:
    base.mkdir(parents=True, exist_ok=True)
    (base / "tokens").write_text(TOKENS)
    files = write_manifests(base / "manifests", tools.url, approvers=SRE)
    proc = RuntimeProcess(files, base / "state", base / "runtime.log",
                          serve_args=["--api-token-file", str(base / "tokens"), *serve_args])
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


def votes(proc: RuntimeProcess, request_id: str) -> list[tuple[str, str]]:
    with closing(sqlite3.connect(proc.state_dir / "gatehouse.db")) as conn:
        return conn.execute("SELECT principal, ballot FROM gatehouse_approval_votes WHERE request_id = ?",
                            (request_id,)).fetchall()


@pytest.mark.parametrize("forwarded_allow_ips", [None, "*"], ids=["uvicorn-default", "FORWARDED_ALLOW_IPS=*"])
def test_forwarded_headers_from_127_0_0_1_sign_nobody_in_and_count_no_vote(
    tools: Tools, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, forwarded_allow_ips: str | None,
) -> None:
    if forwarded_allow_ips is None:
        monkeypatch.delenv("FORWARDED_ALLOW_IPS", raising=False)
    else:
        monkeypatch.setenv("FORWARDED_ALLOW_IPS", forwarded_allow_ips)  # the runtime process inherits it
    (tools.sandbox / "victim.txt").write_text("keep me")
    with runtime(tmp_path, tools, "--ui-trusted-proxy", "10.0.0.0/8") as proc:
        task = Rpc(proc.url, "tok-alice").send("delete victim.txt")["task"]
        assert state(task) == "TASK_STATE_INPUT_REQUIRED"
        (request_id,) = request_ids(task)
        with httpx.Client(base_url=proc.url, timeout=30) as attacker:  # keeps any cookie it is given, as a browser would
            page = attacker.get("/ui/", headers=ATTACK, follow_redirects=False)
            assert (page.status_code, page.headers.get("location")) == (303, "/ui/login?next=/ui/"), page.text[:200]
            assert "set-cookie" not in page.headers
            csrf = CSRF.search(page.text)
            body = {"ids": [request_id], "decision": "approve", "reason": "bob says fine"}
            vote = attacker.post("/ui/api/decisions", json=body,
                                 headers={**ATTACK, **({"X-CSRF-Token": csrf.group(1)} if csrf else {})})
            assert vote.status_code == 401, vote.text
            assert attacker.get("/approvals", headers=ATTACK).status_code == 401  # REST: nobody either
        assert votes(proc, request_id) == []
        with httpx.Client(base_url=proc.url, headers={"Authorization": "Bearer tok-carol"}, timeout=30) as carol:
            view = carol.get(f"/approvals/{request_id}").json()
            assert view["status"] == "pending" and view["approvers"]["votes"] == [], view
        assert not tools.executions("delete_file", "victim.txt") and (tools.sandbox / "victim.txt").exists()
        Rpc(proc.url, "tok-alice").call("CancelTask", {"id": task["id"]})


def test_a_trusted_network_with_loopback_in_it_needs_the_proxys_secret(tmp_path: Path) -> None:
    files = write_manifests(tmp_path / "manifests", "http://127.0.0.1:9/mcp")
    (tmp_path / "tokens").write_text(TOKENS)
    cmd = [*RUNTIME_CMD, "serve", *[a for f in files for a in ("-f", str(f))], "--api-token-file", str(tmp_path / "tokens"),
           "--ui-trusted-proxy", "127.0.0.1"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done
    said = " ".join(done.stderr.split())
    assert "--ui-trusted-proxy 127.0.0.1/32 contains a loopback address" in said and "--ui-trusted-proxy-secret-file" in said
    assert "Traceback" not in done.stderr


def cookie_of(reply: httpx.Response) -> str:
    found = reply.headers.get("set-cookie", "")
    assert found.startswith("gatehouse_session=") and "HttpOnly" in found, reply.headers
    return found


def test_a_sidecar_proxy_proves_itself_with_its_secret_and_its_https_makes_the_cookie_secure(
    tools: Tools, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The oauth2-proxy sidecar of docs/inbox.md: it connects from 127.0.0.1, like every other local process, and adds the
    secret; it terminates TLS, so it says ``X-Forwarded-Proto: https``. Only with the secret do its headers count."""
    monkeypatch.setenv("FORWARDED_ALLOW_IPS", "*")
    secret = secrets.token_hex(24)
    (tmp_path / "proxy.secret").write_text(secret + "\n")
    sidecar = {"X-Forwarded-User": "erin", "X-Forwarded-Groups": "sre", SECRET_HEADER: secret}
    https = {"X-Forwarded-Proto": "https"}
    with runtime(tmp_path, tools, "--ui-trusted-proxy", "127.0.0.1", "--ui-trusted-proxy-secret-file",
                 str(tmp_path / "proxy.secret")) as proc:
        page = httpx.get(f"{proc.url}/ui/", headers={**sidecar, **https})
        assert page.status_code == 200 and 'data-testid="viewer">erin<' in page.text
        assert "; Secure" in cookie_of(page)
        plain = httpx.get(f"{proc.url}/ui/", headers=sidecar)  # the proxy spoke plain HTTP to the browser
        assert plain.status_code == 200 and "Secure" not in cookie_of(plain)
        for forged in ({}, {SECRET_HEADER: secret[:-1]}, {SECRET_HEADER: secret.upper()}):
            headers = {**sidecar, **https, **forged}
            if not forged:
                del headers[SECRET_HEADER]
            reply = httpx.get(f"{proc.url}/ui/", headers=headers)
            assert (reply.status_code, reply.headers.get("location")) == (303, "/ui/login?next=/ui/"), forged
            assert "set-cookie" not in reply.headers
        # A login by token through the proxy: Secure; the same from any other local process: its X-Forwarded-Proto is
        # nobody's word, the cookie is not Secure (a browser on http:// would never send it back).
        form = {"token": "tok-carol", "next": "/ui/"}
        through = httpx.post(f"{proc.url}/ui/login", data=form, headers={**https, SECRET_HEADER: secret})
        assert through.status_code == 303 and "; Secure" in cookie_of(through)
        around = httpx.post(f"{proc.url}/ui/login", data=form, headers={**https, "X-Forwarded-For": "10.1.2.3"})
        assert around.status_code == 303 and "Secure" not in cookie_of(around)


def test_secure_cookies_can_be_required_whatever_the_request_says(tools: Tools, tmp_path: Path) -> None:
    """``--ui-secure-cookie``: TLS in front that the runtime cannot see (a mesh, a load balancer that adds no header)."""
    with runtime(tmp_path, tools, "--ui-secure-cookie") as proc:
        login = httpx.post(f"{proc.url}/ui/login", data={"token": "tok-carol", "next": "/ui/"})
        assert login.status_code == 303 and "; Secure" in cookie_of(login)
        session = cookie_of(login).split(";")[0].split("=", 1)[1]
        page = httpx.get(f"{proc.url}/ui/", cookies={"gatehouse_session": session})
        csrf = CSRF.search(page.text)
        assert page.status_code == 200 and csrf is not None
        out = httpx.post(f"{proc.url}/ui/logout", cookies={"gatehouse_session": session},
                         headers={"X-CSRF-Token": csrf.group(1)})
        assert out.status_code == 303 and "Max-Age=0" in cookie_of(out) and "; Secure" in cookie_of(out)
