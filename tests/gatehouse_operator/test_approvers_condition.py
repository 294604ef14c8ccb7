"""The ``ApproversNamed`` condition (gatehouse_operator/approvers.py): an Agent whose gated calls have no approvers is
told that only their requester decides them (issue 31: before, any authenticated caller could on REST and kubectl)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from agent_runtime.contract.agent_config import AgentConfig
from agent_runtime.contract.manifests import select_agent_config
from agent_runtime.contract.policy import requester_only
from gatehouse_operator.approvers import approvers_condition

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "file-manager"


def example(tmp_path: Path, **approval: Any) -> AgentConfig:
    """The example Agent as shipped, with ``spec.approval`` fields replaced (None removes one)."""
    agent = yaml.safe_load((EXAMPLE / "agent.yaml").read_text())
    for key, value in approval.items():
        if value is None:
            agent["spec"]["approval"].pop(key, None)
        else:
            agent["spec"]["approval"][key] = value
    (tmp_path / "agent.yaml").write_text(yaml.safe_dump(agent))
    return select_agent_config([tmp_path / "agent.yaml", EXAMPLE / "modelconfig.yaml", EXAMPLE / "mcp-server.yaml"])


def test_the_example_names_its_approvers(tmp_path: Path) -> None:
    condition = approvers_condition(example(tmp_path))
    assert (condition.type, condition.status, condition.reason) == ("ApproversNamed", True, "Named")


def test_an_agent_that_relied_on_the_old_default_is_told_where_only_the_requester_decides(tmp_path: Path) -> None:
    config = example(tmp_path, approvers=None)
    assert requester_only(config) == (
        "spec.approval.rules[0] (read_file)", "spec.tools[file-tools].mcpServer.requireApproval (delete_file)",
        "spec.tools[file-tools].mcpServer.requireApproval (write_file)")
    condition = approvers_condition(config)
    assert (condition.status, condition.reason) == (False, "RequesterOnly")
    assert condition.message.startswith("spec.approval.rules[0] (read_file), spec.tools[file-tools]")
    assert "only the person who asked decides them" in condition.message and "anyAuthenticated: true" in condition.message


def test_approvers_per_tool_and_rule_cover_what_they_name(tmp_path: Path) -> None:
    per_tool = example(tmp_path, approvers=None, toolApprovers=[{"tool": "delete_file", "approvers": {"groups": ["sre"]}},
                                                      {"tool": "write_file", "approvers": {"anyAuthenticated": True}}])
    assert requester_only(per_tool) == ("spec.approval.rules[0] (read_file)",)
    rules = [{"tool": "read_file", "when": {"arg": "path", "glob": "**/.env*"}, "approvers": {"users": ["alice"]}}]
    covered = example(tmp_path, approvers=None, rules=rules, toolApprovers=[
        {"tool": "delete_file", "approvers": {"groups": ["sre"]}}, {"tool": "write_file", "approvers": {"groups": ["sre"]}}])
    assert requester_only(covered) == ()
    assert approvers_condition(covered).status is True
    everything = example(tmp_path, approvers=None, rules=[], requireForAllTools=True)
    assert "spec.approval.requireForAllTools" in requester_only(everything)
