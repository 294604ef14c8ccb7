"""A second channel for the bridge, as small as a channel can be: what a new channel is (docs/design.md, "Adding a
channel"). Its "chat service" is a real HTTP server on 127.0.0.1 that records what it is sent and numbers the messages
it is asked to show; its notifier posts there with httpx, and its people are a fixed table. Everything else (watching
the ToolApprovals, the message's place on them, "is this still the request / is the person mapped / vote on their
behalf") is :mod:`agent_runtime.bridges`, the same code Slack runs.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from agent_runtime.bridges import Ballots, Person, Place, Ref, Refused

ANNOTATION = "gatehouse.dev/recorder-message"


@dataclass
class Service:
    """The chat service: every request it got, in order (``path`` and the JSON body)."""

    url: str = ""
    received: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    refuse: set[str] = field(default_factory=set)  # rooms that do not exist: a post there is refused for good

    def of(self, path: str) -> list[dict[str, Any]]:
        return [body for p, body in list(self.received) if p == path]


@contextmanager
def service() -> Iterator[Service]:
    recorded = Service()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            recorded.received.append((self.path, body))
            if self.path == "/post" and body.get("room") in recorded.refuse:
                answer, status = {"error": "no_such_room"}, 404
            else:
                answer, status = {"id": f"m-{len(recorded.of('/post'))}"} if self.path == "/post" else {}, 200
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    recorded.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield recorded
    finally:
        server.shutdown()
        server.server_close()


def shown(obj: dict[str, Any]) -> dict[str, Any]:
    """What the channel shows of a request: enough to tell its state (the fingerprint is this, hashed)."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    return {"name": obj["metadata"]["name"], "tool": spec.get("tool"), "phase": status.get("phase") or "Pending",
            "approvals": status.get("approvals", ""), "decidedBy": status.get("decidedBy", "")}


class RecordingNotifier:
    name: str = "recorder"
    title: str = "Recorder"
    annotation: str = ANNOTATION
    place_keys: tuple[str, ...] = ("room", "id")

    def __init__(self, url: str) -> None:
        self._url = url

    def destination(self, agent: dict[str, Any]) -> str:
        # this channel's Agents name their room in an annotation: the Agent CRD knows only Slack's notify block
        return str(((agent.get("metadata") or {}).get("annotations") or {}).get("recorder.example/room") or "")

    def fingerprint(self, obj: dict[str, Any]) -> str:
        return json.dumps(shown(obj), sort_keys=True)

    async def _send(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        async with httpx.AsyncClient(base_url=self._url, timeout=10) as client:
            reply = await client.post(path, json=body)
        if reply.status_code == 404:
            raise Refused(reply.json().get("error", "refused"))
        reply.raise_for_status()
        answer: dict[str, Any] = reply.json()
        return answer

    async def post(self, obj: dict[str, Any], destination: str) -> Place:
        answer = await self._send("/post", {"room": destination, **shown(obj)})
        return {"room": destination, "id": str(answer["id"])}

    async def update(self, obj: dict[str, Any], place: Place) -> None:
        await self._send("/update", {**place, **shown(obj)})

    async def tell(self, place: Place, user: str, text: str) -> None:
        await self._send("/tell", {**place, "user": user, "text": text})


@dataclass(frozen=True)
class People:
    table: dict[str, Person]

    async def person(self, user: str) -> Person | None:
        return self.table.get(user)


async def decide(ballots: Ballots, user: str, ref: Ref, place: Place, action: str, reason: str = "") -> None:
    """What the channel's endpoint does with a person's click (after checking the request is the channel's own)."""
    if await ballots.current(ref, user, place) is None:
        return
    person = await ballots.person(user, place)
    if person is not None:
        await ballots.vote(ref, person, action, reason, user, place)


__all__ = ["ANNOTATION", "People", "RecordingNotifier", "Service", "decide", "service", "shown"]
