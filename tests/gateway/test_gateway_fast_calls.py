"""The gateway's fast path for ungated calls (agent_runtime/gateway/fast_calls.py) answers exactly as the MCP SDK's
server does. A real upstream MCP server on 127.0.0.1 and two real ``gatehouse-runtime gateway`` processes in front of
it: one as shipped (the fast path on), one with an OpenTelemetry tracer provider installed, which turns the fast path
off (the SDK's server span must then be recorded), so every request there is the SDK's. The same calls, with the MCP
SDK's own client, give the same results, errors, ``isError`` results, structured content, progress notifications and
the same bytes on the wire; malformed requests are refused alike; a long call turns into an event stream and a
disconnect cancels the call on both. In-process, with the same pieces: an ungated call
never reaches the SDK's session manager and everything else does."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import mcp_types
import pytest
import uvicorn
import yaml
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.transport_security import RequestBodyLimitMiddleware
from pydantic import BaseModel

from agent_runtime.contract.manifests import parse_resource
from agent_runtime.contract.resources import MCPGateway, RemoteMCPServer
from agent_runtime.contract.translator import translate_gateway
from agent_runtime.gateway.fast_calls import FastCalls
from agent_runtime.gateway.server import build_server
from agent_runtime.gateway.upstream import Upstream
from agent_runtime.infra.tasks import cancel_and_wait
from tests.gateway.test_gateway_e2e import RUNTIME_CMD, TOKENS
from tests.support.processes import free_port, running

pytestmark = pytest.mark.e2e

# The SDK path: the same gateway with a tracer provider installed (the fast path steps aside for the SDK's span).
SDK_PATH_CMD = [sys.executable, "-c", "from opentelemetry import trace; from opentelemetry.sdk.trace import "
                "TracerProvider; trace.set_tracer_provider(TracerProvider()); "
                "from agent_runtime.clients.cli import runtime_main; runtime_main()"]


def _manifests(upstream_url: str, tools: str = "echo, add, fails, counts, slow, linger, denied",
               rules: str = '{tool: denied, action: deny}, {tool: echo, when: {arg: text, glob: "secret*"}, action: deny}'
               ) -> str:
    """The upstream and the gateway before it: ``tools`` offered, ``rules`` its approval rules (YAML flow lists)."""
    return f"""
apiVersion: gatehouse.dev/v1alpha1
kind: RemoteMCPServer
metadata: {{name: diff-tools}}
spec: {{url: "{upstream_url}"}}
---
apiVersion: gatehouse.dev/v1alpha1
kind: MCPGateway
metadata: {{name: diff-gate}}
spec:
  upstream: {{name: diff-tools, toolNames: [{tools}]}}
  approval:
    rules: [{rules}]
"""


LINGERED: list[str] = []  # what the upstream's linger tool did


class Sum(BaseModel):
    total: int
    parts: list[int]


def _upstream() -> MCPServer:
    server = MCPServer("differential")

    @server.tool()
    def echo(text: str) -> str:
        """Says ``text`` back."""
        return text

    @server.tool()
    def add(a: int, b: int) -> Sum:
        """Structured content."""
        return Sum(total=a + b, parts=[a, b])

    @server.tool()
    def fails(why: str) -> str:
        """An isError result."""
        raise ValueError(why)

    @server.tool()
    async def counts(n: int, ctx: Context) -> str:
        """Reports progress and logs while it runs."""
        for i in range(n):
            await ctx.report_progress(i + 1, n, f"step {i + 1}")
            await ctx.info(f"counted {i + 1}")
        return f"counted to {n}"

    @server.tool()
    async def slow(seconds: float) -> str:
        """Runs past the SDK's SSE deferral window."""
        await asyncio.sleep(seconds)
        return f"slept {seconds}"

    @server.tool()
    async def linger(tag: str) -> str:
        """Runs 2 s, noting whether it started and whether it finished (the upstream runs in this process)."""
        LINGERED.append(f"{tag} started")
        await asyncio.sleep(2.0)
        LINGERED.append(f"{tag} finished")
        return tag

    @server.tool()
    def denied() -> str:
        """The gateway's policy refuses it."""
        return "ran"

    @server.tool()
    def hidden() -> str:
        """Not offered by the gateway."""
        return "ran"

    return server


class Both:
    def __init__(self, upstream: str, fast: str, sdk: str) -> None:
        self.upstream, self.fast, self.sdk = upstream, fast, sdk


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Both]:
    base = tmp_path_factory.mktemp("fast-calls")
    port = free_port()
    app = _upstream().streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    upstream = f"http://127.0.0.1:{port}/mcp"
    (base / "gateway.yaml").write_text(_manifests(upstream))
    (base / "tokens").write_text(TOKENS)
    ports = {"fast": free_port(), "sdk": free_port()}

    def command(kind: str) -> list[str]:
        return [*(RUNTIME_CMD if kind == "fast" else SDK_PATH_CMD), "gateway", "-f", str(base / "gateway.yaml"),
                "--port", str(ports[kind]), "--api-token-file", str(base / "tokens"),
                "--state-dir", str(base / f"state-{kind}")]

    try:
        with running(command("fast"), ready="gateway diff-gate ready", timeout=60), \
                running(command("sdk"), ready="gateway diff-gate ready", timeout=60):
            yield Both(upstream, *(f"http://127.0.0.1:{ports[k]}/mcp" for k in ("fast", "sdk")))
    finally:
        server.should_exit = True
        thread.join(10)


class Recording(httpx2.AsyncBaseTransport):
    """Keeps each POST's request and its answer as the client received them."""

    def __init__(self) -> None:
        self.inner = httpx2.AsyncHTTPTransport()
        self.exchanges: list[tuple[dict[str, str], bytes, int, str, bytes]] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self.inner.handle_async_request(request)
        body = await response.aread()
        if request.method == "POST":
            self.exchanges.append((dict(request.headers), request.content, response.status_code,
                                   response.headers.get("content-type", ""), body))
        return httpx2.Response(response.status_code, headers=response.headers, content=body, request=request)


@asynccontextmanager
async def recorded(url: str) -> AsyncIterator[tuple[Client, Recording]]:
    wire = Recording()
    async with httpx2.AsyncClient(headers={"Authorization": "Bearer tok-alice"}, transport=wire,
                                  timeout=httpx2.Timeout(30, read=300)) as http, \
            Client(streamable_http_client(url, http_client=http)) as client:
        yield client, wire


def _messages(content_type: str, body: bytes) -> list[Any]:
    """The JSON-RPC messages of an answer, JSON or an event stream."""
    if content_type.startswith("application/json"):
        return [json.loads(body)]
    return [json.loads(line[5:]) for line in body.decode().splitlines() if line.startswith("data:")]


CALLS: list[tuple[str, dict[str, Any]]] = [
    ("echo", {"text": "hello"}),
    ("add", {"a": 2, "b": 3}),  # structured content
    ("fails", {"why": "boom"}),  # an isError result
    ("counts", {"n": 3}),  # upstream progress and log messages during the call
    ("echo", {}),  # the upstream refuses the arguments
    ("echo", {"text": "secret-plan"}),  # the policy refuses these arguments: the SDK's on both
    ("denied", {}),  # refused by the policy
    ("hidden", {}),  # not offered
]


class Told:
    """The progress notifications one call's client was told."""

    def __init__(self) -> None:
        self.seen: list[tuple[float, float | None, str | None]] = []

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.seen.append((progress, total, message))


async def _run(url: str) -> tuple[list[Any], list[Any], list[Any]]:
    """Each call's result (or error), the progress its client was told, and the raw answers on the wire."""
    results: list[Any] = []
    progress: list[Any] = []
    async with recorded(url) as (client, wire):
        await client.list_tools()
        for tool, args in CALLS:
            told = Told()
            try:
                result = await client.call_tool(tool, args, progress_callback=told)
                results.append(result.model_dump(mode="json", by_alias=True))
            except Exception as exc:  # an MCP error: compared as the client reads it
                results.append({"raised": type(exc).__name__, "text": str(exc)})
            progress.append(told.seen)
        raw = [(status, kind, _messages(kind, body)) for headers, sent, status, kind, body in wire.exchanges
               if b'"tools/call"' in sent]
    return results, progress, raw


async def test_the_same_calls_through_the_fast_path_and_the_sdks_server_answer_alike(both: Both) -> None:
    fast, sdk = await _run(both.fast), await _run(both.sdk)
    assert fast[0] == sdk[0]  # results, errors, isError, structured content
    assert fast[1] == sdk[1]  # progress notifications
    assert fast[2] == sdk[2]  # the answers on the wire: status, content type, every JSON-RPC message
    results = fast[0]
    assert results[0]["content"][0]["text"] == "hello" and not results[0]["isError"]
    assert results[1]["structuredContent"] == {"total": 5, "parts": [2, 3]}
    assert results[2]["isError"] and "fails" in results[2]["content"][0]["text"]
    assert results[3]["content"][0]["text"] == "counted to 3"
    assert results[6]["isError"] and results[7]["isError"]
    assert [status for status, _, _ in fast[2]] == [200] * len(CALLS)


async def _slow(url: str) -> tuple[Any, list[tuple[int, str, bytes]]]:
    async with recorded(url) as (client, wire):
        result = await client.call_tool("slow", {"seconds": SLOW})
    return result.model_dump(mode="json", by_alias=True), [(status, kind, body) for _, sent, status, kind, body
                                                          in wire.exchanges if b'"tools/call"' in sent]


SLOW = 16.0  # seconds: past the SDK's 15 s deferral, after which a call's answer is an event stream with pings


async def test_a_call_past_the_deferral_window_becomes_an_event_stream_with_pings_on_both(both: Both) -> None:
    """Decided before forwarding, never mid-stream: a forwarded call that runs long is answered as the SDK answers
    it, ``text/event-stream`` committed after 15 s, kept alive with a ping, ending with the result."""
    (fast, fast_wire), (sdk, sdk_wire) = await asyncio.gather(_slow(both.fast), _slow(both.sdk))
    assert fast == sdk and fast["content"][0]["text"] == f"slept {SLOW}"
    assert [(status, kind, _messages(kind, body)) for status, kind, body in fast_wire] == \
        [(status, kind, _messages(kind, body)) for status, kind, body in sdk_wire]
    (status, kind, body), = fast_wire
    assert status == 200 and kind == "text/event-stream" and body.startswith(b": ping\r\n\r\n"), body[:80]


async def _envelope(url: str) -> tuple[dict[str, str], dict[str, Any]]:
    """The headers and body of a ``tools/call`` as the SDK's client sends it to ``url``."""
    async with recorded(url) as (client, wire):
        await client.call_tool("echo", {"text": "probe"})
    headers, sent, *_ = next(e for e in wire.exchanges if b'"tools/call"' in e[1])
    keep = ("content-type", "accept", "mcp-protocol-version", "mcp-method", "mcp-name", "authorization")
    return {k: v for k, v in headers.items() if k in keep}, json.loads(sent)


def _malformed(headers: dict[str, str], call: dict[str, Any]) -> list[tuple[dict[str, str], bytes]]:
    def body(value: Any) -> bytes:
        return json.dumps(value).encode()

    params = call["params"]
    return [
        (headers, b"{not json"),
        (headers, body([call])),  # a batch
        (headers, body({k: v for k, v in call.items() if k != "id"})),  # a notification
        (headers, body({**call, "params": {**params, "arguments": "not an object"}})),
        (headers, body({**call, "params": {**params, "name": 7}})),
        ({**headers, "mcp-name": "add"}, body(call)),  # the routing header contradicts the body
        ({**headers, "accept": "application/json"}, body(call)),  # no event stream accepted
        ({**headers, "content-type": "text/plain"}, body(call)),
        ({k: v for k, v in headers.items() if k != "mcp-method"}, body(call)),
        (headers, body({**call, "params": {k: v for k, v in params.items() if k != "_meta"}})),  # no envelope
        ({**headers, "mcp-session-id": "not-issued"}, body(call)),
    ]


async def test_malformed_calls_are_refused_alike(both: Both) -> None:
    headers, call = await _envelope(both.fast)
    answers: dict[str, list[tuple[int, str, bytes]]] = {}
    async with httpx2.AsyncClient(timeout=30) as http:
        for side, url in (("fast", both.fast), ("sdk", both.sdk)):
            answers[side] = []
            for sent_headers, content in _malformed(headers, call):
                answer = await http.post(url, content=content, headers=sent_headers)
                answers[side].append((answer.status_code, answer.headers.get("content-type", ""), answer.content))
    assert answers["fast"] == answers["sdk"]
    statuses = [status for status, _, _ in answers["fast"]]
    assert statuses[2] == 202 and all(s >= 400 for n, s in enumerate(statuses) if n != 2), statuses  # 202: a notification


async def test_a_client_that_disconnects_cancels_its_call_on_both(both: Both) -> None:
    """The client goes away mid-call: the gateway drops its upstream exchange, so the upstream cancels the tool,
    on the fast path as on the SDK's."""
    headers, call = await _envelope(both.fast)
    for side, url in (("fast", both.fast), ("sdk", both.sdk)):
        body = {**call, "params": {**call["params"], "name": "linger", "arguments": {"tag": side}}}
        async with httpx2.AsyncClient(timeout=30) as http:
            posted = asyncio.create_task(http.post(url, json=body, headers={**headers, "mcp-name": "linger"}))
            for _ in range(100):
                if f"{side} started" in LINGERED:
                    break
                await asyncio.sleep(0.05)
            posted.cancel()  # the connection is closed under the waiting call
            with contextlib.suppress(asyncio.CancelledError):
                await posted
    await asyncio.sleep(3.0)  # past the tool's 2 s, had it not been cancelled
    assert LINGERED == ["fast started", "sdk started"], LINGERED


# In-process: which requests the SDK's session manager serves.

class Watched:
    """The SDK's session manager, counting the requests that reach it."""

    def __init__(self, manager: Any) -> None:
        self.manager, self.security_settings, self.reached = manager, manager.security_settings, 0

    async def handle_request(self, scope: Any, receive: Any, send: Any) -> None:
        self.reached += 1
        await self.manager.handle_request(scope, receive, send)


async def test_an_ungated_call_is_answered_without_the_sdks_server_and_everything_else_with_it(both: Both) -> None:
    docs = _manifests(both.upstream, "echo, denied", "{tool: denied, action: deny}")
    remote, gateway = (parse_resource(d) for d in yaml.safe_load_all(docs))
    assert isinstance(remote, RemoteMCPServer) and isinstance(gateway, MCPGateway)
    config = translate_gateway(gateway, {"diff-tools": remote})
    assert config.upstream is not None
    upstream = Upstream(config.upstream)
    server = build_server(config, upstream)
    server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    sdk = Watched(server.session_manager)
    app = RequestBodyLimitMiddleware(FastCalls(config, upstream, server, sdk),  # type: ignore[arg-type]
                                     server.session_manager.max_request_body_size)
    keeper = asyncio.create_task(upstream.run())
    try:
        async with server.session_manager.run(), \
                httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1:8080") as http, \
                Client(streamable_http_client("http://127.0.0.1:8080/mcp", http_client=http)) as client:
            await client.list_tools()
            listed = sdk.reached
            texts = [(await client.call_tool("echo", {"text": f"hi {n}"})).content[0] for n in range(3)]
            ungated = sdk.reached
            refused = await client.call_tool("denied", {})
            unknown = await client.call_tool("hidden", {})
    finally:
        await cancel_and_wait((keeper,))
    assert [t.text for t in texts if isinstance(t, mcp_types.TextContent)] == ["hi 0", "hi 1", "hi 2"]
    assert listed >= 1 and ungated == listed  # the ungated calls: not one reached the SDK's server
    assert refused.is_error and unknown.is_error and sdk.reached == ungated + 2
