"""The HTTP/1.1 wire under the gateway's MCP client to its upstream: an ``httpx2`` transport that sends each request
with aiohttp (a dependency already, through kopf and kubernetes) instead of httpcore2.

Why: the MCP SDK's client speaks HTTP through an ``httpx2.AsyncClient``, whose default transport (httpcore2 over the
pure-Python h11) cost 0.9 ms of CPU per POST to the demo tools on the bench machine, against 0.26 ms for aiohttp's
C parser; the upstream leg was the largest part of a forwarded call's CPU in the gateway (bench ``gateway`` section,
docs/gateway.md "Speed"). Only the wire changes: the MCP client above it (protocol, headers, sessions, results) and
httpx2's own request building, redirects, cookies and decoding stay as they are: this transport neither follows
redirects, nor keeps cookies, nor decompresses, and hands back the bytes as they came.

TLS is verified with the context httpx2 would build (``httpx2.create_ssl_context``); the proxy is the one the
environment names (``HTTP_PROXY``, ``HTTPS_PROXY``, ``NO_PROXY``), which httpx2 itself stops reading once a client is
given a transport; timeouts are the request's own (``request.extensions["timeout"]``, what ``httpx2.Timeout`` put
there). aiohttp's errors come back as the ``httpx2`` exceptions httpcore2 would have raised, so the SDK's handling of a
failed request is unchanged.
"""

from __future__ import annotations

import ssl
import urllib.request
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import aiohttp
import httpx2
from multidict import CIMultiDict

# Headers httpx2 already sets as it wants them: aiohttp adds none of its own.
_SKIP_AUTO_HEADERS = frozenset({"User-Agent", "Accept", "Accept-Encoding", "Content-Type"})


def env_proxy(url: str) -> str | None:
    """The proxy the environment names for ``url`` (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``; none for a host
    ``NO_PROXY`` lists), as httpx2 reads them for its own transports. Read here rather than by aiohttp's
    ``trust_env``, which would also look up ``~/.netrc`` in a thread on every request and add credentials from it."""
    host = urlsplit(url).hostname or ""
    proxies = urllib.request.getproxies()
    if not proxies or urllib.request.proxy_bypass(host):
        return None
    return proxies.get(urlsplit(url).scheme) or proxies.get("all")


def _timeout(request: httpx2.Request) -> aiohttp.ClientTimeout:
    t: dict[str, float | None] = request.extensions.get("timeout") or {}
    return aiohttp.ClientTimeout(total=None, connect=t.get("pool"), sock_connect=t.get("connect"),
                                 sock_read=t.get("read"))


def _mapped(exc: Exception, request: httpx2.Request) -> Exception:
    """The httpx2 exception httpcore2 raises for the same failure (the SDK and the gateway catch those)."""
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return httpx2.ConnectTimeout(str(exc) or "connect timed out", request=request)
    if isinstance(exc, (aiohttp.SocketTimeoutError, TimeoutError)):
        return httpx2.ReadTimeout(str(exc) or "read timed out", request=request)
    if isinstance(exc, aiohttp.ClientConnectorError):
        return httpx2.ConnectError(str(exc), request=request)
    if isinstance(exc, (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError)):
        return httpx2.RemoteProtocolError(str(exc) or "server disconnected", request=request)
    if isinstance(exc, aiohttp.ClientResponseError):
        return httpx2.RemoteProtocolError(str(exc), request=request)
    return httpx2.ReadError(str(exc) or type(exc).__name__, request=request)


class _Body(httpx2.AsyncByteStream):
    """A response's body, read as it arrives; closing it gives the connection back to the pool (or drops it when
    the body was not read to its end, as httpcore2 does)."""

    def __init__(self, response: aiohttp.ClientResponse, request: httpx2.Request) -> None:
        self._response = response
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response.content.iter_any():
                yield chunk
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise _mapped(exc, self._request) from exc

    async def aclose(self) -> None:
        self._response.release()


class AiohttpTransport(httpx2.AsyncBaseTransport):
    """One connection pool (aiohttp's, keep-alive) for one ``httpx2.AsyncClient``; created inside the running loop."""

    def __init__(self, ssl_context: ssl.SSLContext | None = None, keepalive: float = 5.0) -> None:
        """``keepalive``: seconds an idle connection stays pooled (httpx2's default: 5)."""
        context = ssl_context if ssl_context is not None else httpx2.create_ssl_context()
        self._proxies: dict[tuple[str, str, int | None], str | None] = {}  # per origin, read once
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=context, keepalive_timeout=keepalive),
            cookie_jar=aiohttp.DummyCookieJar(),  # httpx2 keeps the cookies
            auto_decompress=False,  # httpx2 decodes the content-encoding
            skip_auto_headers=_SKIP_AUTO_HEADERS,
        )

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        headers: CIMultiDict[str] = CIMultiDict(
            (k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers.raw)
        body = await request.aread()
        origin = (request.url.scheme, request.url.host, request.url.port)
        if origin not in self._proxies:  # httpx2 takes no proxy from the environment once given a transport
            self._proxies[origin] = env_proxy(str(request.url))
        try:
            response = await self._session.request(
                request.method, str(request.url), headers=headers, data=body or None, allow_redirects=False,
                timeout=_timeout(request), compress=None, chunked=None,
                proxy=self._proxies[origin])
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise _mapped(exc, request) from exc
        version = response.version or aiohttp.HttpVersion11
        return httpx2.Response(
            status_code=response.status,
            headers=list(response.raw_headers),
            stream=_Body(response, request),
            extensions={"http_version": f"HTTP/{version.major}.{version.minor}".encode()},
        )

    async def aclose(self) -> None:
        await self._session.close()


__all__ = ["AiohttpTransport", "env_proxy"]
