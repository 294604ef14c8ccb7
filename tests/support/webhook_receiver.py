"""A tiny webhook receiver for tests: a threaded HTTP server on 127.0.0.1 that records every POST.

``status`` per path (default 200) lets one receiver play a healthy endpoint and a failing one (``/fail`` → 500).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Delivery:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    url: str
    status: dict[str, int] = field(default_factory=dict)
    deliveries: list[Delivery] = field(default_factory=list)

    def at(self, path: str) -> list[Delivery]:
        return [d for d in self.deliveries if d.path == path]

    def wait(self, predicate: Any, timeout: float = 30.0) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = predicate()
            if found:
                return found
            time.sleep(0.05)
        got = [(d.path, d.headers.get("x-gatehouse-event")) for d in self.deliveries]
        raise AssertionError(f"no matching webhook delivery in {timeout}s; got {got}")


@contextmanager
def webhook_receiver() -> Iterator[Receiver]:
    receiver = Receiver(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            receiver.deliveries.append(Delivery(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            self.send_response(receiver.status.get(self.path, 200))
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()


__all__ = ["Delivery", "Receiver", "webhook_receiver"]
