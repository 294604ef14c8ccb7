"""kagent's hitl/v1 A2A extension (agent_runtime/contract/kagent_hitl.py): golden payloads, kagent's published examples, and
the security rule of the one parser (partial, malformed or ambiguous never approves) for kagent's dialect.

The expected values marked "published" are kagent's own, copied from these sources (so these tests can disagree
with our reading of them):

- DESIGN_DOC: kagent-dev/kagent docs/architecture/human-in-the-loop.md, the revision that describes hitl/v1 in full
  (the same text is in the fork onematchfox/kagent@b58666b4fab3ae79d95dd13e0f9ef3d511938c96, same path);
- CURRENT_DOC: kagent-dev/kagent@241979a0899663414da09b0b2b18767405ea1b0a docs/architecture/human-in-the-loop.md
  (the shorter current text, with the rule for the pause's hint);
- UI_TEST: kagent-dev/kagent@7f21bba3b324dce10dc82c6d1d3d2a8d59714ac7 ui/src/lib/__tests__/hitl.test.ts;
- NESTED_DOC: kagent-dev/kagent@5229184e280a6f3bf205b4e64405a92d1fbc259f docs/architecture/human-in-the-loop.md,
  "Case 4: a remote subagent needs input" and "Client to server: resuming a task" (the ``NestedHitlRequest`` of
  python/packages/kagent-core/src/kagent/core/a2a/_hitl.py and go/adk/pkg/a2a/hitl.go at that revision: the fields
  subagent_name, task_id, context_id and tools).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_runtime.app.card import agent_card
from agent_runtime.contract import kagent_hitl, wire
from agent_runtime.contract.manifests import select_agent_config
from agent_runtime.questions import question_wire
from tests.support.golden import assert_golden

URI = "https://kagent.dev/extensions/hitl/v1"
GOLDEN = Path(__file__).parents[1] / "testdata" / "kagent-hitl"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "file-manager"
EXPIRES = "2026-11-21T22:07:56Z"
FUZZ = settings(max_examples=int(os.environ.get("GATEHOUSE_FUZZ_EXAMPLES", "200")), deadline=None,
                suppress_health_check=[HealthCheck.too_slow])


def _call(id: str, call_id: str, name: str, args: dict[str, Any], hint: str = "") -> wire.ActionRequest:
    return wire.ActionRequest(id=id, call_id=call_id, name=name, args=args, hint=hint, expires_at=EXPIRES)


def _prompt(id: str, question: str, options: list[str], **state: Any) -> question_wire.QuestionPrompt:
    args = question_wire.QuestionArgs(question=question, options=options, requireConfirmation=True,
                                  confirmationMessage="This is recorded.")
    return question_wire.QuestionState(id, args, **state).prompt(EXPIRES)


def _decide(payload: Any, pending: list[str], text: str = "") -> dict[str, wire.Verdict]:
    return wire.parse_decision([payload], text, pending, allow_session=False)


def _response(*approvals: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_approval_response", "approvals": list(approvals)}


# --- golden: both payload shapes for the same pause ---------------------------------------------------

PAUSE = [
    _call("apr-1", "adk-1", "delete_file", {"path": "a.txt"}, "delete_file on file-tools requires approval (requireApproval)"),
    _call("apr-2", "adk-2", "delete_file", {"path": "b.txt"}, "delete_file on file-tools requires approval (requireApproval)"),
]


def test_golden_tool_approval_pause_in_both_shapes(update_golden: bool) -> None:
    ours = wire.ApprovalInterrupt(action_requests=PAUSE).model_dump(mode="json")
    assert_golden({"text": wire.describe_requests(PAUSE), "gatehouse": ours, "kagent": kagent_hitl.tool_approval_request(PAUSE)},
                  GOLDEN / "tool-approval-pause.json", update_golden)


def test_golden_question_pause_in_both_shapes(update_golden: bool) -> None:
    answer = _prompt("hitl-1", "Where?", ["staging", "production"])
    confirm = _prompt("hitl-1", "Where?", ["staging", "production"], stage="confirm", selected="production")
    actual = {
        stage: {"gatehouse": question_wire.QuestionInterrupt(requests=[p]).model_dump(mode="json"),
                "kagent": kagent_hitl.ask_user_request(p)}
        for stage, p in (("answer", answer), ("confirm", confirm))
    }
    assert_golden(actual, GOLDEN / "question-pause.json", update_golden)


def test_the_same_pause_decided_in_either_shape_gives_the_same_verdicts() -> None:
    ours = wire.batch({"apr-1": True, "apr-2": False}, {"apr-2": "b stays"})
    theirs = _response({"id": "apr-1", "approved": True}, {"id": "apr-2", "approved": False, "rejection_reason": "b stays"})
    pending = [r.id for r in PAUSE]
    assert _decide(theirs, pending) == _decide(ours, pending)
    # Every tool of the request is named by the id our own decisions use.
    assert [t["id"] for t in kagent_hitl.tool_approval_request(PAUSE)["tools"]] == pending


# --- golden: a sub-agent's pause, relayed in kagent's nested shape ----------------------------------


@dataclass(frozen=True)
class _Delegated:
    """This agent's call of a sub-agent, as a delegation record has it (kagent_hitl.DelegatedCall)."""

    id: str = "dlg-1"
    call_id: str = "adk-9"
    tool: str = "files"
    args: dict[str, Any] | None = None
    agent: str = "default/files"
    child_task_id: str = "task-child"
    child_context_id: str = "ctx-child"

    def __post_init__(self) -> None:
        object.__setattr__(self, "args", self.args or {"request": "clean up a.txt and b.txt"})


def test_golden_relayed_pauses_in_kagents_nested_shape(update_golden: bool) -> None:
    child_approval = kagent_hitl.tool_approval_request(PAUSE)
    child_question = kagent_hitl.ask_user_request(_prompt("hitl-1", "Where?", ["staging", "production"]))
    # Three levels: what the middle agent relays is itself nested; the top names the middle agent and the innermost calls.
    middle = kagent_hitl.nested_request(_Delegated(), child_approval)
    assert middle is not None
    actual = {
        "approval": middle,
        "question": kagent_hitl.nested_request(_Delegated(), child_question),
        "three_levels": kagent_hitl.nested_request(
            _Delegated(id="dlg-top", call_id="adk-top", tool="team", args={"request": "ask files clean up"},
                       agent="default/team", child_task_id="task-team", child_context_id="ctx-team"), middle),
    }
    assert_golden(actual, GOLDEN / "nested-pause.json", update_golden)
    assert actual["three_levels"]["nested"]["tools"] == child_approval["tools"]  # the innermost calls, at any depth
    assert actual["three_levels"]["nested"]["subagent_name"] == "default/team"  # the next agent holds the route


@pytest.mark.parametrize("child", [
    {"type": "tool_approval_request", "tools": []},  # nothing to decide
    {"type": "tool_approval_request", "tools": [{"id": "a", "name": "x"}]},  # no call_id
    {"type": "ask_user_request", "questions": []},  # no id
    {"type": "tool_approval_response", "approvals": [{"id": "a", "approved": True}]},  # a decision, not a pause
    {"interrupt_type": "tool_approval"},  # ours, not kagent's
])
def test_a_sub_agents_payload_kagent_does_not_define_is_not_relayed(child: dict[str, Any]) -> None:
    assert kagent_hitl.nested_request(_Delegated(), child) is None


# --- kagent's published examples -------------------------------------------------------------------

# NESTED_DOC, "Case 4: a remote subagent needs input".
PUBLISHED_NESTED = {
    "type": "tool_approval_request",
    "hint": "Remote agent k8s_agent requires approval",
    "tools": [{"id": "parent-approval-1", "call_id": "parent-call-1", "name": "k8s_agent",
               "args": {"request": "Remove the obsolete pod"}}],
    "nested": {
        "subagent_name": "k8s_agent",
        "task_id": "child-task-1",
        "context_id": "child-context-1",
        "tools": [{"id": "child-approval-1", "call_id": "child-call-1", "name": "delete_pod",
                   "args": {"name": "obsolete", "namespace": "production"}}],
    },
}

# DESIGN_DOC, "Extension discovery and activation": the card's extension entry (description is the agent's own).
PUBLISHED_CARD_EXTENSION = {"uri": URI, "description": "Tool approval, ask_user, and nested subagents", "required": False}

# DESIGN_DOC, "Server to client: pausing a task": the status message's metadata payload.
PUBLISHED_PAUSE = {
    "type": "tool_approval_request",
    "hint": "Deleting this file requires approval",
    "tools": [{"id": "approval-1", "call_id": "call-1", "name": "delete_file", "args": {"path": "/tmp/example"}}],
}

# DESIGN_DOC, "Case 2: several pending tools".
PUBLISHED_TWO_TOOLS = {
    "type": "tool_approval_request",
    "hint": "Two operations require approval",
    "tools": [
        {"id": "approval-21", "call_id": "call-delete", "name": "delete_file", "args": {"path": "/tmp/old"}},
        {"id": "approval-22", "call_id": "call-restart", "name": "restart_deployment",
         "args": {"name": "api", "namespace": "production"}},
    ],
}

# DESIGN_DOC, "Client to server: resuming a task": a whole decision message.
PUBLISHED_DECISION_MESSAGE = {
    "messageId": "approval-response-1",
    "role": "user",
    "taskId": "task-123",
    "contextId": "conversation-456",
    "extensions": [URI],
    "metadata": {URI: {"type": "tool_approval_response", "approvals": [{"id": "approval-1", "approved": True}]}},
    "parts": [{"kind": "text", "text": "Approved"}],
}

# DESIGN_DOC, "Tool approval response" (answers PUBLISHED_TWO_TOOLS).
PUBLISHED_MIXED = {
    "type": "tool_approval_response",
    "approvals": [
        {"id": "approval-21", "approved": False, "rejection_reason": "The file is still used by the migration job"},
        {"id": "approval-22", "approved": True},
    ],
}

# CURRENT_DOC: the response payload example.
PUBLISHED_REJECTION = {"type": "tool_approval_response",
                       "approvals": [{"id": "tool-1", "approved": False, "rejection_reason": "not production"}]}

# DESIGN_DOC, "Case 3: ask the user": the first of its questions (single choice, as ours always are).
PUBLISHED_QUESTION = {"question": "Which database should be used?", "choices": ["PostgreSQL", "MySQL", "SQLite"],
                      "multiple": False}

# DESIGN_DOC, "Answer ask_user": three answers to three questions.
PUBLISHED_THREE_ANSWERS = {
    "type": "ask_user_response",
    "id": "approval-question-1",
    "answers": [{"answer": ["PostgreSQL"]}, {"answer": ["Authentication", "Caching"]},
                {"answer": ["Use the existing backup policy"]}],
}

# UI_TEST, "builds a response message containing only the public extension".
PUBLISHED_UI_ANSWER = {"type": "ask_user_response", "id": "question-1", "answers": [{"answer": ["prod"]}]}

# UI_TEST, "parses only a declared, valid extension payload": the legacy decision is not a hitl/v1 payload.
PUBLISHED_LEGACY = {"decision_type": "approve"}


def test_card_declares_the_extension_as_kagent_publishes_it() -> None:
    card = agent_card(select_agent_config([EXAMPLE / "agent.yaml", EXAMPLE / "modelconfig.yaml", EXAMPLE / "mcp-server.yaml"]),
                      "http://x/")
    (extension,) = card.capabilities.extensions
    assert (extension.uri, extension.required) == (PUBLISHED_CARD_EXTENSION["uri"], PUBLISHED_CARD_EXTENSION["required"])
    assert extension.description == kagent_hitl.DESCRIPTION


def test_pause_tools_are_kagents_published_shape() -> None:
    published = PUBLISHED_PAUSE["tools"][0]
    ours = kagent_hitl.tool_approval_request([_call(**published, hint="Deleting this file requires approval")])
    assert ours["type"] == PUBLISHED_PAUSE["type"] and ours["tools"] == PUBLISHED_PAUSE["tools"]
    two = [_call(**t) for t in PUBLISHED_TWO_TOOLS["tools"]]
    assert kagent_hitl.tool_approval_request(two)["tools"] == PUBLISHED_TWO_TOOLS["tools"]


def test_pause_hint_follows_kagents_published_rule() -> None:
    # CURRENT_DOC: "any other pause renders the hints its tools supplied, followed by the tool names in parentheses:
    # `Deleting this file requires approval (delete_file, restart_pod)`"; "with no hints, it names the tools:
    # `Approval is required for tool(s): delete_file`"; "The `hint` field of an activated payload holds that same string."
    hinted = [_call("a", "c1", "delete_file", {}, "Deleting this file requires approval"), _call("b", "c2", "restart_pod", {})]
    assert kagent_hitl.tool_approval_request(hinted)["hint"] == "Deleting this file requires approval (delete_file, restart_pod)"
    bare = [_call("a", "c1", "delete_file", {})]
    assert kagent_hitl.tool_approval_request(bare)["hint"] == "Approval is required for tool(s): delete_file"


def test_published_decision_message_approves_its_one_call() -> None:
    message = PUBLISHED_DECISION_MESSAGE
    payload = kagent_hitl.payload_of(message["extensions"], message["metadata"])
    text = message["parts"][0]["text"]
    assert _decide(payload, ["approval-1"], text) == {"approval-1": wire.Verdict(True)}


def test_published_mixed_response_denies_with_its_reason_and_approves_the_other() -> None:
    assert _decide(PUBLISHED_MIXED, ["approval-21", "approval-22"]) == {
        "approval-21": wire.Verdict(False, "The file is still used by the migration job"),
        "approval-22": wire.Verdict(True),
    }
    assert _decide(PUBLISHED_REJECTION, ["tool-1"]) == {"tool-1": wire.Verdict(False, "not production")}


def test_question_is_kagents_published_question_shape() -> None:
    prompt = _prompt("approval-question-1", PUBLISHED_QUESTION["question"], PUBLISHED_QUESTION["choices"])
    assert kagent_hitl.ask_user_request(prompt) == {
        "type": "ask_user_request", "id": "approval-question-1", "questions": [PUBLISHED_QUESTION],
    }


def test_published_ui_answer_chooses_its_option() -> None:
    state = question_wire.QuestionState("question-1", question_wire.QuestionArgs(question="Where?", options=["staging", "prod"]))
    done, result = question_wire.apply_message(state, [PUBLISHED_UI_ANSWER], "Answered questions")
    assert done.stage == "done" and result is not None
    assert (result.status, result.selected_option) == ("confirmed", "prod")


def test_published_three_answers_are_refused_a_hitl_request_asks_one_question() -> None:
    # Our reading differs from kagent's ask_user here on purpose: a hitl_request is one single-choice question.
    args = question_wire.QuestionArgs(question="Which database should be used?", options=["PostgreSQL", "MySQL"])
    with pytest.raises(question_wire.QuestionError, match="exactly one answer"):
        question_wire.apply_message(question_wire.QuestionState("approval-question-1", args), [PUBLISHED_THREE_ANSWERS], "")


def test_published_legacy_payload_under_the_uri_is_no_decision() -> None:
    with pytest.raises(kagent_hitl.KagentError, match="type"):
        kagent_hitl.payload_of([URI], {URI: PUBLISHED_LEGACY})


# --- the question's confirmation step ---------------------------------------------------------------


def _confirming() -> question_wire.QuestionState:
    args = question_wire.QuestionArgs(question="Where?", options=["staging", "production"], requireConfirmation=True)
    return question_wire.QuestionState("hitl-1", args, stage="confirm", selected="production")


def _answer(id: str, *values: str) -> dict[str, Any]:
    return {"type": "ask_user_response", "id": id, "answers": [{"answer": list(values)}]}


def test_confirmation_step_is_its_own_request_answered_with_confirm_or_cancel() -> None:
    _, result = question_wire.apply_message(_confirming(), [_answer("hitl-1/confirm", "confirm")], "")
    assert result is not None and (result.status, result.selected_option) == ("confirmed", "production")
    _, result = question_wire.apply_message(_confirming(), [_answer("hitl-1/confirm", "cancel")], "")
    assert result is not None and result.status == "canceled"


@pytest.mark.parametrize("payload", [
    _answer("hitl-1", "production"),  # the first step's answer sent again: never confirms
    _answer("hitl-1/confirm", "production"),  # not one of the step's choices
    _answer("hitl-2/confirm", "confirm"),  # another question's step
    _answer("hitl-1/confirm", "confirm", "cancel"),
])
def test_confirmation_step_refuses_anything_else(payload: dict[str, Any]) -> None:
    with pytest.raises(question_wire.QuestionError, match="still pending"):
        question_wire.apply_message(_confirming(), [payload], "confirm")


def test_answer_step_refuses_the_confirmation_id() -> None:
    args = question_wire.QuestionArgs(question="Where?", options=["staging", "confirm"])
    with pytest.raises(question_wire.QuestionError, match="exactly the pending question"):
        question_wire.apply_message(question_wire.QuestionState("hitl-1", args), [_answer("hitl-1/confirm", "confirm")], "")


# --- never approves: partial, malformed, ambiguous, the wrong kind ----------------------------------

PENDING = ["apr-1", "apr-2"]
BOTH = ({"id": "apr-1", "approved": True}, {"id": "apr-2", "approved": True})


@pytest.mark.parametrize("payload, problem", [
    (_response(BOTH[0]), "missing ids: apr-2"),
    (_response(*BOTH, {"id": "apr-3", "approved": True}), "unknown ids: apr-3"),
    (_response(*BOTH, BOTH[0]), "Duplicate ids"),
    (_response(BOTH[0], {"id": "apr-2", "approved": "true"}), "valid boolean"),
    (_response(BOTH[0], {"id": "apr-2", "approved": 1}), "valid boolean"),
    (_response(BOTH[0], {"id": "apr-2"}), "approved: Field required"),
    (_response(BOTH[0], {"id": "", "approved": True}), "at least 1 character"),
    (_response(BOTH[0], {"id": "apr-2", "approved": True, "rejection_reason": "no"}), "cannot carry a rejection_reason"),
    (_response(BOTH[0], {"id": "apr-2", "approved": True, "scope": "session"}), "Extra inputs"),
    ({**_response(*BOTH), "scope": "session"}, "Extra inputs"),
    (_response(), "at least 1 item"),
    ({"type": "tool_approval_response"}, "approvals: Field required"),
    ({"type": "tool_approval_request", "tools": []}, "answer it with a tool_approval_response"),
    ({"type": "ask_user_request", "id": "x"}, "answer it with a ask_user_response"),
    ({"type": "approve"}, "Unknown hitl/v1 type"),
    ({"type": None, "approvals": []}, "Unknown hitl/v1 type"),
    (_answer("hitl-1", "staging"), "answers a hitl_request question"),
])
def test_kagent_decisions_that_decide_nothing(payload: dict[str, Any], problem: str) -> None:
    with pytest.raises(wire.DecisionError, match="still pending") as exc:
        _decide(payload, PENDING, "approve")  # the text is never read when a data part is there
    assert problem in exc.value.problem


def test_a_kagent_payload_next_to_one_of_ours_is_ambiguous() -> None:
    with pytest.raises(wire.DecisionError, match="2 data parts"):
        wire.parse_decision([_response(*BOTH), wire.approve_all()], "", PENDING, allow_session=False)


def test_kagent_approvals_never_answer_a_question() -> None:
    state = question_wire.QuestionState("hitl-1", question_wire.QuestionArgs(question="q", options=["a"]))
    with pytest.raises(question_wire.QuestionError, match="approves or denies tool calls"):
        question_wire.apply_message(state, [_response({"id": "hitl-1", "approved": True})], "a")


@pytest.mark.parametrize("extensions, metadata, problem", [
    ([], {URI: _response(*BOTH)}, "does not list that URI"),
    (["https://kagent.dev/extensions/hitl/v2"], {URI: _response(*BOTH)}, "does not list that URI"),
    ([URI], {URI: "approve"}, "not a JSON object"),
    ([URI], {URI: {"approvals": []}}, "type"),
])
def test_payload_of_refuses_what_cannot_be_a_decision(extensions: list[str], metadata: dict[str, Any], problem: str) -> None:
    with pytest.raises(kagent_hitl.KagentError, match=problem):
        kagent_hitl.payload_of(extensions, metadata)


def test_payload_of_without_a_payload_is_none() -> None:
    assert kagent_hitl.payload_of([URI], {"timestamp": 1}) is None


approval_items = st.fixed_dictionaries(
    {"id": st.sampled_from(["apr-1", "apr-2", "apr-3", "", "APR-1"])},
    optional={
        "approved": st.sampled_from([True, False, "true", 1, 0, None, "yes"]),
        "rejection_reason": st.sampled_from(["", "r", None]),
        "scope": st.just("session"),
    },
)
kagent_payloads = st.fixed_dictionaries(
    {"type": st.sampled_from(["tool_approval_response", "ask_user_response", "tool_approval_request", "x"])},
    optional={"approvals": st.lists(approval_items, max_size=4), "id": st.sampled_from(["apr-1", "hitl-1"]),
              "answers": st.lists(st.fixed_dictionaries({"answer": st.lists(st.sampled_from(["a", "approve"]), max_size=2)}),
                                  max_size=2)},
)


def _approves_every_pending_id_exactly_once(payload: dict[str, Any]) -> bool:
    """The only kagent payload allowed to approve anything: each pending id once, each with a verdict (a boolean)."""
    approvals = payload.get("approvals")
    if payload.get("type") != "tool_approval_response" or set(payload) != {"type", "approvals"}:
        return False
    ids = [a.get("id") for a in approvals or []]
    return sorted(ids) == sorted(PENDING) and all(isinstance(a.get("approved"), bool) for a in approvals or [])


@FUZZ
@given(kagent_payloads, st.sampled_from(["approve", "", "Approved"]))
def test_kagent_payloads_never_approve_by_accident(payload: dict[str, Any], text: str) -> None:
    try:
        verdicts = _decide(payload, PENDING, text)
    except wire.DecisionError as exc:
        assert "still pending" in str(exc)
        return
    assert set(verdicts) == set(PENDING)
    assert _approves_every_pending_id_exactly_once(payload)
    by_id = {a["id"]: a for a in payload["approvals"]}
    for request_id, verdict in verdicts.items():
        assert verdict.approved is by_id[request_id]["approved"] and verdict.scope == "once"


def test_relayed_pause_is_kagents_published_nested_shape() -> None:
    published = PUBLISHED_NESTED
    (top,) = published["tools"]
    nested = published["nested"]
    call = _Delegated(id=top["id"], call_id=top["call_id"], tool=top["name"], args=top["args"],
                      agent=nested["subagent_name"], child_task_id=nested["task_id"], child_context_id=nested["context_id"])
    child = {"type": "tool_approval_request", "hint": published["hint"], "tools": nested["tools"]}
    assert kagent_hitl.nested_request(call, child) == published
    # Without a hint of the sub-agent's own, the hint names the sub-agent and its tools.
    bare = kagent_hitl.nested_request(call, {"type": "tool_approval_request", "tools": nested["tools"]})
    assert bare is not None and bare["hint"] == "Sub-agent k8s_agent requires approval for tool(s): delete_pod"


def test_published_nested_decision_names_the_nested_tools_ids() -> None:
    # NESTED_DOC: "For nested HITL, return IDs from nested.tools, not the parent remote-tool entry." The parent
    # forwards the response to the sub-agent, whose pending ids are those.
    child_ids = [t["id"] for t in PUBLISHED_NESTED["nested"]["tools"]]
    response = _response({"id": "child-approval-1", "approved": True})
    assert _decide(response, child_ids) == {"child-approval-1": wire.Verdict(True)}
    with pytest.raises(wire.DecisionError, match="unknown ids: parent-approval-1"):
        _decide(_response({"id": "parent-approval-1", "approved": True}), child_ids)
