"""The HTTP under the gateway's upstream client, against a real HTTP server on 127.0.0.1 that records the bytes it
receives. The httpx2 transport (agent_runtime/gateway/wire.py): the request goes out as httpx2 built it, the answer
comes back as the server sent it, a POST is sent once and never again, and failures are the httpx2 errors the MCP SDK
handles. The single exchanges (agent_runtime/gateway/exchange.py): a result, the server's own JSON-RPC error, the
SDK transport's errors for a bare status, progress then the result from an event stream, nothing resent."""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import aiohttp
import httpx2
import pytest
from mcp.shared.dispatcher import CallOptions
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, INTERNAL_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, REQUEST_TIMEOUT

from agent_runtime.gateway.exchange import HttpExchanges
from agent_runtime.gateway.wire import AiohttpTransport


@dataclass
class Seen:
    requests: list[tuple[bytes, bytes]] = field(default_factory=list)  # (head, body) of every request received
    connections: int = 0


Answer = Callable[[asyncio.StreamWriter, int], Awaitable[bool]]  # writes the answer to request n; False: close


async def _read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes] | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    return head, await reader.readexactly(length)


@asynccontextmanager
async def http_server(answer: Answer) -> AsyncIterator[tuple[str, Seen]]:
    seen = Seen()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.connections += 1
        try:
            while (request := await _read_request(reader)) is not None:
                seen.requests.append(request)
                if not await answer(writer, len(seen.requests)):
                    break
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield f"http://127.0.0.1:{port}/mcp", seen


def _response(body: bytes, status: str = "200 OK", headers: tuple[str, ...] = ("content-type: application/json",)) -> bytes:
    head = "\r\n".join((f"HTTP/1.1 {status}", *headers, f"content-length: {len(body)}"))
    return head.encode() + b"\r\n\r\n" + body


async def _json(writer: asyncio.StreamWriter, n: int) -> bool:
    writer.write(_response(b'{"jsonrpc":"2.0","id":%d,"result":{}}' % n, headers=("content-type: application/json",
                                                                                   "x-upstream: yes")))
    await writer.drain()
    return True


async def test_a_request_goes_out_as_httpx2_built_it_and_the_answer_comes_back_as_sent() -> None:
    async with http_server(_json) as (url, seen), httpx2.AsyncClient(
            transport=AiohttpTransport(), headers={"Authorization": "Bearer upstream-secret"}) as client:
        body = b'{"jsonrpc":"2.0","id":1,"method":"tools/call"}'
        answer = await client.post(url, content=body, headers={"content-type": "application/json",
                                                                "mcp-protocol-version": "2026-07-28"})
        again = await client.post(url, content=body, headers={"content-type": "application/json"})
    assert (answer.status_code, answer.json(), answer.headers["x-upstream"]) == (200, {"jsonrpc": "2.0", "id": 1,
                                                                                      "result": {}}, "yes")
    assert again.json()["id"] == 2
    head, sent = seen.requests[0]
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /mcp HTTP/1.1" and sent == body
    names = [line.split(":", 1)[0].lower() for line in lines[1:] if line]
    assert sorted(names) == sorted(["host", "accept", "accept-encoding", "connection", "user-agent", "authorization",
                                    "content-type", "mcp-protocol-version", "content-length"])
    assert f"user-agent: python-httpx2/{httpx2.__version__}" in head.decode().lower()  # httpx2's, not aiohttp's
    assert seen.connections == 1  # the second request reused the pooled connection


async def test_a_redirect_and_a_compressed_body_are_left_to_httpx2() -> None:
    async def redirect_then_gzip(writer: asyncio.StreamWriter, n: int) -> bool:
        if n == 1:
            writer.write(_response(b"", "307 Temporary Redirect", ("location: /elsewhere",)))
        else:
            writer.write(_response(gzip.compress(b'{"ok":true}'), headers=("content-type: application/json",
                                                                            "content-encoding: gzip")))
        await writer.drain()
        return True

    async with http_server(redirect_then_gzip) as (url, seen), httpx2.AsyncClient(transport=AiohttpTransport()) as client:
        moved = await client.post(url, content=b"{}")
        assert (moved.status_code, moved.headers["location"], len(seen.requests)) == (307, "/elsewhere", 1)
        assert b"content-type" not in seen.requests[0][0].lower()  # none given, none added
        decoded = await client.post(url, content=b"{}")
        assert decoded.json() == {"ok": True}


async def test_a_stream_is_read_as_it_arrives() -> None:
    second = asyncio.Event()

    async def sse(writer: asyncio.StreamWriter, n: int) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        first = b"event: message\r\ndata: 1\r\n\r\n"
        writer.write(b"%x\r\n%s\r\n" % (len(first), first))
        await writer.drain()
        await second.wait()  # sent only once the client has read the first event
        last = b"event: message\r\ndata: 2\r\n\r\n"
        writer.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(last), last))
        await writer.drain()
        return True

    async with http_server(sse) as (url, _), httpx2.AsyncClient(transport=AiohttpTransport()) as client:
        async with client.stream("GET", url) as response:
            lines = response.aiter_lines()
            assert [await anext(lines), await anext(lines)] == ["event: message", "data: 1"]
            second.set()
            assert [line async for line in lines if line.startswith("data")] == ["data: 2"]


async def test_a_post_whose_connection_closes_unanswered_fails_and_is_not_sent_again() -> None:
    async def vanish(writer: asyncio.StreamWriter, n: int) -> bool:
        return False  # read, never answered: the upstream may have acted on it

    async with http_server(vanish) as (url, seen), httpx2.AsyncClient(transport=AiohttpTransport()) as client:
        with pytest.raises(httpx2.RemoteProtocolError):
            await client.post(url, content=b'{"method":"tools/call"}')
    assert len(seen.requests) == 1


async def test_failures_are_the_httpx2_errors_the_sdk_handles() -> None:
    async def silent(writer: asyncio.StreamWriter, n: int) -> bool:
        await asyncio.sleep(5)
        return False

    async with http_server(silent) as (url, _), httpx2.AsyncClient(
            transport=AiohttpTransport(), timeout=httpx2.Timeout(5.0, read=0.2)) as client:
        with pytest.raises(httpx2.ReadTimeout):
            await client.post(url, content=b"{}")
    closed = url  # the server is gone: nothing listens on its port now
    async with httpx2.AsyncClient(transport=AiohttpTransport()) as client:
        with pytest.raises(httpx2.ConnectError):
            await client.post(closed, content=b"{}")


# The upstream's requests as single exchanges (agent_runtime/gateway/exchange.py), against the same recording server.

def _exchanges(http: aiohttp.ClientSession, url: str) -> HttpExchanges:
    return HttpExchanges(url, http)


async def test_a_result_comes_back_and_an_error_is_the_servers_own() -> None:
    async def answers(writer: asyncio.StreamWriter, n: int) -> bool:
        if n == 1:
            writer.write(_response(b'{"jsonrpc":"2.0","id":1,"result":{"content":[]}}'))
        else:  # a JSON-RPC error at an HTTP error status, as a 2026-07-28 server answers a bad request
            writer.write(_response(b'{"jsonrpc":"2.0","id":null,"error":{"code":-32602,"message":"bad args"}}',
                                   "400 Bad Request"))
        await writer.drain()
        return True

    async with http_server(answers) as (url, seen), aiohttp.ClientSession() as http:
        exchanges = _exchanges(http, url)
        assert await exchanges.send_raw_request("tools/call", {"name": "echo"}, {"headers": {"mcp-name": "echo"}}) \
            == {"content": []}
        with pytest.raises(MCPError) as refused:
            await exchanges.send_raw_request("tools/call", {"name": "echo"})
    assert (refused.value.code, refused.value.error.message) == (-32602, "bad args")
    head, body = seen.requests[0]
    assert json.loads(body) == {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo"}}
    assert b"mcp-name: echo" in head.lower() and b"accept: application/json, text/event-stream" in head.lower()


@pytest.mark.parametrize(("status", "code"), [("404 Not Found", METHOD_NOT_FOUND), ("500 Oops", INTERNAL_ERROR),
                                              ("307 Temporary Redirect", INVALID_REQUEST), ("202 Accepted", INVALID_REQUEST)])
async def test_a_status_without_a_json_rpc_answer_is_an_error_as_in_the_sdk_and_nothing_is_followed(
        status: str, code: int) -> None:
    async def bare(writer: asyncio.StreamWriter, n: int) -> bool:
        writer.write(_response(b"", status, ("location: /elsewhere",)))
        await writer.drain()
        return True

    async with http_server(bare) as (url, seen), aiohttp.ClientSession() as http:
        with pytest.raises(MCPError) as failed:
            await _exchanges(http, url).send_raw_request("tools/call", {"name": "echo"})
    assert failed.value.code == code and len(seen.requests) == 1


async def test_an_event_stream_gives_progress_then_the_result() -> None:
    async def sse(writer: asyncio.StreamWriter, n: int) -> bool:
        events = (b': ping\r\n\r\n'
                  b'event: message\r\ndata: {"jsonrpc":"2.0","method":"notifications/progress",'
                  b'"params":{"progressToken":"t","progress":1,"message":"working"}}\r\n\r\n'
                  b'event: message\r\ndata: {"jsonrpc":"2.0","id":1,\r\ndata: "result":{"done":true}}\r\n\r\n')
        writer.write(_response(events, headers=("content-type: text/event-stream",)))
        await writer.drain()
        return True

    told: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        told.append((progress, total, message))

    async with http_server(sse) as (url, _), aiohttp.ClientSession() as http:
        options: CallOptions = {"on_progress": on_progress}
        result = await _exchanges(http, url).send_raw_request("tools/call", {}, options)
    assert (result, told) == ({"done": True}, [(1.0, None, "working")])


async def test_a_request_whose_connection_closes_unanswered_is_an_error_and_is_not_sent_again() -> None:
    async def vanish(writer: asyncio.StreamWriter, n: int) -> bool:
        return False

    async with http_server(vanish) as (url, seen), aiohttp.ClientSession() as http:
        with pytest.raises(MCPError) as failed:
            await _exchanges(http, url).send_raw_request("tools/call", {"name": "delete_file"})
    assert failed.value.code == CONNECTION_CLOSED and len(seen.requests) == 1


async def test_an_idle_connection_is_dropped_after_the_keepalive_not_reused() -> None:
    """The upstream client drops idle connections well before a server's own keep-alive (5 s for uvicorn), so that a
    call is not written to a connection the server is closing (agent_runtime/server/toolsets.py)."""
    async with http_server(_json) as (url, seen), httpx2.AsyncClient(transport=AiohttpTransport(keepalive=1.5)) as client:
        await client.post(url, content=b"{}")
        await client.post(url, content=b"{}")  # within the keep-alive even on a loaded machine: the same connection
        await asyncio.sleep(2.5)
        await client.post(url, content=b"{}")
    assert seen.connections == 2


async def test_a_request_past_its_timeout_is_an_error_and_one_without_waits_for_its_answer() -> None:
    """A caller's timeout (``CallOptions["timeout"]``) ends the exchange with REQUEST_TIMEOUT; without one the answer is
    awaited however long it takes (the SDK's default for a call)."""
    async def slow(writer: asyncio.StreamWriter, n: int) -> bool:
        await asyncio.sleep(0.5)
        return await _json(writer, n)

    async with http_server(slow) as (url, seen), aiohttp.ClientSession() as http:
        exchanges = _exchanges(http, url)
        with pytest.raises(MCPError) as late:
            await exchanges.send_raw_request("tools/call", {"name": "echo"}, {"timeout": 0.1})
        assert await exchanges.send_raw_request("tools/call", {"name": "echo"}) == {}
    assert late.value.code == REQUEST_TIMEOUT and len(seen.requests) == 2
