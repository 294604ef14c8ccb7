"""Property-based fuzzing of every parser and the policy: never crash, never approve on bad input.

`make test` runs a small count; `make soak` sets GATEHOUSE_FUZZ_EXAMPLES=10000.
"""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_runtime.contract import wire
from agent_runtime.contract.agent_config import (
    AgentConfig,
    ApprovalPolicy,
    CardConfig,
    McpServerConfig,
    RuleConfig,
    ScriptedModel,
)
from agent_runtime.contract.errors import TranslationError
from agent_runtime.contract.manifests import parse_resource
from agent_runtime.contract.policy import evaluate
from agent_runtime.contract.resources import Agent
from agent_runtime.contract.translator import translate
from agent_runtime.questions import question_wire

EXAMPLES = int(os.environ.get("GATEHOUSE_FUZZ_EXAMPLES", "200"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PENDING = ["apr-1", "apr-2"]

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)
keys = st.sampled_from(["decision_type", "decisions", "reasons", "scope", "reason", "answers", "ids", "id"])
decision_types = st.sampled_from(["approve", "deny", "batch", "answer", "confirm", "cancel", "APPROVE", "", "yes"])
near_miss = st.dictionaries(keys, json_values | decision_types | st.just({"apr-1": "approve"}), max_size=4)
parts = st.lists(near_miss | json_values, max_size=3)


def _is_explicit_approval(data_parts: list[Any], text: str) -> bool:
    """The only inputs allowed to approve: an approve-all, a complete batch, or an approve word."""
    if not data_parts:
        return text.strip().strip(".!").strip().lower() in wire.APPROVE_WORDS
    (data,) = data_parts
    if data.get("decision_type") == "approve":
        return True
    if data.get("decision_type") == "batch":
        decisions = data["decisions"]
        ids = [d["id"] for d in decisions] if isinstance(decisions, list) else list(decisions)
        return sorted(ids) == sorted(PENDING)
    return False


@FUZZ
@given(parts, st.text(max_size=30), st.booleans())
def test_decision_parser_never_crashes_nor_approves_by_accident(data_parts: list[Any], text: str, session: bool) -> None:
    try:
        verdicts = wire.parse_decision(data_parts, text, PENDING, allow_session=session)
    except wire.DecisionError as exc:
        assert "still pending" in str(exc)
        return
    assert set(verdicts) == set(PENDING)
    if any(v.approved for v in verdicts.values()):
        assert _is_explicit_approval(data_parts, text)
    if not session:
        assert all(v.scope == "once" for v in verdicts.values())


@FUZZ
@given(st.dictionaries(st.text(max_size=12), json_values, max_size=6) | near_miss)
def test_hitl_args_never_crash(args: dict[str, Any]) -> None:
    result = question_wire.validate_args(args)
    assert isinstance(result, question_wire.QuestionArgs | str)


@FUZZ
@given(parts, st.text(max_size=30), st.booleans())
def test_hitl_answers_never_confirm_by_accident(data_parts: list[Any], text: str, confirm_stage: bool) -> None:
    args = question_wire.QuestionArgs(question="q", options=["a", "b"], requireConfirmation=True)
    stage = "confirm" if confirm_stage else "answer"
    state = question_wire.QuestionState("hitl-1", args, stage=stage, selected="a" if confirm_stage else None)
    try:
        _, result = question_wire.apply_message(state, data_parts, text)
    except question_wire.QuestionError:
        return
    if result is not None and result.confirmed:
        assert confirm_stage, "an answer with confirmation required may never finish confirmed in one step"


CONFIG = AgentConfig(
    name="a",
    model=ScriptedModel(model="s"),
    card=CardConfig(name="a"),
    mcp_servers=[McpServerConfig(name="files", url="http://x/mcp", tool_names=["read_file", "delete_file"],
                                 require_approval=["delete_file"])],
    approval=ApprovalPolicy(rules=[RuleConfig(tool="read_file", action="require", arg="path", glob="**/.env*")]),
)


@FUZZ
@given(st.sampled_from(["read_file", "delete_file", "other"]), st.dictionaries(st.sampled_from(["path", "x"]), json_values))
def test_policy_never_crashes_and_always_gates_delete(tool: str, args: dict[str, Any]) -> None:
    decision = evaluate(CONFIG, "files", tool, args)
    if tool == "delete_file":
        assert decision.verdict == "require"
    path = args.get("path")
    if tool == "read_file" and isinstance(path, str) and path.rstrip("/").rsplit("/", 1)[-1].startswith(".env"):
        if ".." not in path:
            assert decision.verdict == "require"


agent_specs = st.fixed_dictionaries(
    {"modelConfig": st.text(max_size=5) | json_values},
    optional={
        "tools": st.lists(st.fixed_dictionaries({"type": st.just("McpServer"), "mcpServer": near_miss | st.fixed_dictionaries(
            {"name": st.sampled_from(["files", "x"]), "toolNames": st.lists(st.sampled_from(["a", "b", "c"]), max_size=3),
             "requireApproval": st.lists(st.sampled_from(["a", "b", "d"]), max_size=3)})}), max_size=2),
        "approval": st.dictionaries(st.sampled_from(["timeout", "rules", "exempt", "onTimeout"]), json_values, max_size=3),
    },
)


@FUZZ
@given(agent_specs)
def test_translator_never_crashes(spec: dict[str, Any]) -> None:
    doc = {"apiVersion": "gatehouse.dev/v1alpha1", "kind": "Agent", "metadata": {"name": "a"}, "spec": spec}
    try:
        agent = parse_resource(doc)
        assert isinstance(agent, Agent)
        config = translate(agent, {}, {})
    except TranslationError as exc:
        assert exc.problems
        return
    raise AssertionError(f"translated without its ModelConfig: {config}")
