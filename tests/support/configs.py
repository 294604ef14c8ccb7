"""Small AgentConfigs for unit tests of the policy and the gate: server ``files`` gates ``delete_file``; server
``other`` offers ``search``, ungated."""

from __future__ import annotations

from typing import Any

from agent_runtime.contract.agent_config import AgentConfig, ApprovalPolicy, CardConfig, McpServerConfig, ScriptedModel


def files_config(**approval: Any) -> AgentConfig:
    """The two-server config with ``approval`` as its ApprovalPolicy's fields."""
    return AgentConfig(
        name="a",
        model=ScriptedModel(model="s"),
        card=CardConfig(name="a"),
        mcp_servers=[
            McpServerConfig(name="files", url="http://x/mcp", tool_names=["read_file", "write_file", "delete_file"],
                            require_approval=["delete_file"]),
            McpServerConfig(name="other", url="http://y/mcp", tool_names=["search"]),
        ],
        approval=ApprovalPolicy(**approval),
    )
