"""Are the MCP servers still there? A cheap periodic check once the runtime is ready.

The tools are listed once at start-up (readiness); a server lost afterwards (scaled to 0, its Service gone) would
otherwise go unnoticed until a model call fails. Every :data:`INTERVAL` seconds each server gets one HTTP ``OPTIONS``
request to its MCP URL: any HTTP answer (a 405 included) proves it is there, with no MCP session, no listing and no
change to the cached tools; a connection that fails or times out (:data:`TIMEOUT`) means it is gone.

What it finds goes to the Agent's ``RuntimeReady`` condition (``ToolsUnreachable``, and back to ``Ready`` when the
server answers again), never to ``/readyz``'s status code: ``/readyz`` is the pod's readiness probe, and a pod taken out
of its Service would cut the approvers off from what is pending, which they must still be able to decide (and deny).
``/readyz`` lists it under ``warnings`` instead.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import httpx2

from agent_runtime.app.readiness import Readiness, tools_lost
from agent_runtime.contract.agent_config import McpServerConfig
from agent_runtime.infra.periodic import PeriodicSweep

log = logging.getLogger(__name__)

INTERVAL = 10.0  # seconds between checks
TIMEOUT = 5.0  # one server's answer; so a lost server shows on the Agent within INTERVAL + TIMEOUT + the reporter's 1 s


async def unreachable(client: httpx2.AsyncClient, server: McpServerConfig) -> str | None:
    """Why ``server`` cannot be reached now, or None when it answers at all."""
    try:
        await client.request("OPTIONS", server.url)
    except httpx2.HTTPError as exc:  # refused, reset, unresolvable, timed out: nothing answered
        return f"MCP server {server.name} stopped answering at {server.url}: {type(exc).__name__}: {exc}"
    return None


class ToolServersWatch(PeriodicSweep):
    """``fault``: the servers that stopped answering (a ``ToolsUnreachable`` readiness), or None."""

    name = "gatehouse-tool-servers-watch"

    def __init__(self, servers: Sequence[McpServerConfig], interval: float = INTERVAL, timeout: float = TIMEOUT) -> None:
        super().__init__(interval)
        self._servers = list(servers)
        self._timeout = timeout
        self.fault: Readiness | None = None

    async def sweep(self) -> int:
        async with httpx2.AsyncClient(timeout=self._timeout) as client:
            found = await asyncio.gather(*(unreachable(client, s) for s in self._servers))
        problems = [p for p in found if p is not None]
        fault = tools_lost("; ".join(problems)) if problems else None
        if fault != self.fault:
            if fault is not None:
                log.error("%s", fault.message)
            else:
                log.warning("every MCP server answers again")
        self.fault = fault
        return len(problems)


__all__ = ["INTERVAL", "TIMEOUT", "ToolServersWatch", "unreachable"]
