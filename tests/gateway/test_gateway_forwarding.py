"""The gateway's forwarding path as the upstream sees it: a real MCP SDK client (``mcp.Client`` over streamable HTTP)
calls through a real ``gatehouse-runtime gateway`` process to an upstream on 127.0.0.1 that counts the JSON-RPC
methods it receives. An ungated call costs the upstream one ``tools/call`` and nothing else: the MCP SDK's
``Mcp-Param-*`` header check reads the tool's schema from the gateway's last listing instead of a ``tools/list``
upstream per call (what made a call through the gateway cost twice a direct one; docs/gateway.md "Speed")."""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterator

import pytest
import uvicorn
from mcp.server.mcpserver import MCPServer
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tests.gateway.test_gateway_e2e import RUNTIME_CMD, TOKENS, _manifests, _text, connected
from tests.support.processes import free_port, running

pytestmark = pytest.mark.e2e


class Counting:
    """ASGI: counts the JSON-RPC method of every POST the upstream receives, then serves it unchanged."""

    def __init__(self, app: ASGIApp) -> None:
        self.app, self.methods = app, Counter[str]()

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
            self.methods[json.loads(b"".join(m.get("body", b"") for m in chunks)).get("method", "?")] += 1
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
