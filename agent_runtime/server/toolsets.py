"""ADK ``McpToolset`` per ``AgentConfig.mcp_servers`` entry, and listing their tools once at start-up.

Each toolset connects over streamable HTTP or SSE, offers only the server's ``tool_names``, sends the
headers whose values come from the environment variables the config names (read when the toolset is
built, at start-up), and caches ``tools/list`` so no request re-lists tools.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from google.adk.tools.mcp_tool import McpToolset
from google.adk.tools.mcp_tool.mcp_session_manager import SseConnectionParams, StreamableHTTPConnectionParams

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


def build_toolset(server: McpServerConfig, env: Mapping[str, str] | None = None) -> McpToolset:
    headers = _headers(server, os.environ if env is None else env) or None
    params: StreamableHTTPConnectionParams | SseConnectionParams
    if server.protocol == "SSE":
        params = SseConnectionParams(url=server.url, headers=headers, timeout=server.timeout_seconds)
    else:
        params = StreamableHTTPConnectionParams(url=server.url, headers=headers, timeout=server.timeout_seconds)
    return McpToolset(
        connection_params=params,
        tool_filter=list(server.tool_names),
        tool_list_cache_ttl_seconds=TOOL_LIST_CACHE_SECONDS,
    )


async def list_tool_servers(toolsets: Mapping[str, McpToolset]) -> dict[str, str | None]:
    """List each server's tools (fills the cache); return tool name → server name."""
    servers: dict[str, str | None] = {}
    for server_name, toolset in toolsets.items():
        for tool in await toolset.get_tools():
            servers[tool.name] = server_name
    return servers


__all__ = ["MissingHeaderSecret", "build_toolset", "list_tool_servers"]
