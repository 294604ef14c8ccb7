"""The browser inbox of an MCP gateway (docs/gateway.md, "Held calls"): a real `gatehouse-runtime gateway` process in
front of the demo tools serves the Agent runtime's pages at ``/ui/`` over its held calls, with the same login. A real
MCP SDK client and a Claude Code hook (the http shape, posted as Claude Code posts it) ask; an approver decides in
Chromium; the client reads the outcome."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.support.processes import GATEHOUSE_CMD, free_port, running
from tests.ui.conftest import GROUPS, TOKENS, card, login, open_inbox

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = pytest.mark.e2e

RUNTIME_CMD = [sys.executable, "-c", "from agent_runtime.clients.cli import runtime_main; runtime_main()"]


@dataclass
class Gateway:
    url: str
    sandbox: Path


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    base = tmp_path_factory.mktemp("gateway-inbox")
    sandbox = base / "sandbox"
    sandbox.mkdir()
    (base / "tokens").write_text("".join(
        f"{name}{':groups=' + GROUPS[name] if name in GROUPS else ''}:{token}\n" for name, token in TOKENS.items()))
    tools_port, port = free_port(), free_port()
    (base / "gateway.yaml").write_text(f"""
apiVersion: gatehouse.dev/v1alpha1
kind: RemoteMCPServer
metadata: {{name: file-tools}}
spec:
  url: http://127.0.0.1:{tools_port}/mcp
---
apiVersion: gatehouse.dev/v1alpha1
kind: MCPGateway
metadata: {{name: files-gate}}
spec:
  upstream: {{name: file-tools, requireApproval: [delete_file]}}
  approval:
    rules:
      - {{tool: Bash, when: {{arg: command, regex: 'git\\s+push\\s.*--force'}}, action: require}}
      - {{tool: AskUserQuestion, action: require}}
    timeout: 5m
    approvers: {{groups: [sre]}}
""")
    tools = [*GATEHOUSE_CMD, "demo-tools", "--sandbox", str(sandbox), "--port", str(tools_port)]
    served = [*RUNTIME_CMD, "gateway", "-f", str(base / "gateway.yaml"), "--port", str(port),
              "--api-token-file", str(base / "tokens"), "--state-dir", str(base / "state")]
    with running(tools, ready="demo-tools ready"), running(served, ready="gateway files-gate ready", timeout=60):
        yield Gateway(f"http://127.0.0.1:{port}", sandbox)


def in_background(work: Callable[[], Any]) -> Callable[[], Any]:
    """Run ``work`` in a thread (Playwright's sync API holds this one); the returned function waits for its result."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["result"] = work()
        except BaseException as exc:  # handed to the test
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()

    def result() -> Any:
        thread.join(60)
        assert not thread.is_alive(), "the client still waits"
        if "error" in box:
            raise box["error"]
        return box["result"]

    return result


def mcp_call(url: str, who: str, tool: str, args: dict[str, Any]) -> Any:
    async def call() -> Any:
        async with create_mcp_http_client(headers={"Authorization": f"Bearer {TOKENS[who]}"}) as http:
            async with Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
                return await client.call_tool(tool, args)

    return asyncio.run(call())


def pending_id(url: str, tool: str) -> str:
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKENS['alice']}"}, timeout=30) as rest:
        for _ in range(300):
            found = [a for a in rest.get("/approvals", params={"state": "pending"}).json()["approvals"]
                     if a["tool"] == tool]
            if found:
                return str(found[0]["id"])
            threading.Event().wait(0.1)
    raise AssertionError(f"no pending {tool} request appeared")


def test_a_held_mcp_call_is_approved_in_the_gateways_inbox_and_runs(browser: Browser, gateway: Gateway) -> None:
    (gateway.sandbox / "old.log").write_text("x")
    result = in_background(lambda: mcp_call(gateway.url, "carol", "delete_file", {"path": "old.log"}))
    rid = pending_id(gateway.url, "delete_file")
    context = login(browser, gateway.url, "alice")
    try:
        page = open_inbox(context, gateway.url)
        shown = card(page, rid)
        assert shown.locator(".agent").inner_text() == "gateway/files-gate"  # the gateway, as kubectl names it
        assert shown.locator(".tool").inner_text() == "delete_file" and "on file-tools" in shown.inner_text()
        assert "Asked by carol" in shown.locator(".meta").inner_text()
        assert page.locator("a[href='/ui/chat']").count() == 0  # a gateway has no agent to chat with
        shown.locator("[data-action=approve]").click()
        shown.wait_for(state="detached")
    finally:
        context.close()
    called = result()
    assert not called.is_error, called
    assert not (gateway.sandbox / "old.log").exists()


def test_a_hooks_call_shows_its_session_and_cwd_and_a_denial_reaches_claude(browser: Browser, gateway: Gateway) -> None:
    hook_input = {"session_id": "sess-4f2a", "transcript_path": "/home/carol/.claude/t.jsonl", "cwd": "/home/carol/repo",
                  "permission_mode": "default", "hook_event_name": "PreToolUse", "tool_name": "Bash",
                  "tool_input": {"command": "git push --force origin main"}, "tool_use_id": "toolu_01"}

    def ask() -> Any:
        with httpx.Client(timeout=60) as http:
            reply = http.post(f"{gateway.url}/hooks/claude-code", json=hook_input,
                              headers={"Authorization": f"Bearer {TOKENS['carol']}"})
            return reply.status_code, reply.json()

    answer = in_background(ask)
    rid = pending_id(gateway.url, "Bash")
    context = login(browser, gateway.url, "alice")
    try:
        page = open_inbox(context, gateway.url)
        shown = card(page, rid)
        hint = shown.locator(".hint").inner_text()
        assert "sess-4f2a" in hint and "/home/carol/repo" in hint, hint  # which terminal, which repository
        assert "Asked by carol" in shown.locator(".meta").inner_text() and "on claude-code" in shown.inner_text()
        shown.locator("[data-action=deny]").click()
        form = shown.locator(".deny-form")
        form.locator("textarea").fill("not on main")
        form.locator("button[type=submit]").click()
        shown.wait_for(state="detached")
    finally:
        context.close()
    status, said = answer()
    assert status == 200, said
    out = said["hookSpecificOutput"]
    assert out["permissionDecision"] == "deny" and "not on main" in out["permissionDecisionReason"], json.dumps(said)


def test_a_cli_question_is_answered_with_an_option_button_and_claude_reads_the_answer(
    browser: Browser, gateway: Gateway,
) -> None:
    asked = {"questions": [{"question": "Which environment should I deploy to?", "header": "Env", "multiSelect": False,
                            "options": [{"label": "staging", "description": "the test cluster"},
                                        {"label": "production", "description": "live"}]}]}
    hook_input = {"session_id": "sess-q1", "cwd": "/home/carol/app", "hook_event_name": "PreToolUse",
                  "tool_name": "AskUserQuestion", "tool_input": asked}

    def ask() -> Any:
        with httpx.Client(timeout=60) as http:
            return http.post(f"{gateway.url}/hooks/claude-code", json=hook_input,
                             headers={"Authorization": f"Bearer {TOKENS['carol']}"}).json()

    answer = in_background(ask)
    rid = pending_id(gateway.url, "AskUserQuestion")
    context = login(browser, gateway.url, "alice")
    try:
        page = open_inbox(context, gateway.url)
        shown = card(page, rid)
        question = shown.locator("[data-testid=held-question]")
        assert question.locator(".q").inner_text() == "Which environment should I deploy to?"
        options = question.locator("[data-action=held-answer]")
        assert options.all_inner_texts() == ["staging", "production"]
        options.filter(has_text="staging").click()
        send = question.locator("[data-action=held-answer-send]")
        assert question.locator(".chosen").inner_text() == "Answer: staging"  # confirmed before it is sent
        send.click()
        shown.wait_for(state="detached")
    finally:
        context.close()
    out = answer()["hookSpecificOutput"]
    assert out["permissionDecision"] == "deny", out
    assert "Which environment should I deploy to?" in out["permissionDecisionReason"]
    assert "they answered: staging" in out["permissionDecisionReason"], out
