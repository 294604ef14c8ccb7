"""The gateway's requests to an upstream on the 2026-07-28 protocol, each as one HTTP exchange: a dispatcher for the
MCP SDK's own ``ClientSession``.

On that protocol a request is a self-contained POST (no session, no ``initialize``): one JSON-RPC request in, its
response out, as JSON or as an SSE stream that ends with it. The SDK's streamable HTTP client runs each one through a
writer task, a task per request, memory streams and httpx2; that machinery cost about 1.1 ms of CPU per forwarded call
in the gateway, a third of the gateway's whole share (bench ``gateway`` section; docs/gateway.md "Speed"). This
dispatcher sends the POST with aiohttp and reads the answer in the caller's task.

Only the carrying changes. The ``ClientSession`` above it still does everything the protocol says: the ``_meta``
envelope (protocol version, client info and capabilities), the routing headers (``Mcp-Protocol-Version``,
``Mcp-Method``, ``Mcp-Name``, ``Mcp-Param-*`` from the tool's schema), and the validation of every result against the
negotiated version. :class:`~agent_runtime.gateway.upstream.Upstream` uses it only once the SDK's own client has
connected and negotiated a modern version (an upstream on a handshake-era protocol keeps the SDK's client); the
headers are the gateway's own (``headersFrom``), never a client's.

What the SDK's transport does and this one does too: a JSON-RPC error is raised as ``MCPError`` (also when it comes
at a 4xx/5xx status), a bare 404 is "Not Found" (METHOD_NOT_FOUND) and another error status "Server returned an
error response", a redirect is not followed, a 202 to a request is an error, progress notifications reach the
caller's ``on_progress``. The upstream sends no requests of its own on this protocol (no back channel), and other
notifications are dropped, as the gateway's own session ignored them. A request is sent once and never resent:
a failure after it was written is an error, the call's outcome unknown.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Mapping
from typing import Any

import aiohttp
import anyio
from mcp.shared.dispatcher import CallOptions
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, INTERNAL_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, REQUEST_TIMEOUT

log = logging.getLogger(__name__)

_ACCEPT = "application/json, text/event-stream"


def _message(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return None


def outcome(message: Any, request_id: Any) -> dict[str, Any] | None:
    """The result of the request ``request_id`` in one JSON-RPC message; ``MCPError`` for its error; None: the
    message is something else (a notification, another id, not JSON-RPC). An error without an id is this
    request's (the server rejected it before reading its id)."""
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return None
    if isinstance(error := message.get("error"), dict) and message.get("id") in (request_id, None):
        code, text = error.get("code"), error.get("message")
        raise MCPError(code if isinstance(code, int) else INTERNAL_ERROR, text if isinstance(text, str) else "error",
                       error.get("data"))
    if message.get("id") == request_id and isinstance(result := message.get("result"), dict):
        return result
    return None


async def _sse_events(content: aiohttp.StreamReader) -> Any:
    """The ``data`` of each SSE event, decoded (the SSE line rules: ``data:`` lines joined by newlines, an event ends at
    a blank line, comments and other fields ignored)."""
    data: list[str] = []
    async for raw in content:
        line = raw.decode("utf-8").rstrip("\r\n")
        if not line:
            if data:
                yield _message("\n".join(data).encode())
            data = []
        elif line.startswith("data:"):
            value = line[5:]
            data.append(value[1:] if value.startswith(" ") else value)
    if data:
        yield _message("\n".join(data).encode())


class HttpExchanges:
    """A ``Dispatcher`` (mcp.shared.dispatcher) whose requests are single HTTP exchanges with ``url``."""

    def __init__(self, url: str, http: aiohttp.ClientSession) -> None:
        self.url = url
        self._http = http
        self._next_id = 0

    async def run(self, on_request: Any, on_notify: Any, on_notify_intercept: Any = None, *,
                  task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Nothing to receive: on this protocol the server sends nothing but answers."""
        task_status.started()
        await anyio.sleep_forever()

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None) -> None:
        # The 2026-07-28 HTTP wire carries no client notifications: a request is cancelled by closing its exchange.
        log.debug("upstream %s: %s not sent (no client notifications on this protocol)", self.url, method)

    async def send_raw_request(self, method: str, params: Mapping[str, Any] | None,
                               opts: CallOptions | None = None) -> dict[str, Any]:
        opts = opts or {}
        self._next_id += 1
        request_id = opts.get("request_id", self._next_id)
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = dict(params)
        headers = {"content-type": "application/json", "accept": _ACCEPT, **opts.get("headers", {})}
        timeout = opts.get("timeout")
        # No timeout asked (the SDK's default for a call): no cancel scope either. anyio's fail_after(None) never fires
        # but still costs a cancel scope per call (about 0.05 ms of the gateway's CPU; docs/gateway.md "Speed").
        deadline = anyio.fail_after(timeout) if timeout is not None else contextlib.nullcontext()
        try:
            with deadline:
                return await self._exchange(json.dumps(message, separators=(",", ":")), headers, request_id, opts)
        except TimeoutError:
            raise MCPError(REQUEST_TIMEOUT, f"Request {method!r} timed out") from None
        except aiohttp.ClientError as exc:
            raise MCPError(CONNECTION_CLOSED, f"Connection closed: {exc or type(exc).__name__}") from exc

    async def _exchange(self, body: str, headers: dict[str, str], request_id: Any, opts: CallOptions) -> dict[str, Any]:
        async with self._http.post(self.url, data=body, headers=headers, allow_redirects=False) as response:
            kind = response.headers.get("content-type", "").lower()
            if response.status == 202:
                raise MCPError(INVALID_REQUEST, "server answered a request with 202 Accepted")
            if 300 <= response.status < 400:
                raise MCPError(INVALID_REQUEST, f"the server redirected the request (HTTP {response.status}); "
                                                "redirects are not followed")
            if response.status >= 400:
                if kind.startswith("application/json"):
                    outcome(_message(await response.read()), request_id)  # raises the server's JSON-RPC error
                if response.status == 404:
                    raise MCPError(METHOD_NOT_FOUND, "Not Found")
                raise MCPError(INTERNAL_ERROR, "Server returned an error response")
            if kind.startswith("application/json"):
                found = outcome(_message(await response.read()), request_id)
                if found is None:
                    raise MCPError(INTERNAL_ERROR, "the server's answer is not the request's JSON-RPC response")
                return found
            if kind.startswith("text/event-stream"):
                async for event in _sse_events(response.content):
                    if (found := outcome(event, request_id)) is not None:
                        return found
                    await _progress(event, opts)
                raise MCPError(CONNECTION_CLOSED, "the server's event stream ended without the request's response")
            raise MCPError(INVALID_REQUEST, f"Unexpected content type: {kind}")


async def _progress(event: Any, opts: CallOptions) -> None:
    """A progress notification for this request, to the caller that asked for progress."""
    on_progress = opts.get("on_progress")
    if on_progress is None or not isinstance(event, dict) or event.get("method") != "notifications/progress":
        return
    params = event.get("params")
    if isinstance(params, dict) and isinstance(progress := params.get("progress"), int | float):
        total, text = params.get("total"), params.get("message")
        await on_progress(float(progress), total if isinstance(total, int | float) else None,
                          text if isinstance(text, str) else None)


__all__ = ["HttpExchanges", "outcome"]
