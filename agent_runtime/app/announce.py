"""What ``gatehouse-runtime serve`` says once it listens: where to reach the agent over A2A, the inbox and REST.

uvicorn logs nothing at the runtime's default log level (``warning``), so without these lines a person who started
the runtime by hand sees no sign of it. They go to stderr (stdout stays free for whoever pipes the runtime), once the
socket is bound: a port already taken prints uvicorn's error instead, never a URL that does not answer.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Sequence
from typing import TextIO

import uvicorn


def listening_url(host: str, port: int, tls: bool) -> str:
    """``http://127.0.0.1:8080/``; an IPv6 host in brackets."""
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"{'https' if tls else 'http'}://{shown}:{port}/"


def startup_lines(agent: str, base: str, public_url: str | None = None) -> list[str]:
    """The lines printed at start-up for the runtime of ``agent`` listening at ``base`` (ending in ``/``)."""
    lines = [
        f"gatehouse-runtime: agent {agent} is listening on {base}",
        f"  A2A (JSON-RPC):  {base}  (agent card: {base}.well-known/agent-card.json)",
        f"  approvals inbox: {base}ui/",
        f"  REST approvals:  {base}approvals",
    ]
    if public_url and public_url.rstrip("/") + "/" != base:
        lines.append(f"  the agent card announces {public_url}")
    return lines


class AnnouncingServer(uvicorn.Server):
    """A uvicorn server that prints :func:`startup_lines` once its socket is bound (with the real port, also for 0)."""

    def __init__(self, config: uvicorn.Config, agent: str, public_url: str | None, out: TextIO | None = None) -> None:
        super().__init__(config)
        self._agent = agent
        self._public_url = public_url
        self._out = out

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if not self.started:
            return
        port = _bound_port([s for server in self.servers for s in (server.sockets or ())]) or self.config.port
        base = listening_url(self.config.host, port, self.config.ssl_certfile is not None)
        out = self._out or sys.stderr
        out.write("".join(f"{line}\n" for line in startup_lines(self._agent, base, self._public_url)))
        out.flush()


def _bound_port(sockets: Sequence[socket.socket]) -> int | None:
    for sock in sockets:
        name = sock.getsockname()
        if isinstance(name, tuple) and len(name) >= 2:
            return int(name[1])
    return None


__all__ = ["AnnouncingServer", "listening_url", "startup_lines"]
