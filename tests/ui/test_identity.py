"""Who the page is for, besides a typed token: a trusted proxy's identity headers; a session across a restart and
after signing out.

``proxied`` is a second runtime of the example agent (the same tokens and approvers, the same demo tools as
``gatehouse``) started with ``--ui-trusted-proxy 127.0.0.1`` and the proxy's shared secret (a sidecar such as
oauth2-proxy connects from 127.0.0.1, like every local process: only the secret tells it apart), and without a session
key file: its session cookies are signed with the key kept in its database. ``gatehouse`` (conftest.py) has no trusted
proxy.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator
from typing import TYPE_CHECKING

import httpx
import pytest

from tests.support.runtime import wait_for
from tests.ui.conftest import TOKENS, WAIT_MS, Gatehouse, login, serve

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = pytest.mark.e2e

PROXY_SECRET = secrets.token_hex(24)
AS_ERIN = {"X-Forwarded-User": "erin", "X-Forwarded-Groups": "sre,oncall", "X-Gatehouse-Proxy-Secret": PROXY_SECRET}


@pytest.fixture(scope="module")
def proxied(gatehouse: Gatehouse, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gatehouse]:
    base = tmp_path_factory.mktemp("proxied")
    (base / "proxy.secret").write_text(PROXY_SECRET)
    proc = serve(base, gatehouse.tools, "--ui-trusted-proxy", "127.0.0.1", "--ui-trusted-proxy-secret-file",
                 str(base / "proxy.secret"), session_key=False)
    try:
        yield Gatehouse(gatehouse.tools, proc, base)
    finally:
        proc.stop()


def test_identity_headers_count_only_from_a_trusted_proxy(proxied: Gatehouse, gatehouse: Gatehouse) -> None:
    # From 127.0.0.1, trusted: the page is erin's, and it comes with her session cookie (for its CSRF token).
    page = httpx.get(f"{proxied.url}/ui/", headers=AS_ERIN)
    assert page.status_code == 200, page.text
    assert re.search(r'data-testid="viewer">erin<', page.text)
    cookie = page.headers["set-cookie"]
    assert cookie.startswith("gatehouse_session=") and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    # No headers: nobody; the inbox sends the browser to sign in. Nor do the headers count without the proxy's secret.
    anonymous = httpx.get(f"{proxied.url}/ui/")
    assert (anonymous.status_code, anonymous.headers["location"]) == (303, "/ui/login?next=/ui/")
    no_secret = {k: v for k, v in AS_ERIN.items() if k != "X-Gatehouse-Proxy-Secret"}
    local = httpx.get(f"{proxied.url}/ui/", headers=no_secret)
    assert (local.status_code, local.headers["location"]) == (303, "/ui/login?next=/ui/")
    # A page vouched for by the proxy still needs its CSRF token to decide.
    forged = httpx.post(f"{proxied.url}/ui/api/decisions", headers=AS_ERIN, json={"ids": ["x"], "decision": "approve"})
    assert forged.status_code == 403 and "CSRF" in forged.text
    # Without --ui-trusted-proxy the same headers are anybody's to send: ignored.
    ignored = httpx.get(f"{gatehouse.url}/ui/", headers=AS_ERIN)
    assert (ignored.status_code, ignored.headers["location"]) == (303, "/ui/login?next=/ui/")
    assert "set-cookie" not in ignored.headers
    refused = httpx.post(f"{gatehouse.url}/ui/api/decisions", headers=AS_ERIN, json={"ids": ["x"], "decision": "approve"})
    assert refused.status_code == 401
    a2a = {"jsonrpc": "2.0", "id": "1", "method": "ListTasks", "params": {}}
    assert httpx.post(f"{gatehouse.url}/", headers={**AS_ERIN, "A2A-Version": "1.0"}, json=a2a).status_code == 401


def test_a_person_behind_the_proxy_decides_in_the_browser(browser: Browser, proxied: Gatehouse) -> None:
    (proxied.tools.sandbox / "proxied.txt").write_text("x")
    context = browser.new_context(extra_http_headers=AS_ERIN)  # what the proxy adds to every request
    context.set_default_timeout(WAIT_MS)
    try:
        page = context.new_page()
        with page.expect_response(lambda r: r.url.endswith("/ui/events")):
            page.goto(f"{proxied.url}/ui/")
        assert page.inner_text("[data-testid=viewer]") == "erin"
        proxied.rpc("alice").send("delete proxied.txt")  # erin is in sre: hers to decide
        rid = proxied.request_for("delete_file", "proxied.txt")
        shown = page.locator(f'#items .card[data-key="{rid}"]')
        shown.locator("[data-action=approve]").click()
        shown.wait_for(state="detached")
        assert "delete_file: approved (decided by erin)" in page.inner_text("#status")
        assert len(wait_for(lambda: proxied.tools.executions("delete_file", "proxied.txt"), 30)) == 1
        assert proxied.approval(rid)["decided_by"] == "erin"
    finally:
        context.close()
        proxied.cancel_waiting_tasks()


def test_a_restart_keeps_the_page_signed_in_and_signing_out_elsewhere_ends_it(browser: Browser, proxied: Gatehouse) -> None:
    """The session key lives in the database: after a restart the open page reconnects as the same person. Signing out
    in another tab ends the session: the page says so and links to the login page (not "reconnecting…" for ever),
    which brings the person back."""
    context = login(browser, proxied.url, "alice")
    try:
        page = context.new_page()
        with page.expect_response(lambda r: r.url.endswith("/ui/events")):
            page.goto(f"{proxied.url}/ui/")
        banner = page.locator("#connection")
        proxied.proc.kill9()
        try:
            banner.wait_for(state="visible")
            assert "Connection lost" in banner.inner_text()
        finally:
            proxied.proc.start()
        banner.wait_for(state="hidden", timeout=30_000)  # back, and still alice's
        assert page.inner_text("[data-testid=viewer]") == "alice"

        other = context.new_page()
        other.goto(f"{proxied.url}/ui/history")
        other.get_by_role("button", name="Sign out").click()
        other.wait_for_url(re.compile(r"/ui/login"))
        banner.get_by_text("Your session has ended.").wait_for(timeout=30_000)
        banner.get_by_role("link", name="Sign in again").click()
        page.wait_for_url(re.compile(r"/ui/login\?next="))
        page.fill("#token", TOKENS["alice"])
        page.click("button[type=submit]")
        page.wait_for_url(f"{proxied.url}/ui/")
        assert page.inner_text("[data-testid=viewer]") == "alice"
    finally:
        context.close()
