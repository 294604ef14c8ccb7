"""What the gateway does with one ``tools/call``, decided by the same policy as an Agent's calls: a pure function of
the GatewayConfig and the call, so that the words a client reads and the audit's ``rule`` come from one place."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from agent_runtime.contract import policy
from agent_runtime.contract.agent_config import GatewayConfig

RouteKind = Literal["forward", "refuse", "hold", "unknown"]


@dataclass(frozen=True)
class Route:
    kind: RouteKind
    message: str  # what the client (the model) reads when the call does not run now
    decision: policy.Decision | None = None  # for forward, refuse and hold: the policy's decision


def offered(config: GatewayConfig, tool: str) -> bool:
    """Whether the gateway offers ``tool`` (``spec.upstream.toolNames``; empty: every upstream tool; no upstream: none)."""
    if config.upstream is None:
        return False
    return not config.upstream.tool_names or tool in config.upstream.tool_names


def route(config: GatewayConfig, tool: str, args: dict[str, Any]) -> Route:
    """Forward an allowed call, refuse a denied one with the policy's reason, hold a gated one for a human; a tool the
    gateway does not offer is ``unknown`` (the upstream is never asked about it)."""
    if not offered(config, tool) or config.upstream is None:
        return Route("unknown", f"Unknown tool: {tool!r} is not offered by this gateway.")
    decision = policy.evaluate(config, config.upstream.name, tool, args)
    if decision.verdict == "allow":
        return Route("forward", "", decision)
    if decision.verdict == "deny":
        return Route("refuse", f"The call to {tool} was not run: {decision.hint}.", decision)
    return Route("hold", f"The call to {tool} needs a human's approval ({decision.hint}).", decision)


__all__ = ["Route", "RouteKind", "offered", "route"]
