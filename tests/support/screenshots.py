"""``make screenshots``: the inbox, a request's detail page and the chat tab, as docs/images/*.png.

The same parts as the browser tests (tests/ui): the demo tools, a real runtime with tokens and 2-of-2 approvers on
``delete_file``, Debian's Chromium through Playwright. The browser's clock is fixed (the countdowns read the same in
every run); what the server renders (request times) is the moment the script ran.
"""

from __future__ import annotations

import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from playwright.sync_api import Page

from agent_runtime.contract.agent_config import AgentConfig
from agent_runtime.contract.manifests import select_agent_config
from tests.support.browser import chromium
from tests.support.runtime import ROOT, Rpc, RuntimeProcess, demo_tools, write_manifests

OUT = ROOT / "docs" / "images"
TOKENS = "alice:groups=sre:tok-alice\nbob:groups=sre:tok-bob\ncarol:groups=dev:tok-carol\n"



def _config(base: Path, tools_url: str) -> Path:
    config = select_agent_config(write_manifests(base / "manifests", tools_url)).model_dump()
    config["approval"]["tool_approvers"] = {"delete_file": {"groups": ["sre"], "required": 2, "allow_requester": False}}
    path = base / "config.json"
    path.write_text(AgentConfig.model_validate(config).to_json())
    return path


def _login(page: Page, url: str, token: str) -> None:
    page.goto(f"{url}/ui/login")
    page.fill("#token", token)
    page.click("button[type=submit]")
    page.wait_for_url(f"{url}/ui/")


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, demo_tools(Path(tmp) / "tools") as tools:
        base = Path(tmp)
        (base / "tokens").write_text(TOKENS)
        proc = RuntimeProcess([], base / "state", base / "runtime.log", ["--config", str(_config(base, tools.url))],
                              ["--api-token-file", str(base / "tokens")])
        proc.start()
        try:
            carol = Rpc(proc.url, "tok-carol")
            for name in ("old-report.csv", "build.log"):
                (tools.sandbox / name).write_text(name)
            carol.send("delete build.log")
            time.sleep(0.05)
            carol.send("write retention: 30 days to /srv/config/retention.yaml")
            time.sleep(0.05)
            carol.send("delete old-report.csv")
            fixed = datetime.fromtimestamp(time.time() + 48, UTC)
            with chromium() as browser:
                bob = browser.new_context(viewport={"width": 1100, "height": 640}).new_page()
                _login(bob, proc.url, "tok-bob")
                first = bob.locator("#items .card").last
                first.locator("[data-action=approve]").click()  # bob's approval of the first delete: 1 of 2
                bob.wait_for_selector("[data-testid=votes]")
                page = browser.new_context(viewport={"width": 1100, "height": 760}).new_page()
                page.clock.set_fixed_time(fixed)
                _login(page, proc.url, "tok-alice")
                page.locator("#items .card").first.focus()
                page.screenshot(path=str(OUT / "inbox.png"), full_page=True)
                key = page.locator("#items .card").last.get_attribute("data-key")
                page.goto(f"{proc.url}/ui/requests/{key}")
                page.screenshot(path=str(OUT / "detail.png"), full_page=True)
                chat = browser.new_context(viewport={"width": 900, "height": 640}).new_page()
                chat.clock.set_fixed_time(fixed)
                _login(chat, proc.url, "tok-carol")
                chat.goto(f"{proc.url}/ui/chat")
                chat.fill("#chat-input", "list")
                chat.press("#chat-input", "Enter")
                chat.wait_for_selector(".msg.agent")
                chat.fill("#chat-input", "write hello to notes/today.txt")
                chat.press("#chat-input", "Enter")
                chat.wait_for_selector(".chat-approval")
                chat.screenshot(path=str(OUT / "chat.png"), full_page=True)
        finally:
            proc.stop()
    for name in ("inbox.png", "detail.png", "chat.png"):
        print(f"wrote {(OUT / name).relative_to(ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
