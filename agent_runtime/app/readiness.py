"""The runtime's readiness, in one value: what ``/readyz`` answers, and what the runtime reports on its Agent as
the condition ``RuntimeReady`` (:mod:`agent_runtime.kube.runtime_ready`, which reads it through its ``Readiness``
protocol: the Kubernetes side sits below the assembly).

The runtime is ready once its stores are open and the tools of every MCP server are listed
(:meth:`agent_runtime.app.factory.Runtime.open`); until then it says why not, with one CamelCase reason:

- ``Starting``: opening the stores, listing the tools (the first attempt has not failed yet);
- ``Recovering``: the tools are listed; tasks whose last approval was decided just before a restart are being
  resumed (at most :data:`agent_runtime.app.factory.RECOVERY_READY_WAIT` seconds; a longer recovery finishes in the
  background after the runtime reports ready);
- ``ToolsUnreachable``: listing the MCP tools failed (a server down, a wrong URL): retried every second;
- ``GatedToolMissing``: the tools are listed, but a tool the Agent gates (``requireApproval``, a ``require`` rule,
  ``requireForAllTools``) is not among what its server offers: a misspelt or removed tool; listed again every
  few seconds until it appears;
- ``DatabaseUnavailable``: opening the stores failed (the database unreachable, bad credentials): the process
  exits, and the pod restarts; or, once open, the database went bad (:class:`DatabaseWatch`): the sqlite file
  was removed or replaced, or cannot be written, or Postgres stopped answering. Checked every two seconds and on
  ``/readyz``; it takes precedence over the other reasons but ``Stopping``, and clears when the check passes again
  (a removed file never comes back: the runtime must restart);
- ``Stopping``: shutting down (never reported on the Agent: another pod may be taking over).

Once ready, a server lost later is the Agent's condition only (:mod:`agent_runtime.app.tool_watch`): ``/readyz``
keeps 200 so the pod stays in its Service for the approvers.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from agent_runtime.contract.errors import without_repeats
from agent_runtime.infra.periodic import PeriodicSweep

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Readiness:
    ready: bool
    reason: str  # one CamelCase word (a condition's reason)
    message: str  # in words; what /readyz lists under "problems" while not ready


STARTING = Readiness(False, "Starting", "starting: opening the stores and listing the MCP tools")
STOPPING = Readiness(False, "Stopping", "shutting down")
RECOVERING = Readiness(False, "Recovering", "resuming tasks whose approvals were decided before a restart")


def ready(servers: Sequence[str]) -> Readiness:
    listed = f"the tools of {', '.join(servers)} are listed" if servers else "no MCP servers to list"
    return Readiness(True, "Ready", f"ready: the stores are open and {listed}")


def tools_unreachable(problem: str) -> Readiness:
    return Readiness(False, "ToolsUnreachable", f"listing MCP tools: {without_repeats(problem)}")


def tools_lost(problem: str) -> Readiness:
    """A server that answered at start-up no longer does (:mod:`agent_runtime.app.tool_watch`)."""
    return Readiness(False, "ToolsUnreachable", without_repeats(problem))


def gated_tools_missing(missing: Mapping[str, tuple[str, str]]) -> Readiness:
    """``missing``: tool → (server, the field that gates it), for gated tools the server does not offer."""
    listed = "; ".join(f"MCP server {server} does not offer {tool}, which {where} gates"
                       for tool, (server, where) in sorted(missing.items()))
    return Readiness(False, "GatedToolMissing", f"{listed} (a gate on a tool that is not there never asks: correct the "
                                                "name in toolNames and the gate, or the server)")


def database_unavailable(problem: str) -> Readiness:
    return Readiness(False, "DatabaseUnavailable", f"opening the stores: {problem}")


def database_fault(problem: str) -> Readiness:
    """The open database went bad (``problem``: :meth:`agent_runtime.infra.database.Database.check`'s words)."""
    return Readiness(False, "DatabaseUnavailable", problem)


class DatabaseWatch(PeriodicSweep):
    """Runs ``check`` (what is wrong with the database, or None) every ``interval`` seconds, so the Agent's
    ``RuntimeReady`` follows without anyone probing; ``/readyz`` calls :meth:`refresh`, which checks again when the
    last check is older than ``max_age`` (a probe every few seconds costs at most one check a second)."""

    name = "gatehouse-database-watch"

    def __init__(self, check: Callable[[], Awaitable[str | None]], interval: float = 2.0, max_age: float = 1.0) -> None:
        super().__init__(interval)
        self._check = check
        self._max_age = max_age
        self._checked = float("-inf")
        self.fault: Readiness | None = None

    async def sweep(self) -> int:
        await self.refresh(max_age=0.0)
        return 0

    async def refresh(self, max_age: float | None = None) -> Readiness | None:
        if time.monotonic() - self._checked < (self._max_age if max_age is None else max_age):
            return self.fault
        problem = await self._check()
        self._checked = time.monotonic()
        if problem is not None and (self.fault is None or self.fault.message != problem):
            log.error("database unavailable: %s", problem)
        elif problem is None and self.fault is not None:
            log.warning("database available again")
        self.fault = None if problem is None else database_fault(problem)
        return self.fault


__all__ = [
    "RECOVERING", "STARTING", "STOPPING", "DatabaseWatch", "Readiness", "database_fault", "database_unavailable",
    "gated_tools_missing", "ready", "tools_lost", "tools_unreachable",
]
