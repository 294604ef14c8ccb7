"""``/metrics``: Prometheus text; public unless told otherwise, on the main port unless told otherwise.

- ``--metrics-token-file FILE``: ``/metrics`` answers only ``Authorization: Bearer <the file's token>`` (compared in
  constant time), 401 otherwise. Prometheus sends it with ``authorization: {credentials_file: …}``.
- ``--metrics-port N``: ``/metrics`` is served on port N of the same ``--host`` by a second uvicorn server in the
  runtime's process and event loop, and the main port has none (404), so a NetworkPolicy or a Service can expose one
  without the other. The server is started by the app's lifespan, after the stores open, and stopped by it; it
  installs no signal handlers of its own (the main server's stop the process, and with it this one) and, like every
  server the project starts, it ignores proxy headers.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import uvicorn
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from agent_runtime.access.tokens import bearer

PATH = "/metrics"


def read_token(path: Path) -> str:
    token = path.read_text().strip()
    if not token:
        raise ValueError(f"--metrics-token-file {path}: the file is empty")
    return token


def metrics_route(render: Callable[[], tuple[bytes, str]], token: str | None) -> Route:
    """``GET /metrics``, behind ``token`` when there is one."""

    async def metrics(request: Request) -> Response:
        if token is not None:
            sent = bearer(request.headers.get("authorization")) or ""
            if not hmac.compare_digest(sent.encode(), token.encode()):
                return JSONResponse({"error": "/metrics needs 'Authorization: Bearer <the metrics token>'"}, 401,
                                    headers={"www-authenticate": 'Bearer realm="gatehouse-metrics"'})
        body, content_type = render()
        return Response(body, media_type=content_type)

    return Route(PATH, metrics)


class _Inner(uvicorn.Server):
    """A second server in the process: the main one handles the signals, and its lifespan stops this one."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class MetricsServer:
    def __init__(self, app: ASGIApp, host: str, port: int) -> None:
        self.host, self.port = host, port
        # log_config=None: keep the logging the main server configured
        config = uvicorn.Config(app, proxy_headers=False, lifespan="off", log_config=None, access_log=False,
                                timeout_graceful_shutdown=1)
        self._server = _Inner(config)
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        try:
            sock = socket.create_server((self.host, self.port), family=family)
        except OSError as exc:
            raise RuntimeError(f"--metrics-port {self.port}: cannot listen on {self.host}: {exc.strerror or exc}") from None
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]), name="gatehouse-metrics-server")
        while not self._server.started and not self._task.done():
            await asyncio.sleep(0.01)
        if self._task.done():
            self._task.result()  # it failed to start: say why

    async def stop(self) -> None:
        if self._task is None:
            return
        self._server.should_exit = True
        with contextlib.suppress(Exception):
            await self._task


__all__ = ["PATH", "MetricsServer", "metrics_route", "read_token"]
