"""The approval policy, evaluated at call time: may this call run, must it wait for a human, or is it refused?

Pure: a function of the AgentConfig (or an MCPGateway's GatewayConfig) and the call. Order of evaluation (first
that applies wins):

1. ``approval.rules`` in order — a rule applies when its tool matches and its ``when`` condition (if any)
   matches the argument (paths normalised first); its action decides: ``require``, ``allow`` or ``deny``.
2. ``mcpServer.requireApproval`` of the server that offers the tool → require.
3. ``approval.requireForAllTools`` unless the tool is in ``exempt`` → require.
4. Otherwise the call runs.

A gated call also gets its approvers (:mod:`agent_runtime.contract.authority`): the matching rule's own, else the
tool's (``approval.tool_approvers``), else the default (``approval.approvers``), else None (the requester
decides alone). :func:`requester_only` names the places of an Agent that gate calls with no approvers.

Anything unexpected in the arguments (a rule's argument that is not a string, say) makes a ``require``
or ``deny`` rule apply rather than silently not match: doubt gates, it never allows.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from agent_runtime.contract.agent_config import ApprovalPolicy, ApproversConfig, McpServerConfig, RuleConfig
from agent_runtime.contract.globs import glob_match, normalise_path

PolicyAction = Literal["allow", "require", "deny"]


class PolicySource(Protocol):
    """What the policy reads of an AgentConfig, or of an MCPGateway's GatewayConfig (its upstream as the one server)."""

    @property
    def approval(self) -> ApprovalPolicy: ...

    @property
    def mcp_servers(self) -> Sequence[McpServerConfig]: ...


@dataclass(frozen=True)
class Decision:
    verdict: PolicyAction
    hint: str
    approvers: ApproversConfig | None = None  # for a require verdict: who may decide
    rule: str = ""  # which part of the Agent decided (spec.approval.rules[0], …; "" when nothing did): for the audit
    allow_edit: bool = False  # for a require verdict: an approver may approve with changed arguments (contract/edits.py)


def _rule_matches(rule: RuleConfig, args: dict[str, Any]) -> bool:
    if rule.arg is None:
        return True
    if rule.arg not in args:
        return False
    value = args[rule.arg]
    if not isinstance(value, str):
        # Fail closed: an odd argument type cannot slip past a gating rule.
        return rule.action != "allow"
    if rule.glob is not None:
        return glob_match(rule.glob, value)
    assert rule.regex is not None
    return re.search(rule.regex, normalise_path(value)) is not None


def _describe(rule: RuleConfig) -> str:
    if rule.arg is None:
        return f"rule for {rule.tool}"
    matcher = f"glob {rule.glob!r}" if rule.glob is not None else f"regex {rule.regex!r}"
    return f"argument {rule.arg!r} matches {matcher}"


def _approvers(config: PolicySource, tool: str) -> ApproversConfig | None:
    return config.approval.tool_approvers.get(tool) or config.approval.approvers


def evaluate(config: PolicySource, server: str | None, tool: str, args: dict[str, Any]) -> Decision:
    """Decide one call of ``tool`` (offered by MCP server ``server``, or None for built-in tools)."""
    for i, rule in enumerate(config.approval.rules):
        if rule.tool == tool and _rule_matches(rule, args):
            where = f"spec.approval.rules[{i}]"
            if rule.action == "deny":
                return Decision("deny", f"refused by policy: {_describe(rule)}", rule=where)
            if rule.action == "require":
                approvers = rule.approvers or _approvers(config, tool)
                editable = rule.allow_edit or tool in config.approval.editable_tools
                return Decision("require", f"approval required: {_describe(rule)}", approvers, where, editable)
            return Decision("allow", f"allowed by policy: {_describe(rule)}", rule=where)
    for mcp in config.mcp_servers:
        if mcp.name == server and tool in mcp.require_approval:
            hint = f"{tool} on {mcp.name} requires approval (requireApproval)"
            return Decision("require", hint, _approvers(config, tool), f"spec.tools[{mcp.name}].mcpServer.requireApproval",
                            tool in config.approval.editable_tools)
    if config.approval.require_for_all_tools and tool not in config.approval.exempt:
        hint = "every tool requires approval (requireForAllTools)"
        return Decision("require", hint, _approvers(config, tool), "spec.approval.requireForAllTools",
                        tool in config.approval.editable_tools)
    return Decision("allow", "not gated")


def gated_mcp_tools(config: PolicySource) -> dict[str, tuple[str, str]]:
    """Each MCP tool the Agent offers (``toolNames``) that may need an approval: tool → (its server, the field that
    gates it). Used at start-up: a gated tool the server does not offer is a misconfiguration to report, never a gate
    that silently never fires."""
    gated: dict[str, tuple[str, str]] = {}
    for mcp in config.mcp_servers:
        for tool in mcp.tool_names:
            if tool in mcp.require_approval:
                gated[tool] = (mcp.name, f"spec.tools[{mcp.name}].mcpServer.requireApproval")
            elif where := next((f"spec.approval.rules[{i}]" for i, r in enumerate(config.approval.rules)
                                if r.tool == tool and r.action == "require"), None):
                gated[tool] = (mcp.name, where)
            elif config.approval.require_for_all_tools and tool not in config.approval.exempt:
                gated[tool] = (mcp.name, "spec.approval.requireForAllTools")
    return gated


def requester_only(config: PolicySource) -> tuple[str, ...]:
    """Where ``config`` gates calls that get no approvers, so that only their requester may decide them (``rules[0]
    (read_file)``, ``requireApproval (delete_file)``, ``requireForAllTools``); empty when every gated call has some."""
    if config.approval.approvers is not None:
        return ()
    named = config.approval.tool_approvers
    found = [f"spec.approval.rules[{i}] ({rule.tool})" for i, rule in enumerate(config.approval.rules)
             if rule.action == "require" and rule.approvers is None and rule.tool not in named]
    found += [f"spec.tools[{mcp.name}].mcpServer.requireApproval ({tool})" for mcp in config.mcp_servers
              for tool in mcp.require_approval if tool not in named]
    if config.approval.require_for_all_tools:
        found.append("spec.approval.requireForAllTools")
    return tuple(found)


def server_of(config: PolicySource, tool: str) -> str | None:
    """The MCP server that offers ``tool`` (tool names are unique per agent; the translator checks it)."""
    for mcp in config.mcp_servers:
        if tool in mcp.tool_names:
            return mcp.name
    return None


__all__ = ["Decision", "PolicyAction", "PolicySource", "evaluate", "gated_mcp_tools", "requester_only", "server_of"]
