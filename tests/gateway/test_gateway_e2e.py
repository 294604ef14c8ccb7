"""The MCP gateway (``gatehouse-runtime gateway``, docs/gateway.md) as a user meets it: real processes on 127.0.0.1 —
the demo file tools as the upstream, the gateway in front of them — and a real MCP SDK client (``mcp.Client``, a
``ClientSession`` over streamable HTTP) calling through the gateway with a bearer token.

The upstream's journal (one fsync-ed line per call that ran) is what says whether a call reached the tools."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import mcp_types
import pytest
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from tests.support.processes import GATEHOUSE_CMD, free_port, running

pytestmark = pytest.mark.e2e

RUNTIME_CMD = [sys.executable, "-c", "from agent_runtime.clients.cli import runtime_main; runtime_main()"]
TOKENS = "alice:groups=sre:tok-alice\nbob:tok-bob\ncarol:groups=sre:tok-carol\n"
OFFERED = ["read_file", "write_file", "delete_file", "put_file"]  # list_dir is the upstream's, not offered


def _manifests(upstream_url: str, server: str, gateway: str, extra_server: str = "", upstream: str = "",
               approval: str = "") -> str:
    return f"""
apiVersion: gatehouse.dev/v1alpha1
kind: RemoteMCPServer
metadata: {{name: {server}}}
spec:
  url: {upstream_url}
{extra_server}
---
apiVersion: gatehouse.dev/v1alpha1
kind: MCPGateway
metadata: {{name: {gateway}}}
spec:
  upstream: {upstream or f'{{name: {server}}}'}
  approval:
    rules: [{{tool: read_file, when: {{arg: path, glob: "**/.env*"}}, action: deny}}]
{approval}
"""


class Served:
    def __init__(self, url: str, upstream: str, sandbox: Path, journal: Path) -> None:
        self.url, self.upstream, self.sandbox, self.journal = url, upstream, sandbox, journal
        self.base = url.removesuffix("mcp")  # the gateway's REST API: {base}approvals

    def ran(self) -> list[dict[str, Any]]:
        if not self.journal.exists():
            return []
        return [json.loads(line) for line in self.journal.read_text().splitlines()]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    base = tmp_path_factory.mktemp("gateway")
    sandbox, journal = base / "sandbox", base / "journal.jsonl"
    sandbox.mkdir()
    (sandbox / "notes.txt").write_text("hello")
    (base / "tokens").write_text(TOKENS)
    tools_port, gateway_port = free_port(), free_port()
    upstream = f"http://127.0.0.1:{tools_port}/mcp"
    offered = f"{{name: file-tools, toolNames: [{', '.join(OFFERED)}], requireApproval: [delete_file]}}"
    approval = ("    timeout: 1m\n    editableTools: [delete_file]\n"
                "    approvers: {groups: [sre], allowRequester: false}")  # carol (sre) may not approve her own calls
    (base / "gateway.yaml").write_text(_manifests(upstream, "file-tools", "files-gate", upstream=offered, approval=approval))
    tools = [*GATEHOUSE_CMD, "demo-tools", "--sandbox", str(sandbox), "--port", str(tools_port), "--journal", str(journal)]
    gateway = [*RUNTIME_CMD, "gateway", "-f", str(base / "gateway.yaml"), "--port", str(gateway_port),
               "--api-token-file", str(base / "tokens"), "--state-dir", str(base / "state"), "--keepalive", "0.3s"]
    with running(tools, ready="demo-tools ready"), running(gateway, ready="gateway files-gate ready", timeout=60):
        yield Served(f"http://127.0.0.1:{gateway_port}/mcp", upstream, sandbox, journal)


@asynccontextmanager
async def connected(url: str, token: str | None = "tok-alice", **options: Any) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with create_mcp_http_client(headers=headers) as http:  # the SDK's own timeouts (read: 300 s)
        async with Client(streamable_http_client(url, http_client=http), **options) as client:
            yield client


def _text(result: mcp_types.CallToolResult) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)


async def test_tools_list_shows_the_upstreams_tools_the_gateway_offers(served: Served) -> None:
    async with connected(served.url) as client:
        through = {t.name: t for t in (await client.list_tools()).tools}
    async with Client(served.upstream) as direct:
        upstream = {t.name: t for t in (await direct.list_tools()).tools}
    assert sorted(through) == sorted(OFFERED) and "list_dir" in upstream
    assert through["write_file"].input_schema == upstream["write_file"].input_schema  # as the upstream describes it


async def test_an_ungated_call_runs_once_and_returns_the_upstreams_result(served: Served) -> None:
    before = len(served.ran())
    async with connected(served.url) as client:
        result = await client.call_tool("write_file", {"path": "ungated.txt", "content": "through the gateway"})
    assert not result.is_error, _text(result)
    assert (served.sandbox / "ungated.txt").read_text() == "through the gateway"
    assert [(c["tool"], c["args"]["path"]) for c in served.ran()[before:]] == [("write_file", "ungated.txt")]


async def pending(served: Served, token: str = "tok-alice", tool: str = "delete_file") -> dict[str, Any]:
    """The one pending request for ``tool``, as ``GET /approvals`` shows it to an approver (waiting for it to appear)."""
    async with httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"}) as http:
        for _ in range(200):
            listed = (await http.get(served.base + "approvals")).json()
            found = [a for a in listed["approvals"] if a["tool"] == tool]
            if found:
                (one,) = found
                return dict(one)
            await asyncio.sleep(0.05)
    raise AssertionError(f"no pending {tool} request appeared")


async def decide(served: Served, request_id: str, token: str, body: dict[str, Any]) -> httpx2.Response:
    async with httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"}) as http:
        return await http.post(f"{served.base}approvals/{request_id}/decision", json=body,
                               headers={"idempotency-key": f"k-{request_id}-{token}-{body['decision']}"})


async def held_call(served: Served, token: str, tool: str, args: dict[str, Any], **options: Any) -> asyncio.Task[Any]:
    async def call() -> mcp_types.CallToolResult:
        async with connected(served.url, token=token, **options) as client:
            return await client.call_tool(tool, args)

    return asyncio.create_task(call())


async def test_a_gated_call_waits_is_approved_over_rest_and_runs_once(served: Served) -> None:
    (served.sandbox / "gone.txt").write_text("bye")
    before = len(served.ran())
    call = await held_call(served, "tok-bob", "delete_file", {"path": "gone.txt"})
    request = await pending(served)
    assert request["requested_by"] == "bob" and not call.done() and served.ran()[before:] == []
    answer = await decide(served, request["id"], "tok-alice", {"decision": "approve", "reason": "fine"})
    assert answer.status_code == 200, answer.text
    result = await asyncio.wait_for(call, 30)
    assert not result.is_error, _text(result)
    assert not (served.sandbox / "gone.txt").exists()
    assert [(c["tool"], c["args"]) for c in served.ran()[before:]] == [("delete_file", {"path": "gone.txt"})]
    again = await decide(served, request["id"], "tok-carol", {"decision": "approve"})
    assert again.status_code == 409 and [c["tool"] for c in served.ran()[before:]] == ["delete_file"]  # once


async def test_a_waiting_client_gets_progress_notifications_until_the_decision(served: Served) -> None:
    (served.sandbox / "watched.txt").write_text("w")
    told: list[str] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        told.append(message or "")

    async def call() -> mcp_types.CallToolResult:
        async with connected(served.url, token="tok-bob") as client:
            return await client.call_tool("delete_file", {"path": "watched.txt"}, progress_callback=progress)

    waiting = asyncio.create_task(call())
    request = await pending(served)
    for _ in range(100):
        if len(told) >= 2:
            break
        await asyncio.sleep(0.1)
    assert len(told) >= 2 and request["id"] in told[0] and "waiting for a human's approval" in told[0]
    assert (await decide(served, request["id"], "tok-alice", {"decision": "approve"})).status_code == 200
    assert not (await asyncio.wait_for(waiting, 30)).is_error


async def test_a_denied_call_is_an_error_with_the_reason(served: Served) -> None:
    (served.sandbox / "kept.txt").write_text("keep")
    before = len(served.ran())
    call = await held_call(served, "tok-bob", "delete_file", {"path": "kept.txt"})
    request = await pending(served)
    denial = {"decision": "deny", "reason": "we still need it"}
    assert (await decide(served, request["id"], "tok-alice", denial)).status_code == 200
    result = await asyncio.wait_for(call, 30)
    assert result.is_error and "we still need it" in _text(result) and "not run" in _text(result)
    assert (served.sandbox / "kept.txt").exists() and served.ran()[before:] == []


async def test_an_edited_call_runs_with_the_approvers_arguments(served: Served) -> None:
    (served.sandbox / "asked-for.txt").write_text("a")
    (served.sandbox / "instead.txt").write_text("b")
    before = len(served.ran())
    call = await held_call(served, "tok-bob", "delete_file", {"path": "asked-for.txt"})
    request = await pending(served)
    body = {"decision": "approve", "arguments": {"path": "instead.txt"}, "args_hash": request["args_hash"]}
    assert (await decide(served, request["id"], "tok-alice", body)).status_code == 200
    result = await asyncio.wait_for(call, 30)
    assert not result.is_error, _text(result)
    assert (served.sandbox / "asked-for.txt").exists() and not (served.sandbox / "instead.txt").exists()
    assert [c["args"] for c in served.ran()[before:]] == [{"path": "instead.txt"}]


async def test_a_requester_who_may_not_decide_their_own_call_is_refused(served: Served) -> None:
    (served.sandbox / "carols.txt").write_text("c")
    call = await held_call(served, "tok-carol", "delete_file", {"path": "carols.txt"})
    request = await pending(served, token="tok-carol")
    refused = await decide(served, request["id"], "tok-carol", {"decision": "approve"})
    assert refused.status_code == 403, refused.text
    assert not call.done() and (served.sandbox / "carols.txt").exists()
    assert (await decide(served, request["id"], "tok-alice", {"decision": "approve"})).status_code == 200
    assert not (await asyncio.wait_for(call, 30)).is_error and not (served.sandbox / "carols.txt").exists()


async def test_a_client_whose_timeout_is_shorter_than_the_wait_retries_and_gets_the_result(served: Served) -> None:
    """The client gives up before anyone decides; its retry of the same call finds the same request (no second one),
    and gets the result once approved. The approval alone, with nobody waiting, runs nothing."""
    (served.sandbox / "slow.txt").write_text("s")
    before = len(served.ran())
    first = await held_call(served, "tok-bob", "delete_file", {"path": "slow.txt"}, read_timeout_seconds=1.0)
    request = await pending(served)
    with pytest.raises(Exception):  # noqa: B017 - the SDK's own timeout error, whatever its class
        await asyncio.wait_for(first, 30)
    assert (await decide(served, request["id"], "tok-alice", {"decision": "approve"})).status_code == 200
    await asyncio.sleep(1.0)
    assert served.ran()[before:] == [] and (served.sandbox / "slow.txt").exists()  # nobody waits: nothing ran
    retry = await held_call(served, "tok-bob", "delete_file", {"path": "slow.txt"})
    result = await asyncio.wait_for(retry, 30)
    assert not result.is_error, _text(result)
    assert [c["args"] for c in served.ran()[before:]] == [{"path": "slow.txt"}]


async def test_a_call_the_policy_denies_is_an_error_with_the_reason(served: Served) -> None:
    (served.sandbox / ".env").write_text("TOKEN=secret")
    before = len(served.ran())
    async with connected(served.url) as client:
        result = await client.call_tool("read_file", {"path": "config/../.env"})
    assert result.is_error and "refused by policy" in _text(result) and "**/.env*" in _text(result)
    assert "secret" not in _text(result) and served.ran()[before:] == []


async def test_a_tool_the_gateway_does_not_offer_never_reaches_the_upstream(served: Served) -> None:
    before = len(served.ran())
    async with connected(served.url) as client:
        result = await client.call_tool("list_dir", {"path": ""})
    assert result.is_error and "not offered by this gateway" in _text(result)
    assert served.ran()[before:] == []


@pytest.mark.parametrize("token", [None, "tok-wrong"])
async def test_every_caller_authenticates(served: Served, token: str | None) -> None:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    async with httpx2.AsyncClient() as http:
        answer = await http.post(served.url, json=body, headers={**headers, "accept": "application/json, text/event-stream"})
    assert answer.status_code == 401 and answer.headers["www-authenticate"].startswith("Bearer")


async def test_an_mcp_session_belongs_to_the_principal_that_opened_it(served: Served) -> None:
    accept = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
    async with httpx2.AsyncClient() as http:
        opened = await http.post(served.url, json=init, headers={**accept, "authorization": "Bearer tok-alice"})
        session = opened.headers["mcp-session-id"]
        alice = {**accept, "authorization": "Bearer tok-alice", "mcp-session-id": session,
                 "mcp-protocol-version": "2025-06-18"}
        await http.post(served.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=alice)
        bobs = await http.post(served.url, json=listing, headers={**alice, "authorization": "Bearer tok-bob"})
        alices = await http.post(served.url, json=listing, headers=alice)
        invented = await http.post(served.url, json=listing, headers={**alice, "mcp-session-id": "not-issued"})
    assert bobs.status_code == 404 and "write_file" not in bobs.text
    assert alices.status_code == 200 and "write_file" in alices.text
    assert invented.status_code == 404


async def test_an_upstream_question_is_relayed_to_the_client_and_its_answer_back(served: Served) -> None:
    """put_file asks (MCP elicitation) before it overwrites: the client answers through the gateway."""
    (served.sandbox / "asked.txt").write_text("old")
    asked: list[str] = []

    async def answer(_: Any, params: mcp_types.ElicitRequestParams) -> mcp_types.ElicitResult:
        asked.append(params.message)
        return mcp_types.ElicitResult(action="accept", content={"overwrite": True})

    async with connected(served.url, elicitation_callback=answer) as client:
        result = await client.call_tool("put_file", {"path": "asked.txt", "content": "new"})
    assert not result.is_error, _text(result)
    assert len(asked) == 1 and (served.sandbox / "asked.txt").read_text() == "new"


# -- the gateway's own credentials, resources and prompts: an upstream that shows what it was sent -----------------


def _recorder() -> MCPServer:
    server = MCPServer("recorder")

    @server.tool()
    async def whoami(ctx: Context) -> str:
        """The Authorization header this call arrived with."""
        return (ctx.headers or {}).get("authorization", "<none>")

    @server.resource("memo://secret")
    def secret() -> str:
        return "a resource"

    @server.prompt()
    def greet() -> str:
        return "a prompt"

    return server


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    base = tmp_path_factory.mktemp("recorder")
    port, gateway_port = free_port(), free_port()
    app = _recorder().streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    headers = "  headersFrom: [{name: Authorization, secretKeyRef: {name: recorder-auth, key: header}}]"
    (base / "gateway.yaml").write_text(_manifests(f"http://127.0.0.1:{port}/mcp", "recorder", "rec-gate", headers))
    (base / "tokens").write_text(TOKENS)
    gateway = [*RUNTIME_CMD, "gateway", "-f", str(base / "gateway.yaml"), "--port", str(gateway_port),
               "--api-token-file", str(base / "tokens")]
    with pytest.MonkeyPatch.context() as env:
        env.setenv("GATEHOUSE_MCP_RECORDER_AUTHORIZATION", "Bearer the-gateways-own")  # translator.env_name
        with running(gateway, ready="gateway rec-gate ready", timeout=60):
            yield f"http://127.0.0.1:{gateway_port}/mcp"
    server.should_exit = True
    thread.join(10)


async def test_the_clients_credential_never_reaches_the_upstream(recorded: str) -> None:
    async with connected(recorded, token="tok-alice") as client:
        result = await client.call_tool("whoami", {})
    assert _text(result) == "Bearer the-gateways-own"


async def test_resources_and_prompts_are_not_offered(recorded: str) -> None:
    async with connected(recorded) as client:
        assert client.server_capabilities.resources is None and client.server_capabilities.prompts is None
        for ask in (client.list_resources(), client.read_resource("memo://secret"), client.list_prompts()):
            with pytest.raises(MCPError):
                await asyncio.wait_for(ask, 30)


async def test_kill_9_while_a_call_waits_the_retry_finds_its_request_and_it_runs_once(
    served: Served, tmp_path: Path,
) -> None:
    """The held call is in the gateway's database: after a kill -9 and a restart the client's retry waits on the same
    request (no second one), and the approval runs the call once."""
    port = free_port()
    offered = f"{{name: file-tools, toolNames: [{', '.join(OFFERED)}], requireApproval: [delete_file]}}"
    (tmp_path / "gateway.yaml").write_text(_manifests(served.upstream, "file-tools", "files-gate", upstream=offered,
                                                      approval="    approvers: {groups: [sre]}"))
    (tmp_path / "tokens").write_text(TOKENS)
    args = [*RUNTIME_CMD, "gateway", "-f", str(tmp_path / "gateway.yaml"), "--port", str(port),
            "--api-token-file", str(tmp_path / "tokens"), "--state-dir", str(tmp_path / "state")]
    restarted = Served(f"http://127.0.0.1:{port}/mcp", served.upstream, served.sandbox, served.journal)
    (served.sandbox / "survives.txt").write_text("x")
    before = len(served.ran())
    with running(args, ready="gateway files-gate ready", timeout=60) as proc:
        first = await held_call(restarted, "tok-bob", "delete_file", {"path": "survives.txt"})
        request = await pending(restarted)
        proc.kill()  # SIGKILL: nothing is flushed or closed
        proc.wait(10)
        with pytest.raises(Exception):  # noqa: B017 - the cut connection, as the SDK reports it
            await asyncio.wait_for(first, 30)
    with running(args, ready="gateway files-gate ready", timeout=60):
        retry = await held_call(restarted, "tok-bob", "delete_file", {"path": "survives.txt"})
        assert (await pending(restarted))["id"] == request["id"]  # the same request, not a second one
        await asyncio.sleep(0.5)
        assert not retry.done()
        assert (await decide(restarted, request["id"], "tok-alice", {"decision": "approve"})).status_code == 200
        result = await asyncio.wait_for(retry, 30)
    assert not result.is_error, _text(result)
    assert [c["args"] for c in served.ran()[before:]] == [{"path": "survives.txt"}]


async def test_sse_responses_carry_event_ids_so_a_cut_stream_can_resume(served: Served) -> None:
    """On the handshake-era protocol the gateway answers a call as an SSE stream whose events have ids
    (agent_runtime/gateway/events.py): what the Python SDK needs to resume a cut stream with Last-Event-ID."""
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json",
               "authorization": "Bearer tok-alice"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "read_file", "arguments": {"path": "notes.txt"}}}
    async with httpx2.AsyncClient(timeout=30) as http:
        opened = await http.post(served.url, json=init, headers=headers)
        session = {**headers, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
        await http.post(served.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
        answer = await http.post(served.url, json=call, headers=session)
    assert answer.headers["content-type"].startswith("text/event-stream")
    ids = [line.removeprefix("id:").strip() for line in answer.text.splitlines() if line.startswith("id:")]
    assert ids and all(ids) and '"hello"' in answer.text


async def test_an_approved_call_nobody_waits_for_never_runs_after_its_lifetime(served: Served, tmp_path: Path) -> None:
    """Approved while its client was away, then not retried within the request's lifetime (approval.timeout): a retry
    after that is a new request, and the old approval runs nothing."""
    port = free_port()
    offered = f"{{name: file-tools, toolNames: [{', '.join(OFFERED)}], requireApproval: [delete_file]}}"
    (tmp_path / "gateway.yaml").write_text(_manifests(served.upstream, "file-tools", "files-gate", upstream=offered,
                                                      approval="    timeout: 3s\n    approvers: {groups: [sre]}"))
    (tmp_path / "tokens").write_text(TOKENS)
    args = [*RUNTIME_CMD, "gateway", "-f", str(tmp_path / "gateway.yaml"), "--port", str(port),
            "--api-token-file", str(tmp_path / "tokens"), "--state-dir", str(tmp_path / "state")]
    short = Served(f"http://127.0.0.1:{port}/mcp", served.upstream, served.sandbox, served.journal)
    (served.sandbox / "late.txt").write_text("l")
    before = len(served.ran())
    with running(args, ready="gateway files-gate ready", timeout=60):
        first = await held_call(short, "tok-bob", "delete_file", {"path": "late.txt"}, read_timeout_seconds=0.5)
        request = await pending(short)
        with pytest.raises(Exception):  # noqa: B017 - the client's own timeout
            await asyncio.wait_for(first, 30)
        assert (await decide(short, request["id"], "tok-alice", {"decision": "approve"})).status_code == 200
        await asyncio.sleep(3.5)  # past the request's lifetime, nobody waiting
        late = await held_call(short, "tok-bob", "delete_file", {"path": "late.txt"})
        again = await pending(short)
        assert again["id"] != request["id"] and not late.done()
        assert (await decide(short, again["id"], "tok-alice", {"decision": "deny", "reason": "too late"})).status_code == 200
        result = await asyncio.wait_for(late, 30)
    assert result.is_error and "too late" in _text(result)
    assert served.ran()[before:] == [] and (served.sandbox / "late.txt").exists()
