from __future__ import annotations

import pytest

from agent_runtime.contract.agent_config import RuleConfig
from agent_runtime.contract.globs import glob_match, normalise_path
from agent_runtime.contract.policy import evaluate, gated_mcp_tools, server_of
from tests.support.configs import files_config

_config = files_config


ENV_RULE = RuleConfig(tool="read_file", action="require", arg="path", glob="**/.env*")


@pytest.mark.parametrize(
    ("path", "verdict"),
    [(".env", "require"), ("/data/.env", "require"), ("/data/.env.local", "require"), ("a/b/../.env", "require"),
     ("/data//x/./../.env", "require"), ("notes.txt", "allow"), ("/data/env", "allow"), ("/data/.env/../a", "allow")],
)
def test_glob_rule_gates_env_files_after_normalisation(path: str, verdict: str) -> None:
    assert evaluate(_config(rules=[ENV_RULE]), "files", "read_file", {"path": path}).verdict == verdict


def test_require_approval_is_scoped_to_its_server() -> None:
    config = _config()
    assert evaluate(config, "files", "delete_file", {}).verdict == "require"
    assert evaluate(config, "other", "delete_file", {}).verdict == "allow"
    assert server_of(config, "delete_file") == "files"


def test_require_for_all_tools_with_exempt() -> None:
    config = _config(require_for_all_tools=True, exempt=["search"])
    assert evaluate(config, "files", "read_file", {"path": "a"}).verdict == "require"
    assert evaluate(config, "other", "search", {"q": "x"}).verdict == "allow"


def test_rules_first_match_wins_and_deny_refuses() -> None:
    rules = [
        RuleConfig(tool="write_file", action="deny", arg="path", regex=r"^/etc/"),
        RuleConfig(tool="write_file", action="allow", arg="path", glob="/tmp/**"),
        RuleConfig(tool="write_file", action="require"),
    ]
    config = _config(rules=rules)
    assert evaluate(config, "files", "write_file", {"path": "/tmp/../etc/passwd"}).verdict == "deny"
    assert evaluate(config, "files", "write_file", {"path": "/tmp/a/b.txt"}).verdict == "allow"
    assert evaluate(config, "files", "write_file", {"path": "/home/x"}).verdict == "require"


def test_non_string_argument_never_slips_past_a_gating_rule() -> None:
    config = _config(rules=[ENV_RULE])
    assert evaluate(config, "files", "read_file", {"path": [".env"]}).verdict == "require"
    allow = _config(rules=[RuleConfig(tool="delete_file", action="allow", arg="path", glob="/tmp/**")])
    assert evaluate(allow, "files", "delete_file", {"path": {"p": "/tmp/x"}}).verdict == "require"


@pytest.mark.parametrize(
    ("raw", "normal"), [("//a//b/", "/a/b"), ("a/./b/../c", "a/c"), ("/../x", "/x"), ("a\\..\\b", "b"), ("", "")]
)
def test_normalise_path(raw: str, normal: str) -> None:
    assert normalise_path(raw) == normal


def test_glob_segments() -> None:
    assert glob_match("/data/*.txt", "/data/a.txt")
    assert not glob_match("/data/*.txt", "/data/sub/a.txt")
    assert glob_match("/data/**", "/data/sub/a.txt")
    assert glob_match("file?.md", "file1.md")
    assert not glob_match("file?.md", "file/.md")


def test_each_decision_names_the_rule_that_made_it() -> None:
    """What the audit records as the rule that gated a call: a path into the Agent's spec."""
    rules = [ENV_RULE, RuleConfig(tool="write_file", action="deny", arg="path", regex=r"^/etc/")]
    config = _config(rules=rules, require_for_all_tools=True, exempt=["search"])
    assert evaluate(config, "files", "read_file", {"path": ".env"}).rule == "spec.approval.rules[0]"
    assert evaluate(config, "files", "write_file", {"path": "/etc/x"}).rule == "spec.approval.rules[1]"
    assert evaluate(config, "files", "delete_file", {}).rule == "spec.tools[files].mcpServer.requireApproval"
    assert evaluate(config, "files", "read_file", {"path": "a"}).rule == "spec.approval.requireForAllTools"
    assert evaluate(config, "other", "search", {}).rule == ""


def test_gated_mcp_tools_names_each_gated_tool_with_its_server_and_the_field_that_gates_it() -> None:
    assert gated_mcp_tools(_config()) == {"delete_file": ("files", "spec.tools[files].mcpServer.requireApproval")}
    rules = [RuleConfig(tool="write_file", action="allow"),
             RuleConfig(tool="write_file", action="require", arg="path", glob="/x/**"),
             RuleConfig(tool="nowhere", action="require")]  # a rule on a tool no server offers: not an MCP tool's gate
    assert gated_mcp_tools(_config(rules=rules)) == {"delete_file": ("files", "spec.tools[files].mcpServer.requireApproval"),
                                                     "write_file": ("files", "spec.approval.rules[1]")}
    everything = gated_mcp_tools(_config(require_for_all_tools=True, exempt=["search"]))
    assert everything == {"delete_file": ("files", "spec.tools[files].mcpServer.requireApproval"),
                          "read_file": ("files", "spec.approval.requireForAllTools"),
                          "write_file": ("files", "spec.approval.requireForAllTools")}
