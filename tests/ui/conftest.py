"""The inbox's browser tests: Debian's Chromium driven by Playwright (sync API), against real processes.

``browser``   package-scoped: one headless Chromium for this directory (closed after it: while Playwright's sync API
              is open, an asyncio test elsewhere could not run). The binary is ``$GATEHOUSE_CHROMIUM`` or
              ``/usr/bin/chromium`` (``make test`` installs Debian's ``chromium`` package when it is missing). Never
              Playwright's own download (``playwright install`` cannot reach its CDN here). Without a browser the tests
              are skipped with the reason, except under ``CI`` (set), where that is a failure, as for PostgreSQL
              (tests/support/postgres.py).
``gatehouse`` package-scoped: the demo tools and one runtime serving the example agent with bearer tokens (alice and
              bob in group sre, carol and dave in none) and a session key file (a restart keeps people logged in);
              ``write_file`` needs two approvals, from alice and bob; every other gated call one, from a member of
              sre. carol is nobody's approver: she sees only what she asked for herself. Edit and approve
              (:data:`RULES`): writes under ``edit/`` need one member of sre, who may change the arguments; writes
              of ``.env`` files are refused; writes under ``prod/`` need bob.
``sign_in``   ``sign_in(who, **context_args)``: a browser context logged in as ``who`` on ``gatehouse``; closed after the
              test, and every task still waiting canceled.

pytest-playwright's plugin is disabled (``-p no:playwright`` in pyproject's addopts): its ``browser``/``page``
fixtures would launch Playwright's own, absent, browser; these fixtures replace them.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from tests.support.browser import chromium
from tests.support.runtime import Rpc, RuntimeProcess, Tools, demo_tools, state, wait_for, write_manifests

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, Locator, Page

WAIT_MS = 15_000  # how long a page may take to show what a test waits for (a loaded 2-core machine)

# Distinctive tokens, so that a test can look for them anywhere in a page.
TOKENS = {name: f"tok-{name}-{secrets.token_hex(6)}" for name in ("alice", "bob", "carol", "dave")}
GROUPS = {"alice": "sre", "bob": "sre"}
TWO_OF_ALICE_AND_BOB = {"users": ["alice", "bob"], "required": 2}
SRE = {"groups": ["sre"], "required": 1}  # every other gated call: one member of sre (without an approvers block any
# authenticated user may decide, see agent_runtime/contract/authority.py)
RULES = [  # first match wins; then the example's requireApproval (write_file: alice and bob)
    {"tool": "read_file", "when": {"arg": "path", "glob": "**/.env*"}, "action": "require"},  # the example's own
    {"tool": "write_file", "when": {"arg": "path", "glob": "**/.env*"}, "action": "deny"},
    {"tool": "write_file", "when": {"arg": "path", "glob": "prod/**"}, "action": "require", "approvers": {"users": ["bob"]}},
    {"tool": "write_file", "when": {"arg": "path", "glob": "edit/**"}, "action": "require", "approvers": SRE,
     "allowEdit": True},
]


@pytest.fixture(scope="package")  # not the session: while Playwright's sync API is open, no asyncio test can run
def browser() -> Iterator[Browser]:
    with chromium() as launched:
        yield launched


@dataclass
class Gatehouse:
    tools: Tools
    proc: RuntimeProcess
    base: Path

    @property
    def url(self) -> str:
        return self.proc.url

    def rpc(self, who: str) -> Rpc:
        return Rpc(self.url, TOKENS[who])

    def rest(self, who: str) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {TOKENS[who]}"}, timeout=30)

    def approvals(self, who: str = "alice", status: str = "all") -> list[dict[str, Any]]:
        with self.rest(who) as client:
            reply = client.get("/approvals", params={"state": status})
            reply.raise_for_status()
            return list(reply.json()["approvals"])

    def approval(self, request_id: str, who: str = "alice") -> dict[str, Any]:
        with self.rest(who) as client:
            reply = client.get(f"/approvals/{request_id}")
            reply.raise_for_status()
            return dict(reply.json())

    def request_for(self, tool: str, path: str, who: str = "alice") -> str:
        """The id of the pending ``tool`` call on ``path`` that ``who`` may see (waiting for it to be asked)."""
        def find() -> str | None:
            for view in self.approvals(who, "pending"):
                if view["tool"] == tool and view["args"].get("path") == path:
                    return str(view["id"])
            return None
        return str(wait_for(find, 30))

    def cancel_waiting_tasks(self) -> None:
        """Cancel every task still waiting for a decision or an answer, whoever owns it: each test starts clean."""
        for who in TOKENS:
            caller = self.rpc(who)
            for task in caller.call("ListTasks", {}).get("result", {}).get("tasks", []):
                if state(task) == "TASK_STATE_INPUT_REQUIRED":
                    caller.call("CancelTask", {"id": task["id"]})


def serve(base: Path, tools: Tools, *serve_args: str, session_key: bool = True) -> RuntimeProcess:
    """The example agent on a started runtime: this package's tokens and approvers, ``serve_args`` added; with
    ``session_key``, a session key file, else the key the runtime keeps in its database."""
    base.mkdir(parents=True, exist_ok=True)
    (base / "tokens").write_text("".join(
        f"{name}{':groups=' + GROUPS[name] if name in GROUPS else ''}:{token}\n" for name, token in TOKENS.items()
    ))
    args = ["--api-token-file", str(base / "tokens"), *serve_args]
    if session_key:
        (base / "session.key").write_text(secrets.token_hex(32))
        args += ["--ui-session-key-file", str(base / "session.key")]
    files = write_manifests(base / "manifests", tools.url, approvers=SRE, rules=RULES,
                            toolApprovers=[{"tool": "write_file", "approvers": TWO_OF_ALICE_AND_BOB}])
    proc = RuntimeProcess(files, base / "state", base / "runtime.log", serve_args=args)
    proc.start()
    return proc


@pytest.fixture(scope="package")
def gatehouse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gatehouse]:
    base = tmp_path_factory.mktemp("ui")
    with demo_tools(base / "tools") as tools:
        proc = serve(base, tools)
        try:
            yield Gatehouse(tools, proc, base)
        finally:
            proc.stop()


def login(browser: Browser, url: str, who: str, **context_args: Any) -> BrowserContext:
    """A new browser context signed in as ``who`` through the login page (the token typed into its password field)."""
    context = browser.new_context(**context_args)
    context.set_default_timeout(WAIT_MS)
    page = context.new_page()
    page.goto(f"{url}/ui/")
    assert "/ui/login" in page.url, page.url
    page.fill("#token", TOKENS[who])
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/ui/$"))
    assert page.inner_text("[data-testid=viewer]") == who
    page.close()
    return context


SignIn = Callable[..., "BrowserContext"]


@pytest.fixture
def sign_in(browser: Browser, gatehouse: Gatehouse) -> Iterator[SignIn]:
    """``sign_in(who, **context_args)``: a browser context logged in as ``who``; closed after the test, and every task
    still waiting canceled."""
    opened: list[BrowserContext] = []

    def open_as(who: str, **context_args: Any) -> BrowserContext:
        context = login(browser, gatehouse.url, who, **context_args)
        opened.append(context)
        return context

    yield open_as
    for context in opened:
        context.close()
    gatehouse.cancel_waiting_tasks()


def open_inbox(context: BrowserContext, url: str) -> Page:
    """The inbox in a new tab, its live connection (server-sent events) open, marked so that a reload would show."""
    page = context.new_page()
    with page.expect_response(lambda r: r.url.endswith("/ui/events")):
        page.goto(f"{url}/ui/")
    page.evaluate("window.notReloaded = true")
    return page


def card(page: Page, request_id: str) -> Locator:
    return page.locator(f'#items .card[data-key="{request_id}"]')


def status_line(page: Page) -> str:
    return str(page.inner_text("#status"))


__all__ = [
    "RULES", "TOKENS", "WAIT_MS", "Gatehouse", "SignIn", "browser", "card", "gatehouse", "login", "open_inbox", "serve",
    "sign_in", "status_line",
]
