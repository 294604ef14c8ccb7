"""The body cap (:mod:`agent_runtime.app.limits`) as plain ASGI: what it reads, what it hands on, what it answers."""

from __future__ import annotations

import json
from typing import Any

import pytest
from starlette.types import Message, Receive, Scope, Send

from agent_runtime.app.limits import BodyLimit
from agent_runtime.rest.models import ProblemDetails

CAP = 100


class Echo:
    """The app behind the cap: reads the whole body, answers its length."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        self.bodies.append(body)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": str(len(body)).encode()})


class Client:
    """Feeds body messages one at a time and counts how many were taken."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.messages: list[Message] = [
            {"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)
        ]
        self.taken = 0
        self.sent: list[Message] = []

    async def receive(self) -> Message:
        if self.taken == len(self.messages):
            return {"type": "http.disconnect"}
        self.taken += 1
        return self.messages[self.taken - 1]

    async def send(self, message: Message) -> None:
        self.sent.append(message)

    @property
    def status(self) -> int:
        return int(self.sent[0]["status"])

    @property
    def body(self) -> Any:
        return json.loads(b"".join(m.get("body", b"") for m in self.sent[1:]))


def _scope(path: str, headers: dict[str, str]) -> Scope:
    raw = [(k.encode(), v.encode()) for k, v in headers.items()]
    return {"type": "http", "method": "POST", "path": path, "headers": raw}


async def _call(path: str, headers: dict[str, str], chunks: list[bytes]) -> tuple[Echo, Client]:
    app, client = Echo(), Client(chunks)
    await BodyLimit(app, max_bytes=CAP)(_scope(path, headers), client.receive, client.send)
    return app, client


async def test_a_content_length_over_the_cap_is_answered_without_reading_the_body() -> None:
    app, client = await _call("/approvals/a/decision", {"content-length": str(CAP + 1)}, [b"x" * (CAP + 1)])
    assert (client.taken, app.bodies) == (0, [])
    assert client.status == 413
    error = ProblemDetails.model_validate(client.body).error
    assert error.startswith(f"the request body is over this runtime's limit of {CAP} bytes")


async def test_on_the_json_rpc_route_it_is_a_json_rpc_error() -> None:
    app, client = await _call("/", {"content-length": str(10 * CAP)}, [b"x"])
    assert (client.taken, app.bodies, client.status) == (0, [], 200)
    body = client.body
    assert body["jsonrpc"] == "2.0" and body["id"] is None and body["error"]["code"] == -32600
    assert f"limit of {CAP} bytes" in body["error"]["message"]


async def test_a_chunked_body_is_cut_off_at_the_first_chunk_over_the_cap() -> None:
    chunks = [b"a" * 40, b"b" * 40, b"c" * 40, b"d" * 40]
    app, client = await _call("/approvals", {"transfer-encoding": "chunked"}, chunks)
    assert (client.taken, app.bodies, client.status) == (3, [], 413)  # 120 > 100 after the third: the fourth never read


@pytest.mark.parametrize("headers", [{"content-length": str(CAP)}, {"transfer-encoding": "chunked"}, {}])
async def test_a_body_up_to_the_cap_is_handed_on_whole(headers: dict[str, str]) -> None:
    chunks = [b"a" * 50, b"b" * 50] if headers else [b""]
    app, client = await _call("/", headers, chunks)
    assert app.bodies == [b"".join(chunks)] and client.status == 200


async def test_a_client_that_leaves_mid_body_is_handed_on_as_gone() -> None:
    app, client = Echo(), Client([b"a" * 10, b"b" * 10])
    client.messages = client.messages[:1]  # then http.disconnect
    seen: list[Message] = []

    async def reader(scope: Scope, receive: Receive, send: Send) -> None:
        seen.extend([await receive(), await receive()])

    await BodyLimit(reader, max_bytes=CAP)(_scope("/", {"transfer-encoding": "chunked"}), client.receive, client.send)
    assert [m["type"] for m in seen] == ["http.request", "http.disconnect"] and not app.bodies


def test_a_negative_cap_is_refused() -> None:
    with pytest.raises(ValueError, match="0 or more"):
        BodyLimit(Echo(), max_bytes=-1)
