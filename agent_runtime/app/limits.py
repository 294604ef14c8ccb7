"""Request bodies are capped, A2A and REST alike (``--max-body-bytes``, default 1 MiB): the ASGI middleware
:class:`BodyLimit`, outermost, in front of authentication and every route.

A body is refused before it is read whole, so it never reaches a2a-sdk, the agent's history or the database:

- ``Content-Length`` over the cap: answered at once, not one byte of the body read;
- no ``Content-Length`` (``Transfer-Encoding: chunked``): read here as it arrives, counted, and handed on whole
  once complete; one byte over the cap and it is answered, the rest never read;
- neither header: no body, nothing to count.

The connection stays open: the server (uvicorn) discards what the client still sends of the body, kept nowhere,
and the client reads the answer once it has sent it. Closing instead would make the kernel reset a connection
with unread data, and a client still sending would lose the answer (a2a-sdk's client saw a bare ``ReadError``).

The answer names the limit. On the A2A JSON-RPC route (``/``) it is a JSON-RPC error, ``-32600`` Invalid
Request, with HTTP 200: what a2a-sdk's own server answers when Starlette's body limit trips ("Payload too
large"), and the only status whose body a2a-sdk's client reads (on any other status it raises a bare
``HTTP Error 413`` and drops the message). Everywhere else (the REST API) it is 413 with a ``ProblemDetails``
body like the REST API's other errors.
"""

from __future__ import annotations

import json

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agent_runtime.rest.models import ProblemDetails

DEFAULT_MAX_BODY_BYTES = 1 << 20  # 1 MiB
RPC_PATHS = frozenset({"/"})  # where a2a-sdk serves JSON-RPC (factory: create_jsonrpc_routes(rpc_url="/"))
INVALID_REQUEST = -32600
RPC_STATUS = 200  # see the module docstring: a2a-sdk's convention, and what its client can read


def too_large(max_bytes: int) -> str:
    return f"the request body is over this runtime's limit of {max_bytes} bytes (--max-body-bytes, GATEHOUSE_MAX_BODY_BYTES)"


class BodyLimit:
    def __init__(self, app: ASGIApp, max_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
        if max_bytes < 0:
            raise ValueError(f"the body limit must be 0 or more bytes, not {max_bytes}")
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = Headers(scope=scope)
        length = _content_length(headers)
        if length is not None:  # the server holds the body to its Content-Length: no more can arrive
            if length > self.max_bytes:
                return await self._refuse(scope, send)
            return await self.app(scope, receive, send)
        if "transfer-encoding" not in headers:
            return await self.app(scope, receive, send)
        body = await self._read(receive)
        if body is None:
            return await self._refuse(scope, send)
        await self.app(scope, _replay(body, receive), send)

    async def _read(self, receive: Receive) -> list[Message] | None:
        """The body's messages as they arrive, or None as soon as they add up to more than the cap."""
        messages: list[Message] = []
        size = 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":  # http.disconnect: hand it on, the app sees the client left
                return messages
            size += len(message.get("body", b""))
            if size > self.max_bytes:
                return None
            if not message.get("more_body", False):
                return messages

    async def _refuse(self, scope: Scope, send: Send) -> None:
        error = too_large(self.max_bytes)
        if scope["path"] in RPC_PATHS:
            status = RPC_STATUS
            body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": INVALID_REQUEST, "message": error}})
        else:
            status, body = 413, ProblemDetails(error=error).model_dump_json()
        raw = body.encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": raw})


def _content_length(headers: Headers) -> int | None:
    try:
        return int(headers["content-length"])
    except (KeyError, ValueError):
        return None


def _replay(messages: list[Message], receive: Receive) -> Receive:
    pending = list(messages)

    async def replayed() -> Message:
        return pending.pop(0) if pending else await receive()

    return replayed


__all__ = ["DEFAULT_MAX_BODY_BYTES", "BodyLimit", "too_large"]
