"""ADK ``McpToolset`` per ``AgentConfig.mcp_servers`` entry, and listing their tools once at start-up.

Each toolset connects over streamable HTTP or SSE, offers only the server's ``tool_names``, sends the
headers whose values come from the environment variables the config names (read when the toolset is
built, at start-up), and caches ``tools/list`` so no request re-lists tools. While that list is cached,
every model call gets the same tool objects with their declarations built once (:class:`CachingMcpToolset`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from google.adk.agents.readonly_context import ReadonlyContext
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.mcp_tool import McpTool, McpToolset
from google.adk.tools.mcp_tool.mcp_session_manager import SseConnectionParams, StreamableHTTPConnectionParams
from google.genai import types

from agent_runtime.agent_config import McpServerConfig

TOOL_LIST_CACHE_SECONDS = 3600.0


class MissingHeaderSecret(RuntimeError):
    pass


def _headers(server: McpServerConfig, env: Mapping[str, str]) -> dict[str, str]:
    headers = {}
    for header in server.headers:
        name = header.value_from.env
        if name not in env:
            raise MissingHeaderSecret(
                f"MCP server {server.name!r}: header {header.name!r} needs environment variable {name} "
                f"(from Secret {header.value_from.secret!r}, key {header.value_from.key!r}), which is not set"
            )
        headers[header.name] = env[name]
    return headers


class DeclaredOnceMcpTool(McpTool):
    """An ``McpTool`` whose declarations (plain and fenced) are built on first use and then reused.

    ADK rebuilds both on every model call (JSON schema → Gemini schema, description fencing): with four tools,
    7% of the function calls of a pause and its resume. The declarations derive only from the MCP tool listing,
    which does not change while the tool object lives, and nothing downstream mutates a declaration it is handed.
    """

    def _get_declaration(self) -> types.FunctionDeclaration:
        return self._declared("_plain_declaration", super()._get_declaration)

    def _build_fenced_declaration(self) -> types.FunctionDeclaration:
        return self._declared("_fenced_declaration", super()._build_fenced_declaration)

    def _declared(self, slot: str, build: Any) -> types.FunctionDeclaration:
        declaration = self.__dict__.get(slot)
        if declaration is None:
            declaration = self.__dict__[slot] = build()
        return declaration


class CachingMcpToolset(McpToolset):
    """``McpToolset`` that hands out the same tool objects for as long as its cached ``tools/list`` is current.

    ADK's ``get_tools`` builds fresh ``McpTool`` objects on every model call, with no factory to override; the
    first object built for a listed tool is kept (re-classed as :class:`DeclaredOnceMcpTool`, which adds no
    state but the memo) and returned again while the listing it came from is the cached one.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._kept: dict[str, tuple[object, McpTool]] = {}  # tool name → (the listing entry it came from, tool)

    async def get_tools(self, readonly_context: ReadonlyContext | None = None) -> list[BaseTool]:
        return [self._keep(tool) for tool in await super().get_tools(readonly_context)]

    def _keep(self, tool: BaseTool) -> BaseTool:
        if type(tool) is not McpTool:
            return tool
        listed = tool.raw_mcp_tool
        kept = self._kept.get(tool.name)
        if kept is not None and kept[0] is listed:
            return kept[1]
        tool.__class__ = DeclaredOnceMcpTool
        self._kept[tool.name] = (listed, tool)
        return tool


def build_toolset(server: McpServerConfig, env: Mapping[str, str] | None = None) -> McpToolset:
    headers = _headers(server, os.environ if env is None else env) or None
    params: StreamableHTTPConnectionParams | SseConnectionParams
    if server.protocol == "SSE":
        params = SseConnectionParams(url=server.url, headers=headers, timeout=server.timeout_seconds)
    else:
        params = StreamableHTTPConnectionParams(url=server.url, headers=headers, timeout=server.timeout_seconds)
    return CachingMcpToolset(
        connection_params=params,
        tool_filter=list(server.tool_names),
        tool_list_cache_ttl_seconds=TOOL_LIST_CACHE_SECONDS,
    )


class ToolServerUnreachable(Exception):
    """Listing one MCP server's tools failed; says which server, and why."""

    def __init__(self, server: str, cause: BaseException) -> None:
        self.server = server
        super().__init__(f"MCP server {server}: {type(cause).__name__}: {cause}")


async def list_tool_servers(toolsets: Mapping[str, McpToolset]) -> dict[str, str | None]:
    """List each server's tools (fills the cache); return tool name → server name."""
    servers: dict[str, str | None] = {}
    for server_name, toolset in toolsets.items():
        try:
            tools = await toolset.get_tools()
        except Exception as exc:
            raise ToolServerUnreachable(server_name, exc) from exc
        for tool in tools:
            servers[tool.name] = server_name
    return servers


__all__ = [
    "CachingMcpToolset", "DeclaredOnceMcpTool", "MissingHeaderSecret", "ToolServerUnreachable", "build_toolset",
    "list_tool_servers",
]
