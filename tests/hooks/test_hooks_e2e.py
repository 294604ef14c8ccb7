"""Claude Code's PreToolUse hook (issue 39, docs/gateway.md "Claude Code") as a user meets it: a real gateway process
on 127.0.0.1 (`gatehouse-runtime gateway`) whose policy names Claude Code's tools, the real `gatehouse hook
claude-code` command in a subprocess (the `command` hook: stdin, stdout, exit code) and the endpoint posted to as an
`http` hook would. Payloads are built as Claude Code's hook reference documents them; every answer is checked
against the documented output schema. Decisions are made over the gateway's REST API, as an approver would."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import jsonschema
import pytest

from tests.support.processes import GATEHOUSE_CMD, free_port, running

pytestmark = pytest.mark.e2e

RUNTIME_CMD = [sys.executable, "-c", "from agent_runtime.clients.cli import runtime_main; runtime_main()"]
TOKENS = "alice:tok-alice\ncarol:groups=sre:tok-carol\n"  # alice runs Claude Code; carol (sre) approves

# The PreToolUse output as Claude Code's hook reference documents it (hookSpecificOutput), nothing else added.
OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "hookSpecificOutput": {
            "type": "object",
            "additionalProperties": False,
            "required": ["hookEventName", "permissionDecision"],
            "properties": {
                "hookEventName": {"const": "PreToolUse"},
                "permissionDecision": {"enum": ["allow", "deny", "ask"]},
                "permissionDecisionReason": {"type": "string"},
                "updatedInput": {"type": "object"},
            },
        },
    },
}

POLICY = r"""
    rules:
      - {tool: Bash, when: {arg: command, regex: 'git\s+push\s.*--force'}, action: require, allowEdit: true}
      - {tool: Bash, when: {arg: command, regex: 'rm\s+-rf'}, action: deny}
      - {tool: Write, when: {arg: file_path, glob: '**/.env*'}, action: deny}
      - {tool: Edit, when: {arg: file_path, glob: '**/deploy/**'}, action: require}
      - {tool: mcp__github__merge_pull_request, action: require}
      - {tool: AskUserQuestion, action: require, approvers: {users: [alice]}}
    approvers: {groups: [sre]}
"""


def _manifests(approval: str) -> str:
    # No upstream: the gateway serves only hooks (no /mcp, and /readyz waits for no tool server).
    return f"""
apiVersion: gatehouse.dev/v1alpha1
kind: MCPGateway
metadata: {{name: laptops}}
spec:
  approval:
{approval}
"""


@dataclass(frozen=True)
class Gate:
    hook: str  # the endpoint
    base: str
    tokens: Path

def _serve(base: Path, approval: str) -> Iterator[Gate]:
    (base / "tokens").write_text(TOKENS)
    port = free_port()
    (base / "gateway.yaml").write_text(_manifests(approval))
    args = [*RUNTIME_CMD, "gateway", "-f", str(base / "gateway.yaml"), "--port", str(port),
            "--api-token-file", str(base / "tokens"), "--state-dir", str(base / "state")]
    # The ready line names the hook endpoint, since there is no /mcp to name.
    ready = f"gateway laptops ready: http://127.0.0.1:{port}/hooks/claude-code (hooks only: no upstream)"
    with running(args, ready=ready, timeout=60):
        root = f"http://127.0.0.1:{port}/"
        yield Gate(root + "hooks/claude-code", root, base / "tokens")


@pytest.fixture(scope="module")
def gate(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gate]:
    yield from _serve(tmp_path_factory.mktemp("hooks"), POLICY + "    timeout: 1m\n")


@pytest.fixture(scope="module")
def asks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gate]:
    yield from _serve(tmp_path_factory.mktemp("asks"), POLICY + "    timeout: 1s\n    onTimeout: ask\n")


@pytest.fixture(scope="module")
def denies(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gate]:
    yield from _serve(tmp_path_factory.mktemp("denies"), POLICY + "    timeout: 1s\n    onTimeout: deny\n")


def pre_tool_use(tool: str, tool_input: dict[str, Any], session: str = "sess-7f3a",
                 cwd: str = "/home/alice/shop") -> dict[str, Any]:
    """A PreToolUse input as the hook reference documents it."""
    return {"session_id": session, "transcript_path": f"/home/alice/.claude/projects/shop/{session}.jsonl", "cwd": cwd,
            "permission_mode": "default", "hook_event_name": "PreToolUse", "tool_name": tool,
            "tool_input": tool_input, "tool_use_id": f"toolu_{abs(hash(json.dumps(tool_input))) % 10**8:08d}"}


@dataclass(frozen=True)
class Ran:
    code: int
    out: dict[str, Any] | None
    err: str
    seconds: float


async def command(url: str, payload: dict[str, Any], token: str | None = "tok-alice", timeout: float = 30,
                  *extra: str) -> Ran:
    """`gatehouse hook claude-code` as Claude Code runs a command hook: the input on stdin."""
    args = [*GATEHOUSE_CMD, "hook", "claude-code", "--url", url, "--timeout", str(timeout), *extra]
    env = {k: v for k, v in os.environ.items() if k != "GATEHOUSE_TOKEN"}
    if token is not None:
        env["GATEHOUSE_TOKEN"] = token
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(*args, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE, env=env)
    out, err = await asyncio.wait_for(proc.communicate(json.dumps(payload).encode()), timeout + 30)
    seconds = time.monotonic() - started
    parsed = json.loads(out) if out.strip() else None
    if parsed is not None:
        jsonschema.validate(parsed, OUTPUT_SCHEMA)
    assert proc.returncode is not None
    return Ran(proc.returncode, parsed, err.decode(), seconds)


async def http_hook(gate: Gate, payload: dict[str, Any], token: str = "tok-alice") -> dict[str, Any]:
    """The endpoint as an `http` hook posts to it."""
    async with httpx2.AsyncClient(timeout=60) as http:
        response = await http.post(gate.hook, json=payload, headers={"authorization": f"Bearer {token}"})
    assert response.status_code == 200, response.text
    body = dict(response.json())
    jsonschema.validate(body, OUTPUT_SCHEMA)
    return body


async def pending(gate: Gate, tool: str, token: str = "tok-carol") -> dict[str, Any]:
    async with httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"}) as http:
        for _ in range(300):
            found = [a for a in (await http.get(gate.base + "approvals")).json()["approvals"] if a["tool"] == tool]
            if found:
                (one,) = found
                return dict(one)
            await asyncio.sleep(0.05)
    raise AssertionError(f"no pending {tool} request appeared")


async def decide(gate: Gate, request_id: str, body: dict[str, Any], token: str = "tok-carol") -> None:
    async with httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"}) as http:
        response = await http.post(f"{gate.base}approvals/{request_id}/decision", json=body,
                                   headers={"idempotency-key": f"k-{request_id}-{body['decision']}"})
    assert response.status_code == 200, response.text


def decision(out: dict[str, Any] | None) -> dict[str, Any]:
    assert out is not None
    return dict(out["hookSpecificOutput"])


async def test_a_hooks_only_gateway_is_ready_without_an_upstream_and_serves_no_mcp(gate: Gate) -> None:
    async with httpx2.AsyncClient(timeout=10) as http:
        ready = await http.get(gate.base + "readyz")
        mcp = await http.post(gate.base + "mcp", headers={"authorization": "Bearer tok-alice"},
                              json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert (ready.status_code, ready.json()) == (200, {"status": "ready"})
    assert mcp.status_code == 404, mcp.text


async def test_a_gated_bash_command_waits_and_an_approval_allows_it(gate: Gate) -> None:
    call = asyncio.create_task(command(gate.hook, pre_tool_use("Bash", {"command": "git push --force origin main",
                                                                         "description": "Force-push main"})))
    request = await pending(gate, "Bash")
    # The card says who asked (the hook's principal), in which session and directory.
    assert request["requested_by"] == "alice"
    assert "sess-7f3a" in request["hint"] and "/home/alice/shop" in request["hint"], request["hint"]
    assert not call.done()
    await decide(gate, request["id"], {"decision": "approve"})
    ran = await call
    assert ran.code == 0, ran.err
    assert decision(ran.out)["permissionDecision"] == "allow"
    assert "updatedInput" not in decision(ran.out)


async def test_a_denial_comes_back_as_deny_with_the_approvers_reason(gate: Gate) -> None:
    call = asyncio.create_task(http_hook(gate, pre_tool_use("mcp__github__merge_pull_request", {"number": 42})))
    request = await pending(gate, "mcp__github__merge_pull_request")
    await decide(gate, request["id"], {"decision": "deny", "reason": "release freeze until Monday"})
    said = decision(await call)
    assert said["permissionDecision"] == "deny"
    assert "release freeze until Monday" in said["permissionDecisionReason"]


async def test_an_edit_comes_back_as_allow_with_the_updated_input(gate: Gate) -> None:
    asked = {"command": "git push --force origin feature", "description": "Push"}
    call = asyncio.create_task(command(gate.hook, pre_tool_use("Bash", asked)))
    request = await pending(gate, "Bash")
    edited = {"command": "git push --force-with-lease origin feature", "description": "Push"}
    await decide(gate, request["id"], {"decision": "approve", "arguments": edited, "args_hash": request["args_hash"]})
    ran = await call
    assert ran.code == 0, ran.err
    assert decision(ran.out)["permissionDecision"] == "allow"
    assert decision(ran.out)["updatedInput"] == edited


async def test_rules_refuse_at_once_and_ungated_calls_are_left_to_claude_code(gate: Gate) -> None:
    said = decision(await http_hook(gate, pre_tool_use("Write", {"file_path": "/home/alice/shop/.env.local",
                                                                  "content": "X=1"})))
    assert said["permissionDecision"] == "deny" and "**/.env*" in said["permissionDecisionReason"]
    ran = await command(gate.hook, pre_tool_use("Bash", {"command": "rm -rf /home/alice/shop/build"}))
    assert ran.code == 0 and decision(ran.out)["permissionDecision"] == "deny"
    assert await http_hook(gate, pre_tool_use("Bash", {"command": "ls -la"})) == {}  # no opinion: Claude Code decides


async def test_no_decision_in_time_follows_on_timeout_ask(asks: Gate) -> None:
    ran = await command(asks.hook, pre_tool_use("Edit", {"file_path": "/home/alice/shop/deploy/prod.yaml",
                                                         "old_string": "replicas: 2", "new_string": "replicas: 0"}))
    assert ran.code == 0, ran.err
    assert decision(ran.out)["permissionDecision"] == "ask"
    assert "nobody decided" in decision(ran.out)["permissionDecisionReason"]


async def test_no_decision_in_time_follows_on_timeout_deny(denies: Gate) -> None:
    ran = await command(denies.hook, pre_tool_use("Edit", {"file_path": "/home/alice/shop/deploy/prod.yaml",
                                                           "old_string": "a", "new_string": "b"}))
    assert ran.code == 0, ran.err
    said = decision(ran.out)
    assert said["permissionDecision"] == "deny" and "approval timeout" in said["permissionDecisionReason"]


async def test_the_command_blocks_before_its_own_timeout_and_the_retry_gets_the_decision_once(gate: Gate) -> None:
    slow = pre_tool_use("Bash", {"command": "git push --force origin slow"})
    ran = await command(gate.hook, slow, "tok-alice", 1.5)
    assert ran.code == 2 and ran.out is None
    assert "no decision from Gatehouse within 1.5s" in ran.err and "denied" in ran.err
    assert ran.seconds < 1.5 + 8.0  # the deadline plus the interpreter's start-up on a loaded machine
    request = await pending(gate, "Bash")  # the request stays open after the hook gave up
    await decide(gate, request["id"], {"decision": "approve"})
    again = await command(gate.hook, slow)  # Claude Code retries the same call: answered from the same request
    assert again.code == 0 and decision(again.out)["permissionDecision"] == "allow", again.err
    once_more = asyncio.create_task(command(gate.hook, slow))  # the approval was used: a new request waits
    fresh = await pending(gate, "Bash")
    assert fresh["id"] != request["id"] and not once_more.done()
    await decide(gate, fresh["id"], {"decision": "deny", "reason": "once was enough"})
    assert decision((await once_more).out)["permissionDecision"] == "deny"


async def test_an_unreachable_server_denies_unless_failing_open_is_set(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/hooks/claude-code"
    ran = await command(url, pre_tool_use("Bash", {"command": "git push --force"}))
    assert ran.code == 2 and "cannot reach the Gatehouse server" in ran.err and "denied" in ran.err
    opened = await command(url, pre_tool_use("Bash", {"command": "git push --force"}), "tok-alice", 5, "--fail-open")
    assert opened.code == 0 and opened.out is None and "failing open" in opened.err


async def test_a_bad_token_denies_and_says_so(gate: Gate) -> None:
    for token in ("tok-forged", None):
        ran = await command(gate.hook, pre_tool_use("Bash", {"command": "git push --force origin main"}), token)
        assert ran.code == 2 and "refused this hook's token (HTTP 401)" in ran.err, ran.err


async def test_a_malformed_input_is_refused_and_denied(gate: Gate) -> None:
    async with httpx2.AsyncClient() as http:
        response = await http.post(gate.hook, json={"tool_name": "Bash"}, headers={"authorization": "Bearer tok-alice"})
    assert response.status_code == 400
    ran = await command(gate.hook, {"hook_event_name": "PreToolUse", "tool_name": "Bash"})
    assert ran.code == 2 and "not a PreToolUse hook input" in ran.err


async def test_a_question_is_answered_in_gatehouse_and_claude_reads_the_answer(gate: Gate) -> None:
    asked = {"questions": [{"question": "Which database should the shop use?", "header": "Database",
                            "options": [{"label": "PostgreSQL", "description": "Relational"},
                                        {"label": "SQLite", "description": "One file"}], "multiSelect": False}]}
    call = asyncio.create_task(command(gate.hook, pre_tool_use("AskUserQuestion", asked)))
    request = await pending(gate, "AskUserQuestion", token="tok-alice")  # alice asked: she may answer it herself
    assert "Which database should the shop use? [PostgreSQL | SQLite]" in request["hint"], request["hint"]
    await decide(gate, request["id"], {"decision": "deny", "reason": "PostgreSQL"}, token="tok-alice")
    ran = await call
    assert ran.code == 0, ran.err
    said = decision(ran.out)
    assert said["permissionDecision"] == "deny"
    assert "answered this question through Gatehouse" in said["permissionDecisionReason"]
    assert "PostgreSQL" in said["permissionDecisionReason"]


@pytest.fixture
def odd_server() -> Iterator[str]:
    """A real HTTP server on 127.0.0.1 that is not a gateway: 200 with a body that is no hook output, or 500."""
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length", "0")))
            status, body = (500, b"boom") if self.path.endswith("/fail") else (200, b'{"decision": "yes please"}')
            self.send_response(status)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            return None

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


async def test_an_answer_that_is_no_hook_output_or_an_error_denies(odd_server: str) -> None:
    payload = pre_tool_use("Bash", {"command": "git push --force"})
    odd = await command(odd_server + "/hooks/claude-code", payload)
    assert odd.code == 2 and "not a hook output" in odd.err
    failed = await command(odd_server + "/fail", payload)
    assert failed.code == 2 and "answered HTTP 500" in failed.err
