"""The gateway's own MCP client to its upstream (the RemoteMCPServer ``spec.upstream`` names).

It authenticates with the upstream's own headers (``headersFrom``, read from the environment as for an Agent's tool
servers) and never with anything a client sent: MCP forbids passing a client's token through, and the client's
credential is for the gateway only. One connection is shared by every client and reopened after it fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Mapping
from typing import Any

import aiohttp
import httpx2
import mcp_types
from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT

from agent_runtime.contract.agent_config import McpServerConfig
from agent_runtime.gateway.exchange import HttpExchanges
from agent_runtime.gateway.wire import AiohttpTransport, env_proxy
from agent_runtime.server.toolsets import KEEPALIVE_SECONDS, _headers

log = logging.getLogger(__name__)


async def _decline(context: Any, params: mcp_types.ElicitRequestParams) -> mcp_types.ElicitResult | mcp_types.ErrorData:
    """Declares that the gateway can carry an upstream's questions (MCP elicitation): on the 2026-07-28 protocol a
    question is an ``input_required`` result, handed to the client as it came (``allow_input_required``), so this is
    never called. On older protocols the upstream asks the gateway's own session mid-call, which no client could
    answer: declined, and the upstream decides what a declined question means (the demo's put_file: not overwritten)."""
    return mcp_types.ElicitResult(action="decline")


class Upstream:
    """The connection lives in one task of its own (:meth:`run`, started by the app's lifespan): the MCP client's
    streams are anyio task groups, which must be left in the task that entered them, so a request's task only asks
    for the connection and waits for it."""

    def __init__(self, server: McpServerConfig, env: Mapping[str, str] | None = None) -> None:
        self.server = server
        self._headers = _headers(server, os.environ if env is None else env)  # a missing Secret: refused at start
        self._client: ClientSession | None = None
        self._attempt: asyncio.Future[ClientSession] | None = None  # the connection being opened, or open
        self._asks: asyncio.Queue[asyncio.Future[ClientSession]] = asyncio.Queue()
        self._broken = asyncio.Event()
        self._schemas: dict[str, dict[str, Any]] = {}  # tool -> input schema, from the upstream's last listing

    def input_schema(self, name: str) -> dict[str, Any] | None:
        """``name``'s input schema as the upstream last listed it, without asking it (None: not listed yet).

        The MCP SDK's server checks a ``tools/call``'s ``Mcp-Param-*`` headers against the tool's schema before every
        call; without this it runs the ``tools/list`` handler for that, which is an upstream round trip per call (the
        gateway's pass-through cost twice a direct call's; bench ``gateway`` section). The listing is refreshed on
        every connection and on every ``tools/list`` a client sends through the gateway."""
        return self._schemas.get(name)

    async def run(self) -> None:
        """Open a connection each time one is asked for, and hold it until a call finds it broken."""
        while True:
            attempt = await self._asks.get()
            try:
                async with contextlib.AsyncExitStack() as stack:
                    session = await self._open(stack)
                    try:  # the schemas the SDK's header check reads; a call works without them, so not required
                        self._remember((await session.list_tools()).tools)
                    except Exception as exc:
                        log.info("upstream %s: no tool listing on connecting: %s", self.server.name, exc)
                    self._client = session
                    attempt.set_result(session)
                    await self._broken.wait()
            except Exception as exc:  # could not connect, or the connection failed while open
                log.info("upstream %s: connection ended: %s", self.server.name, exc)
                if not attempt.done():
                    attempt.set_exception(exc)
            finally:
                self._client = None
                self._broken.clear()
                if self._attempt is attempt:
                    self._attempt = None

    async def _open(self, stack: contextlib.AsyncExitStack) -> ClientSession:
        """The MCP SDK's client connects and negotiates the protocol. An upstream on the 2026-07-28 protocol (a
        ``server/discover`` result) then gets a second ``ClientSession`` that adopts the same negotiation and sends
        each request as one HTTP exchange (:mod:`.exchange`): the protocol work is still the SDK's, only the carrying
        is lighter. A handshake-era upstream keeps the SDK's client, whose sessions need its streams."""
        timeout = httpx2.Timeout(self.server.timeout_seconds, read=MCP_DEFAULT_SSE_READ_TIMEOUT)
        http = await stack.enter_async_context(
            httpx2.AsyncClient(headers=self._headers, timeout=timeout, transport=AiohttpTransport(keepalive=KEEPALIVE_SECONDS)))
        client = Client(streamable_http_client(self.server.url, http_client=http), cache=None,
                        elicitation_callback=_decline)
        opened = await stack.enter_async_context(client)
        discovered = opened.session.discover_result
        if discovered is None:
            return opened.session
        exchanges = await stack.enter_async_context(aiohttp.ClientSession(
            headers=self._headers, cookie_jar=aiohttp.DummyCookieJar(),
            # TLS verified as httpx2 does; idle connections dropped well before a server's own keep-alive (toolsets.py)
            connector=aiohttp.TCPConnector(ssl=httpx2.create_ssl_context(), keepalive_timeout=KEEPALIVE_SECONDS),
            proxy=env_proxy(self.server.url),  # as httpx2 takes it from the environment
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=self.server.timeout_seconds,
                                          sock_read=MCP_DEFAULT_SSE_READ_TIMEOUT)))
        lean = await stack.enter_async_context(
            ClientSession(dispatcher=HttpExchanges(self.server.url, exchanges), elicitation_callback=_decline))
        lean.adopt(discovered)
        return lean

    async def _connected(self) -> ClientSession:
        if self._client is not None:
            return self._client
        if self._attempt is None:
            self._attempt = asyncio.get_running_loop().create_future()
            self._asks.put_nowait(self._attempt)
        return await asyncio.shield(self._attempt)

    async def _reset(self) -> None:
        """The connection failed: the next call opens a new one."""
        if self._client is not None:
            self._broken.set()

    async def list_tools(self) -> list[mcp_types.Tool]:
        client = await self._connected()
        try:
            tools = list((await client.list_tools()).tools)
        except Exception:
            await self._reset()
            raise
        self._remember(tools)
        return tools

    def _remember(self, tools: list[mcp_types.Tool]) -> None:
        self._schemas = {t.name: dict(t.input_schema) for t in tools}

    async def call_tool(
        self, name: str, arguments: dict[str, Any], *, input_responses: Any = None, request_state: str | None = None
    ) -> mcp_types.CallToolResult | mcp_types.InputRequiredResult:
        """One call, sent once: a call that may have reached the upstream is never resent (it may have run). An
        upstream's question (an ``input_required`` result, MCP elicitation) is handed back as it came."""
        client = await self._connected()
        try:
            return await client.call_tool(
                name, arguments, input_responses=input_responses, request_state=request_state, allow_input_required=True
            )
        except Exception:
            await self._reset()
            raise


__all__ = ["Upstream"]
