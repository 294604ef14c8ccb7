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
from mcp.shared.exceptions import MCPError

from tests.support.processes import GATEHOUSE_CMD, free_port, running

pytestmark = pytest.mark.e2e

RUNTIME_CMD = [sys.executable, "-c", "from agent_runtime.cli import runtime_main; runtime_main()"]
TOKENS = "alice:groups=sre:tok-alice\nbob:tok-bob\n"
OFFERED = ["read_file", "write_file", "delete_file", "put_file"]  # list_dir is the upstream's, not offered


def _manifests(upstream_url: str, server: str, gateway: str, extra_server: str = "", upstream: str = "") -> str:
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
"""


class Served:
    def __init__(self, url: str, upstream: str, sandbox: Path, journal: Path) -> None:
        self.url, self.upstream, self.sandbox, self.journal = url, upstream, sandbox, journal

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
    (base / "gateway.yaml").write_text(_manifests(upstream, "file-tools", "files-gate", upstream=offered))
    tools = [*GATEHOUSE_CMD, "demo-tools", "--sandbox", str(sandbox), "--port", str(tools_port), "--journal", str(journal)]
    gateway = [*RUNTIME_CMD, "gateway", "-f", str(base / "gateway.yaml"), "--port", str(gateway_port),
               "--api-token-file", str(base / "tokens")]
    with running(tools, ready="demo-tools ready"), running(gateway, ready="gateway files-gate ready", timeout=60):
        yield Served(f"http://127.0.0.1:{gateway_port}/mcp", upstream, sandbox, journal)


@asynccontextmanager
async def connected(url: str, token: str | None = "tok-alice", **options: Any) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers) as http:
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


async def test_a_gated_call_does_not_run_and_the_model_reads_why(served: Served) -> None:
    """Until held calls land (Phase B), a gated call fails closed: an isError result naming the approval it needs."""
    (served.sandbox / "keep.txt").write_text("keep me")
    before = len(served.ran())
    async with connected(served.url) as client:
        result = await client.call_tool("delete_file", {"path": "keep.txt"})
    assert result.is_error and "needs a human's approval" in _text(result) and "was not run" in _text(result)
    assert (served.sandbox / "keep.txt").exists() and served.ran()[before:] == []


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
