"""An MCP session belongs to the principal that opened it.

The MCP SDK hands out ``Mcp-Session-Id`` on ``initialize`` and routes every later request carrying the id to that
session, whoever sends it. A session id is no credential (it travels in logs, proxies, a shared client), so this
middleware, behind authentication, records which principal each session id was issued to and answers a request
carrying the id under another principal as if the session did not exist (404, what the SDK answers for an unknown
session): the other principal neither uses nor learns anything of it. Bindings live as long as the process, as the
SDK's sessions do; after a restart every session id is unknown anyway.
"""

from __future__ import annotations

import json

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agent_runtime.access.middleware import SCOPE_KEY
from agent_runtime.contract.principals import Principal

SESSION_HEADER = "mcp-session-id"
MAX_BINDINGS = 100_000  # more sessions than the SDK keeps open (its max_sessions); the oldest binding goes first


def _owner(scope: Scope) -> str:
    principal = scope.get(SCOPE_KEY)
    return principal.id if isinstance(principal, Principal) else ""


class BindSessions:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.owners: dict[str, str] = {}  # session id -> the principal that opened it

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        owner = _owner(scope)
        claimed = Headers(scope=scope).get(SESSION_HEADER)
        if claimed is not None and self.owners.get(claimed) != owner:
            return await _not_found(send)  # another principal's session, or one this process never issued
        if claimed is not None and scope["method"] == "DELETE":
            self.owners.pop(claimed, None)  # the client ends its session

        async def bind(message: Message) -> None:
            if message["type"] == "http.response.start" and claimed is None:
                issued = Headers(raw=message.get("headers", [])).get(SESSION_HEADER)
                if issued is not None:
                    if len(self.owners) >= MAX_BINDINGS:
                        self.owners.pop(next(iter(self.owners)))
                    self.owners[issued] = owner
            await send(message)

        await self.app(scope, receive, bind)


async def _not_found(send: Send) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Session not found"}}).encode()
    await send({"type": "http.response.start", "status": 404,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


__all__ = ["SESSION_HEADER", "BindSessions"]
