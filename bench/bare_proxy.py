"""The floor of one HTTP hop in Python on this machine: a forwarding proxy that does nothing but forward.

Issue 38's pass-through bar compares an ungated call through the MCP gateway with the same call sent straight to the
upstream. Part of the difference is the hop itself: one more process reading a request from a socket and writing
one to another, whatever it decides in between. This proxy is that hop and nothing else, on the parts the gateway
serves and forwards with (uvicorn with httptools and uvloop in, one keep-alive aiohttp session out): no
authentication, no Host check, no MCP parsing or validation, no policy; the request's body and its MCP headers go
upstream as they came and the upstream's status, content type and body come back as they came. It is a measuring
instrument for ``bench/gateway_path.py`` (the section's ``bare_ms``: what any Python proxy in the gateway's place
costs at least), not a way to serve MCP: it forwards no credential and answers only what fits in one response body.

    python -m bench.bare_proxy http://127.0.0.1:8001/mcp --port 8002     # GET /healthz: ready
"""

from __future__ import annotations

import argparse

import aiohttp
import uvicorn
from starlette.types import Message, Receive, Scope, Send

HEALTH = "/healthz"
# What an MCP client sends that an MCP server reads (2026-07-28 routing headers included); nothing else goes upstream.
_FORWARDED = frozenset({b"content-type", b"accept", b"mcp-protocol-version", b"mcp-method", b"mcp-name"})
_PARAM_PREFIX = b"mcp-param-"


class BareProxy:
    """An ASGI app forwarding every request but ``GET /healthz`` to ``upstream``."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self._http: aiohttp.ClientSession | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            return await self._lifespan(receive, send)
        if scope["path"] == HEALTH:
            return await _answer(send, 200, "text/plain", b"ok")
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = bool(message.get("more_body"))
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]
                   if k in _FORWARDED or k.startswith(_PARAM_PREFIX)}
        assert self._http is not None
        async with self._http.request(scope["method"], self.upstream, data=body, headers=headers,
                                      allow_redirects=False) as response:
            data = await response.read()
            await _answer(send, response.status, response.headers.get("content-type", ""), data)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message: Message = await receive()
            if message["type"] == "lifespan.startup":
                self._http = aiohttp.ClientSession(connector=aiohttp.TCPConnector(keepalive_timeout=30))
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self._http is not None:
                    await self._http.close()
                await send({"type": "lifespan.shutdown.complete"})
                return


async def _answer(send: Send, status: int, content_type: str, body: bytes) -> None:
    headers = [(b"content-length", str(len(body)).encode())]
    if content_type:
        headers.append((b"content-type", content_type.encode("latin-1")))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.bare_proxy", description=__doc__.split("\n\n")[0])
    parser.add_argument("upstream", help="the URL every request is forwarded to (an MCP endpoint)")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    uvicorn.run(BareProxy(args.upstream), host="127.0.0.1", port=args.port, log_level="warning", access_log=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
