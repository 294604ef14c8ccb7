"""The gateway's forwarding path as the upstream sees it: a real MCP SDK client (``mcp.Client`` over streamable HTTP)
calls through a real ``gatehouse-runtime gateway`` process to an upstream on 127.0.0.1 that counts the JSON-RPC
methods it receives. An ungated call costs the upstream one ``tools/call`` and nothing else: the MCP SDK's
``Mcp-Param-*`` header check reads the tool's schema from the gateway's last listing instead of a ``tools/list``
upstream per call (what made a call through the gateway cost twice a direct one; docs/gateway.md "Speed")."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
import uvicorn
from mcp.server.mcpserver import MCPServer
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agent_runtime.contract.agent_config import McpServerConfig
from agent_runtime.gateway.upstream import Upstream, _decline
from agent_runtime.infra.tasks import cancel_and_wait
from tests.gateway.test_gateway_e2e import RUNTIME_CMD, TOKENS, _manifests, _text, connected
from tests.support.processes import free_port, running

pytestmark = pytest.mark.e2e


class Counting:
    """ASGI: counts the JSON-RPC method of every POST the upstream receives and keeps its headers and body, then
    serves it unchanged."""

    def __init__(self, app: ASGIApp) -> None:
        self.app, self.methods = app, Counter[str]()
        self.posts: list[tuple[dict[str, str], Any]] = []
        self.url = ""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            return await self.app(scope, receive, send)
        chunks: list[Message] = []
        while True:
            message = await receive()
            chunks.append(message)
            if message["type"] != "http.request" or not message.get("more_body"):
                break
        try:
            body = json.loads(b"".join(m.get("body", b"") for m in chunks))
            self.methods[body.get("method", "?")] += 1
            self.posts.append(({k.decode(): v.decode() for k, v in scope["headers"]}, body))
        except ValueError:
            self.methods["?"] += 1

        async def replay() -> Message:
            return chunks.pop(0) if chunks else await receive()

        await self.app(scope, replay, send)


def _upstream() -> MCPServer:
    server = MCPServer("echo")

    @server.tool()
    def echo(text: str) -> str:
        """Says ``text`` back."""
        return text

    return server


@pytest.fixture(scope="module")
def counted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Counting]]:
    base = tmp_path_factory.mktemp("forwarding")
    port, gateway_port = free_port(), free_port()
    app = Counting(_upstream().streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1"))
    app.url = f"http://127.0.0.1:{port}/mcp"
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    (base / "gateway.yaml").write_text(_manifests(f"http://127.0.0.1:{port}/mcp", "echo-tools", "echo-gate"))
    (base / "tokens").write_text(TOKENS)
    gateway = [*RUNTIME_CMD, "gateway", "-f", str(base / "gateway.yaml"), "--port", str(gateway_port),
               "--api-token-file", str(base / "tokens"), "--state-dir", str(base / "state")]
    try:
        with running(gateway, ready="gateway echo-gate ready", timeout=60):
            yield f"http://127.0.0.1:{gateway_port}/mcp", app
    finally:
        server.should_exit = True
        thread.join(10)


async def test_an_ungated_call_costs_the_upstream_one_tools_call_and_nothing_else(counted: tuple[str, Counting]) -> None:
    url, upstream = counted
    async with connected(url) as client:
        await client.list_tools()  # what a client does first; it may reach the upstream
        before = Counter(upstream.methods)
        texts = [_text(await client.call_tool("echo", {"text": f"hello {n}"})) for n in range(5)]
        during = upstream.methods - before
    assert texts == [f"hello {n}" for n in range(5)]
    assert dict(during) == {"tools/call": 5}, dict(during)


async def test_a_listing_through_the_gateway_still_asks_the_upstream(counted: tuple[str, Counting]) -> None:
    """``tools/list`` shows the upstream's tools as they are now: every listing is forwarded."""
    url, upstream = counted
    async with connected(url) as client:
        before = upstream.methods["tools/list"]
        listed = [t.name for t in (await client.list_tools()).tools]
    assert listed == ["echo"] and upstream.methods["tools/list"] == before + 1


def _last_call(upstream: Counting) -> tuple[dict[str, str], Any]:
    found: tuple[dict[str, str], Any] = next(p for p in reversed(upstream.posts) if p[1].get("method") == "tools/call")
    return found


ROUTING = ("content-type", "accept", "mcp-protocol-version", "mcp-method", "mcp-name")


async def test_the_upstream_gets_the_call_the_sdks_own_client_sends(counted: tuple[str, Counting]) -> None:
    """The gateway sends its calls as single HTTP exchanges (agent_runtime/gateway/exchange.py) under the SDK's
    ``ClientSession``: the upstream receives the same request as from the SDK's own client set up as the gateway's
    (its capabilities: elicitation), and no credential of the gateway's client."""
    url, upstream = counted
    async with connected(url) as client:
        await client.call_tool("echo", {"text": "same"})
    through_headers, through = _last_call(upstream)
    async with connected(upstream.url, token=None, cache=None, elicitation_callback=_decline) as direct:
        await direct.call_tool("echo", {"text": "same"})
    direct_headers, sent = _last_call(upstream)
    assert direct_headers is not through_headers
    assert {**through, "id": 0} == {**sent, "id": 0}
    assert through["params"]["arguments"] == {"text": "same"} and through["method"] == "tools/call"
    assert {k: through_headers.get(k) for k in ROUTING} == {k: direct_headers.get(k) for k in ROUTING}
    assert through_headers["mcp-protocol-version"] == "2026-07-28"
    assert "authorization" not in through_headers


class ForwardProxy:
    """An HTTP forward proxy on 127.0.0.1 (``HTTP_PROXY``): relays the bytes both ways and keeps what clients sent."""

    def __init__(self) -> None:
        self.sent = bytearray()  # every byte clients sent through it, requests in absolute form
        self.url = ""

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, keep: bool) -> None:
        try:
            while data := await reader.read(65536):
                if keep:
                    self.sent += data
                writer.write(data)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n")
        self.sent += head
        target = urlsplit(head.decode().split(" ")[1])
        up_reader, up_writer = await asyncio.open_connection(target.hostname, target.port)
        up_writer.write(head)
        await asyncio.gather(self._relay(reader, up_writer, True), self._relay(up_reader, writer, False))

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[ForwardProxy]:
        server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        async with server:
            yield self


def _bodies(sent: bytes, url: str) -> list[bytes]:
    """The bodies of the POSTs to ``url`` in a proxy's stream (each with a content-length)."""
    found = []
    for request in sent.split(f"POST {url} HTTP/1.1\r\n".encode())[1:]:
        head, _, rest = request.partition(b"\r\n\r\n")
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
        found.append(rest[:length])
    return found


async def test_the_upstream_is_reached_through_the_proxy_the_environment_names(
        counted: tuple[str, Counting], monkeypatch: pytest.MonkeyPatch) -> None:
    """``HTTP_PROXY`` is honoured by the upstream client as httpx2 honours it, for the negotiation and for the calls
    sent as single exchanges alike."""
    _, upstream_app = counted
    async with ForwardProxy().serving() as proxy:
        for name in ("HTTP_PROXY", "http_proxy"):
            monkeypatch.setenv(name, proxy.url)
        for name in ("NO_PROXY", "no_proxy"):
            monkeypatch.delenv(name, raising=False)
        upstream = Upstream(McpServerConfig(name="echo-tools", url=upstream_app.url, tool_names=[]))
        keeper = asyncio.create_task(upstream.run())
        try:
            result = await upstream.call_tool("echo", {"text": "via the proxy"})
        finally:
            await cancel_and_wait((keeper,))
    assert _text(result) == "via the proxy"  # type: ignore[arg-type]
    through = [json.loads(body).get("method") for body in _bodies(bytes(proxy.sent), upstream_app.url)]
    assert through[0] == "server/discover" and through[-2:] == ["tools/list", "tools/call"], through
