"""The gateway's MCP server side: ``tools/list`` shows the upstream's tools the gateway offers, ``tools/call`` is
routed by :mod:`.routing`. Built on the MCP SDK's low-level server, which serves it over streamable HTTP.

What is offered: tools only. The gateway announces no resources and no prompts (a client asking gets "method not
found"): the approval policy is written about tool calls, and a resource read or a prompt could carry what a gated
tool guards. An upstream's question to the user (MCP elicitation, an ``input_required`` result on the 2026-07-28
protocol) is handed back to the client as it came, and the client's retry with the answer is routed like any call,
with the same arguments, so the policy decides it again (docs/gateway.md).
"""

from __future__ import annotations

import logging
from typing import Any

import mcp_types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from starlette.requests import Request

from agent_runtime.access.middleware import principal_of
from agent_runtime.contract.agent_config import GatewayConfig
from agent_runtime.contract.principals import Principal, anonymous
from agent_runtime.gateway import routing
from agent_runtime.gateway.held import HeldCalls, Progress, refusal
from agent_runtime.gateway.upstream import Upstream

log = logging.getLogger(__name__)

NOT_HELD_YET = (
    "{message} This gateway does not hold calls for a decision yet, so the call was not run; "
    "ask a person to run it, or call a tool that needs no approval."
)


def _error(text: str) -> mcp_types.CallToolResult:
    return mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text=text)], is_error=True)


def caller(ctx: ServerRequestContext[Any]) -> Principal:
    """The principal the gateway's authentication put on this request (the requester of a held call)."""
    return principal_of(ctx.request) if isinstance(ctx.request, Request) else anonymous()


def _progress(ctx: ServerRequestContext[Any]) -> Progress | None:
    """Progress notifications to the waiting client, when it asked for them (a progress token): they keep its stream
    busy, and a client that resets its timeout on progress waits as long as the decision takes."""
    meta: Any = ctx.meta or {}
    token = meta.get("progress_token", meta.get("progressToken")) if isinstance(meta, dict) else None
    if token is None:
        return None
    count = 0

    async def tell(message: str) -> None:
        nonlocal count
        count += 1
        await ctx.session.send_progress_notification(token, float(count), None, message,
                                                     str(ctx.request_id) if ctx.request_id is not None else None)

    return tell


async def pass_through(
    config: GatewayConfig, upstream: Upstream, params: mcp_types.CallToolRequestParams
) -> mcp_types.CallToolResult | mcp_types.InputRequiredResult:
    """An allowed call, sent upstream as it came (an answer to an upstream's question included): the one piece of code
    both the SDK's server and :mod:`.fast_calls` run for it."""
    try:
        return await upstream.call_tool(
            params.name, dict(params.arguments or {}), input_responses=params.input_responses,
            request_state=params.request_state,
        )
    except Exception as exc:  # the upstream failed or could not be reached: the model reads that, not a crash
        log.warning("gateway %s: upstream call %s failed: %s", config.name, params.name, exc)
        upstream_name = config.upstream.name if config.upstream is not None else ""
        return _error(f"The upstream tool server {upstream_name!r} failed on {params.name}: {exc}. "
                      "The call may or may not have run there.")


def build_server(config: GatewayConfig, upstream: Upstream, held: HeldCalls | None = None) -> Server[Any]:
    """``held``: where gated calls wait for a decision; None: a gated call is refused (fails closed)."""
    upstream_name = config.upstream.name if config.upstream is not None else ""

    async def forward(tool: str, args: dict[str, Any]) -> mcp_types.CallToolResult:
        try:
            found = await upstream.call_tool(tool, args)
        except Exception as exc:
            return _error(f"The upstream tool server {upstream_name!r} failed on {tool}: {exc}. "
                          "The call may or may not have run there.")
        if isinstance(found, mcp_types.CallToolResult):
            return found
        return _error(f"The upstream tool server asked a question about the approved call to {tool}; an approved call "
                      "is run once, as approved, so it was not answered.")

    async def list_tools(
        ctx: ServerRequestContext[Any], params: mcp_types.PaginatedRequestParams | None
    ) -> mcp_types.ListToolsResult:
        tools = [t for t in await upstream.list_tools() if routing.offered(config, t.name)]
        return mcp_types.ListToolsResult(tools=tools)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: mcp_types.CallToolRequestParams
    ) -> mcp_types.CallToolResult | mcp_types.InputRequiredResult:
        args = dict(params.arguments or {})
        route = routing.route(config, params.name, args)
        who = caller(ctx)
        if route.kind == "hold" and held is not None and route.decision is not None:
            record = await held.open_request(who, params.name, args, route.decision)
            log.info("gateway %s: %s held as %s for %s", config.name, params.name, record.id, who.id)
            decided = await held.wait(record, _progress(ctx))
            if decided.status == "approved":
                return await held.run_approved(decided, forward)
            return refusal(decided)
        if route.kind != "forward":
            log.info("gateway %s: %s %s for %s", config.name, route.kind, params.name, who.id)
            return _error(NOT_HELD_YET.format(message=route.message) if route.kind == "hold" else route.message)
        return await pass_through(config, upstream, params)

    def input_schema(name: str) -> dict[str, Any] | None:
        """For the SDK's ``Mcp-Param-*`` header check: the offered tool's schema from the upstream's last listing,
        instead of a ``tools/list`` upstream per call (None: not listed yet, and the SDK skips the check, as when a
        listing fails; the gateway routes by the arguments and never forwards those headers)."""
        return upstream.input_schema(name) if routing.offered(config, name) else None

    return Server(
        config.name,
        description=config.description or None,
        instructions=config.description or None,
        get_tool_input_schema=input_schema,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


__all__ = ["build_server", "caller", "pass_through"]
