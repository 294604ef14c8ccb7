"""The runtime's readiness, in one value: what ``/readyz`` answers, and what the runtime reports on its Agent as
the condition ``RuntimeReady`` (:mod:`agent_runtime.kube.runtime_ready`, which reads it through its ``Readiness``
protocol: the Kubernetes side sits below the assembly).

The runtime is ready once its stores are open and the tools of every MCP server are listed
(:meth:`agent_runtime.app.factory.Runtime.open`); until then it says why not, with one CamelCase reason:

- ``Starting``: opening the stores, listing the tools (the first attempt has not failed yet);
- ``ToolsUnreachable``: listing the MCP tools failed (a server down, a wrong URL): retried every second;
- ``DatabaseUnavailable``: opening the stores failed (the database unreachable, bad credentials): the process
  exits, and the pod restarts;
- ``Stopping``: shutting down (never reported on the Agent: another pod may be taking over).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Readiness:
    ready: bool
    reason: str  # one CamelCase word (a condition's reason)
    message: str  # in words; what /readyz lists under "problems" while not ready


STARTING = Readiness(False, "Starting", "starting: opening the stores and listing the MCP tools")
STOPPING = Readiness(False, "Stopping", "shutting down")


def ready(servers: Sequence[str]) -> Readiness:
    listed = f"the tools of {', '.join(servers)} are listed" if servers else "no MCP servers to list"
    return Readiness(True, "Ready", f"ready: the stores are open and {listed}")


def tools_unreachable(problem: str) -> Readiness:
    return Readiness(False, "ToolsUnreachable", f"listing MCP tools: {problem}")


def database_unavailable(problem: str) -> Readiness:
    return Readiness(False, "DatabaseUnavailable", f"opening the stores: {problem}")


__all__ = ["STARTING", "STOPPING", "Readiness", "database_unavailable", "ready", "tools_unreachable"]
