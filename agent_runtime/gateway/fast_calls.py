"""The hot case answered without the MCP SDK's streamable-HTTP server: an ungated ``tools/call`` on the 2026-07-28
protocol (bench ``gateway`` section, docs/gateway.md "Speed"; issue 38).

The SDK's server spent about 1 ms of the gateway's CPU on each forwarded call (its modern entry's task group, memory
stream and SSE deferral, a per-request ``Connection`` and ``ServerRunner``, the middleware chain), against about
0.6 ms for all of the gateway's own work. This ASGI app sits where the SDK's session manager sat (behind
authentication, the Host check, the session binding and the SDK's own body-size limit) and answers a request itself
only when it is provably answered the same way; anything else goes to the SDK's server as it came.

Decided before anything is sent upstream, each with the SDK's own function, so that whatever the SDK would refuse
still reaches the SDK and is refused there, in its words:

- a POST with no ``Mcp-Session-Id`` naming a 2026-07-28 version (``Mcp-Protocol-Version``; a handshake-era session,
  an ``initialize``, a GET or DELETE, a resumption: the SDK's), passing the SDK's DNS-rebinding check and its
  ``Accept`` rule;
- one JSON-RPC request (not a batch, a notification or a response) whose method is ``tools/call``, with no
  duplicated routing header, its envelope and headers classified valid (``classify_inbound_request``), its
  ``Mcp-Param-*`` headers matching the tool's schema, its params valid for the version;
- the tool offered and the policy's route ``forward`` (:func:`.routing.route`, the SDK path's own decision): a gated,
  refused or unknown tool is the SDK's;
- no OpenTelemetry tracer provider installed: with one, the SDK's server span is recorded, so the SDK path runs.

The call is then the SDK path's: :func:`.server.pass_through` (one function for both paths) sends it with the
gateway's own upstream session, and the result is shaped by the SDK's own ``ServerRunner._serialize`` (the
per-version sieve, ``resultType``, the ``serverInfo`` stamp) and written by the SDK's own ``_write`` (JSON, its
status). A forwarded call emits nothing to the client before its result (no progress is relayed on the SDK path
either), so the response is JSON unless the call runs past the SDK's SSE deferral window: then, as the SDK does,
``text/event-stream`` is committed, kept alive with its pings, and ends with the result. A client that disconnects
cancels the call, as on the SDK path.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import mcp_types
from mcp.server import _streamable_http_modern as modern
from mcp.server.connection import Connection
from mcp.server.lowlevel import Server
from mcp.server.runner import ServerRunner
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, check_accept_headers
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecurityMiddleware
from mcp.shared.inbound import (
    MCP_PROTOCOL_VERSION_HEADER,
    InboundModernRoute,
    classify_inbound_request,
    find_duplicated_routing_header,
)
from mcp_types import methods as _methods
from mcp_types.version import LATEST_MODERN_VERSION, MODERN_PROTOCOL_VERSIONS
from opentelemetry import trace
from pydantic import ValidationError
from starlette.requests import Request
from starlette.types import Message, Receive, Scope, Send

from agent_runtime.contract.agent_config import GatewayConfig
from agent_runtime.gateway import routing
from agent_runtime.gateway.server import pass_through
from agent_runtime.gateway.upstream import Upstream

log = logging.getLogger(__name__)

# The SDK's own pieces this path runs (private to it, checked once: a release without them leaves every request to
# the SDK's server, as before this path existed, rather than failing a call).
_SDK_PARTS = ("_mcp_param_rejection", "_to_jsonrpc_response", "_write", "_sse_event", "_SSE_HEADERS",
              "_SSE_PING_INTERVAL")
_VERSION_HEADER = MCP_PROTOCOL_VERSION_HEADER.lower().encode("ascii")
_SESSION_HEADER = MCP_SESSION_ID_HEADER.lower().encode("ascii")


def _tracing_installed() -> bool:
    """Whether a tracer provider is installed: the SDK's server span would then be recorded (none is, unless the
    process is run under OpenTelemetry's instrumentation; the gateway's own approval spans use their own provider)."""
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def _replay(body: bytes, receive: Receive) -> Receive:
    """The request's body once more (the SDK reads it again), then the connection's own messages."""
    sent = False

    async def again() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again


class FastCalls:
    """``sdk``: the SDK's session manager, which serves everything this app does not."""

    def __init__(self, config: GatewayConfig, upstream: Upstream, server: Server[Any],
                 sdk: StreamableHTTPSessionManager) -> None:
        self.config = config
        self.upstream = upstream
        self.server = server
        self.sdk = sdk
        self._security = TransportSecurityMiddleware(sdk.security_settings)
        # Only for its ``_serialize``, which reads the server (cache hints, the serverInfo stamp) and the version it
        # is given, never the connection: one runner for every call instead of one Connection per call.
        self._shaper = ServerRunner(server, Connection.from_envelope(LATEST_MODERN_VERSION, None, None), None)
        self.enabled = all(hasattr(modern, part) for part in _SDK_PARTS) and hasattr(self._shaper, "_serialize")
        if not self.enabled:
            log.warning("gateway %s: this MCP SDK lacks what the fast path for ungated calls runs; every request "
                        "goes to the SDK's server", config.name)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self._may_be_hot(scope):
            return await self.sdk.handle_request(scope, receive, send)
        request = Request(scope, receive)
        body = await request.body()
        call = await self._hot_call(request, body)
        if call is None:
            return await self.sdk.handle_request(scope, _replay(body, receive), send)
        request_id, version, params = call
        await self._answer(request_id, version, params, scope, receive, send)

    def _may_be_hot(self, scope: Scope) -> bool:
        """From the headers alone: a POST on the 2026-07-28 protocol outside any session."""
        if not self.enabled or scope["type"] != "http" or scope["method"] != "POST" or _tracing_installed():
            return False
        version = None
        for key, value in scope["headers"]:
            if key == _SESSION_HEADER:
                return False
            if key == _VERSION_HEADER:
                version = value
        return version is not None and version.decode("latin-1") in MODERN_PROTOCOL_VERSIONS

    async def _hot_call(
        self, request: Request, body: bytes
    ) -> tuple[mcp_types.RequestId, str, mcp_types.CallToolRequestParams] | None:
        """The request's id, version and params when it is an ungated ``tools/call`` the SDK would serve; None:
        the SDK's to serve (or to refuse)."""
        if await self._security.validate_request(request, is_post=True) is not None:
            return None
        has_json, has_sse = check_accept_headers(request)
        if not (has_json and has_sse):
            return None
        try:
            decoded = json.loads(body)
        except (ValueError, RecursionError):
            return None
        if not isinstance(decoded, dict) or "id" not in decoded or decoded.get("method") != "tools/call":
            return None
        try:
            req = mcp_types.JSONRPCRequest.model_validate(decoded)
        except ValidationError:
            return None
        if find_duplicated_routing_header(request.headers.items()) is not None:
            return None
        verdict = classify_inbound_request(decoded, headers=dict(request.headers))
        if not isinstance(verdict, InboundModernRoute):
            return None
        try:  # the SDK's own Mcp-Param-* check (its get_tool_input_schema is the gateway's)
            if await modern._mcp_param_rejection(self.server, request, req, verdict, None) is not None:
                return None
            _methods.validate_client_request("tools/call", verdict.protocol_version, req.params)
            params = mcp_types.CallToolRequestParams.model_validate(req.params or {}, by_name=False)
        except (KeyError, ValidationError):
            return None
        if routing.route(self.config, params.name, dict(params.arguments or {})).kind != "forward":
            return None
        return req.id, verdict.protocol_version, params

    async def _result(self, request_id: mcp_types.RequestId, version: str,
                      params: mcp_types.CallToolRequestParams) -> mcp_types.JSONRPCResponse | mcp_types.JSONRPCError:
        async def shaped() -> dict[str, Any]:
            return self._shaper._serialize("tools/call", version, await pass_through(self.config, self.upstream, params))

        return await modern._to_jsonrpc_response(request_id, shaped())

    async def _answer(self, request_id: mcp_types.RequestId, version: str, params: mcp_types.CallToolRequestParams,
                      scope: Scope, receive: Receive, send: Send) -> None:
        """As the SDK's modern entry answers a handler that emits nothing before its result."""
        call = asyncio.ensure_future(self._result(request_id, version, params))
        gone = asyncio.ensure_future(_disconnected(receive))
        try:
            done, _ = await asyncio.wait((call, gone), timeout=modern._SSE_PING_INTERVAL,
                                         return_when=asyncio.FIRST_COMPLETED)
            if call in done:
                return await modern._write(call.result(), scope, receive, send)
            if gone in done:
                return  # the client left: the call is cancelled below, nothing is written
            await send({"type": "http.response.start", "status": 200, "headers": modern._SSE_HEADERS})
            while call not in done:
                await send({"type": "http.response.body", "body": b": ping\r\n\r\n", "more_body": True})
                done, _ = await asyncio.wait((call, gone), timeout=modern._SSE_PING_INTERVAL,
                                             return_when=asyncio.FIRST_COMPLETED)
                if gone in done and call not in done:
                    return
            await send({"type": "http.response.body", "body": modern._sse_event(call.result()), "more_body": False})
        finally:
            for task in (call, gone):
                task.cancel()
            await asyncio.gather(call, gone, return_exceptions=True)


async def _disconnected(receive: Receive) -> None:
    while (await receive()).get("type") != "http.disconnect":
        pass


__all__ = ["FastCalls"]
