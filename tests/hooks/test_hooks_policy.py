"""The hook's pure parts (agent_runtime/hooks/mapping.py, shapes.py) and ``onTimeout: ask`` from the CRD through the
translator: Claude Code's tools meet the gateway's policy through the same ``policy.evaluate`` as an Agent's calls,
and today's Agents and MCPGateways (deny/approve) stay valid."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent_runtime.approvals import ApprovalRecord
from agent_runtime.contract.agent_config import ApprovalPolicy, GatewayConfig, McpServerConfig, RuleConfig
from agent_runtime.contract.errors import TranslationError
from agent_runtime.contract.resources import Agent, MCPGateway, ModelConfig, RemoteMCPServer
from agent_runtime.contract.translator import translate, translate_gateway
from agent_runtime.hooks import mapping
from agent_runtime.hooks.shapes import PreToolUseInput
from agent_runtime.ui import held_questions
from tests.support import crd_validation

ROOT = Path(__file__).resolve().parents[2]
GATEWAY = yaml.safe_load((ROOT / "examples" / "gateway" / "gateway.yaml").read_text())
TOOLS = RemoteMCPServer.model_validate(yaml.safe_load((ROOT / "examples" / "file-manager" / "mcp-server.yaml").read_text()))


def _config(*rules: dict[str, Any]) -> GatewayConfig:
    return GatewayConfig(name="laptops", upstream=McpServerConfig(name="nothing", url="http://127.0.0.1:1/mcp",
                                                                           tool_names=[]),
                         approval=ApprovalPolicy(rules=[RuleConfig.model_validate(_flat(r)) for r in rules]))


def _flat(rule: dict[str, Any]) -> dict[str, Any]:
    """A rule as the CRD writes it (``when: {arg, glob|regex}``) in the config's flat shape."""
    return {k: v for k, v in rule.items() if k != "when"} | dict(rule.get("when", {}))


def _call(tool: str, tool_input: dict[str, Any]) -> PreToolUseInput:
    return PreToolUseInput(session_id="s-1", cwd="/home/alice/shop", hook_event_name="PreToolUse", tool_name=tool,
                           tool_input=tool_input)


@pytest.mark.parametrize(("name", "server"), [
    ("mcp__github__create_issue", "github"), ("mcp__my_srv__do__it", "my_srv"), ("Bash", None),
    ("mcp__", None), ("mcp__github", None), ("mcp____x", None),
])
def test_mcp_tool_names_name_their_server(name: str, server: str | None) -> None:
    assert mapping.mcp_server(name) == server


def test_claude_codes_tools_meet_the_agents_rule_shapes() -> None:
    config = _config(
        {"tool": "Bash", "when": {"arg": "command", "regex": r"git\s+push\s.*--force"}, "action": "require"},
        {"tool": "Bash", "when": {"arg": "command", "regex": r"rm\s+-rf"}, "action": "deny"},
        {"tool": "Write", "when": {"arg": "file_path", "glob": "**/.env*"}, "action": "deny"},
        {"tool": "mcp__github__create_issue", "action": "require"},
    )
    verdict = lambda tool, args: mapping.evaluate(config, _call(tool, args)).verdict  # noqa: E731
    assert verdict("Bash", {"command": "git push --force origin main"}) == "require"
    assert verdict("Bash", {"command": "git push origin main"}) == "allow"
    assert verdict("Bash", {"command": "cd /tmp && rm -rf build"}) == "deny"
    assert verdict("Write", {"file_path": "/home/alice/shop/.env.production", "content": "x"}) == "deny"
    assert verdict("Write", {"file_path": "/home/alice/shop/app.py", "content": "x"}) == "allow"
    assert verdict("mcp__github__create_issue", {"title": "t"}) == "require"
    assert verdict("Bash", {"command": ["rm", "-rf", "/"]}) != "allow"  # an odd shape never slips past a gating rule


def _record(**changes: Any) -> ApprovalRecord:
    base = ApprovalRecord(id="apr-1", task_id="held-1", context_id="mcp:alice", confirmation_id="held-1",
                          call_id="mcp-1", tool="Bash", server="claude-code", args={"command": "x"}, args_hash="h",
                          hint="", created_at=0.0, expires_at=60.0)
    return dataclasses.replace(base, **changes)


def _said(record: ApprovalRecord, on_timeout: mapping.OnTimeout = "deny") -> dict[str, Any]:
    out = mapping.decided(record, on_timeout).hookSpecificOutput
    assert out is not None
    return out.model_dump(exclude_none=True)


def test_decided_requests_become_claude_codes_answers() -> None:
    assert _said(_record(status="approved", source="rest"))["permissionDecision"] == "allow"
    edited = _said(_record(status="approved", args={"command": "y"}, original_args={"command": "x"}, edited_by="carol"))
    assert edited["permissionDecision"] == "allow" and edited["updatedInput"] == {"command": "y"}
    denied = _said(_record(status="denied", source="rest", reason="not on Fridays"))
    assert denied["permissionDecision"] == "deny" and "not on Fridays" in denied["permissionDecisionReason"]
    assert _said(_record(status="expired", source="timeout"), "ask")["permissionDecision"] == "ask"
    assert _said(_record(status="expired", source="timeout"), "deny")["permissionDecision"] == "deny"
    answered = _said(_record(tool="AskUserQuestion", status="denied", source="rest", reason="SQLite"))
    assert answered["permissionDecision"] == "deny" and answered["permissionDecisionReason"] == (
        "The user answered this question through Gatehouse: SQLite (rest). Continue with that answer; do not ask it again.")
    picked = _said(_record(tool="AskUserQuestion", status="denied", source="slack",
                           reason=held_questions.answer_reason("Which database?", "SQLite")))
    assert picked["permissionDecisionReason"] == (  # said once, not wrapped in a second "answered through Gatehouse"
        "The user answered in Gatehouse instead of at the terminal. To “Which database?” they answered: SQLite (slack). "
        "Continue with that answer; do not ask it again.")


def test_a_gateway_may_ask_on_timeout_and_todays_gateways_stay_valid() -> None:
    for on_timeout in (None, "deny", "approve", "ask"):
        doc = copy.deepcopy(GATEWAY)
        if on_timeout is not None:
            doc["spec"]["approval"]["onTimeout"] = on_timeout
        assert crd_validation.validate(doc) == [], on_timeout
        config = translate_gateway(MCPGateway.model_validate(doc), {"file-tools": TOOLS}, in_cluster=True)
        assert config.approval.on_timeout == (on_timeout or "deny")
        assert GatewayConfig.from_json(config.to_json()) == config  # the runtime reads what the operator wrote
    doc["spec"]["approval"]["onTimeout"] = "maybe"
    assert crd_validation.validate(doc) != []


def test_an_agent_may_not_ask_on_timeout() -> None:
    models = {"m": ModelConfig.model_validate({"kind": "ModelConfig", "metadata": {"name": "m"},
                                               "spec": {"provider": "Scripted", "model": "s"}})}
    doc = {"apiVersion": "gatehouse.dev/v1alpha1", "kind": "Agent", "metadata": {"name": "a", "namespace": "ns"},
           "spec": {"modelConfig": "m", "approval": {"onTimeout": "ask"}}}
    assert crd_validation.validate(doc) == []  # one schema for both kinds; the translator says why not here
    with pytest.raises(TranslationError) as exc:
        translate(Agent.model_validate(doc), models, {}, in_cluster=False)
    assert any("spec.approval.onTimeout" in str(p) and "MCPGateway" in str(p) for p in exc.value.problems)
    doc["spec"]["approval"]["onTimeout"] = "approve"  # today's Agents translate as before
    assert translate(Agent.model_validate(doc), models, {}, in_cluster=False).approval.on_timeout == "approve"
