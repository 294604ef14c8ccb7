"""hitl_request's pure parts: argument validation, the answer/confirm state machine, timeouts, scoping."""

from __future__ import annotations

from typing import Any

import pytest

from agent_runtime.questions import question_wire
from agent_runtime.questions.question_wire import (
    QuestionArgs,
    QuestionError,
    QuestionState,
    apply_message,
    on_timeout,
    validate_args,
)

ARGS = {"question": "Which env?", "options": ["staging", "prod"]}


def _state(**extra: Any) -> QuestionState:
    args = validate_args({**ARGS, **extra})
    assert isinstance(args, QuestionArgs)
    return QuestionState(request_id="hitl-1", args=args)


def _answer(option: str, rid: str = "hitl-1") -> list[dict[str, Any]]:
    return [{"decision_type": "answer", "answers": {rid: option}}]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ({"options": ["a"]}, "question: Field required"),
        ({"question": "q"}, "options: Field required"),
        ({"question": "q", "options": []}, "options: List should have at least 1 item"),
        ({"question": "q", "options": ["a", " "]}, "options must not be empty"),
        ({"question": "q", "options": ["a", "a"]}, "duplicated: ['a']"),
        ({"question": "q", "options": ["a"], "defaultOption": "b"}, "defaultOption 'b' is not one of the options"),
        ({"question": "q", "options": ["a"], "allowFreeText": True}, "allowFreeText: Extra inputs are not permitted"),
        ({"question": "q", "options": ["a"], "timeoutMs": 0}, "timeoutMs"),
        ({"question": "  ", "options": ["a"]}, "question must not be blank"),
    ],
)
def test_invalid_arguments_are_explained(args: dict[str, Any], needle: str) -> None:
    message = validate_args(args)
    assert isinstance(message, str) and message.startswith("invalid hitl_request arguments")
    assert needle in message


def test_answer_without_confirmation_finishes() -> None:
    state, result = apply_message(_state(), _answer("prod"), "")
    assert state.stage == "done" and result is not None
    assert (result.ok, result.status, result.selected_option, result.source) == (True, "confirmed", "prod", "user")


def test_answer_then_confirm() -> None:
    state, result = apply_message(_state(requireConfirmation=True), _answer("prod"), "")
    assert result is None and state.stage == "confirm" and state.selected == "prod"
    state, result = apply_message(state, [{"decision_type": "confirm"}], "")
    assert result is not None and (result.ok, result.status, result.confirmed) == (True, "confirmed", True)


def test_answer_then_cancel_never_reports_success() -> None:
    state, _ = apply_message(_state(requireConfirmation=True), _answer("prod"), "")
    _, result = apply_message(state, [{"decision_type": "cancel"}], "")
    assert result is not None and (result.ok, result.status, result.confirmed) == (False, "canceled", False)
    assert result.selected_option is None


def test_text_answers() -> None:
    state, result = apply_message(_state(requireConfirmation=True), [], "staging")
    assert result is None and state.selected == "staging"
    _, result = apply_message(state, [], "confirm")
    assert result is not None and result.status == "confirmed"


@pytest.mark.parametrize(
    ("data", "text", "needle"),
    [
        (_answer("dev"), "", "'dev' is not one of the options"),
        (_answer("prod", "hitl-2"), "", "exactly the pending question hitl-1"),
        ([{"decision_type": "answer", "answers": {"hitl-1": "prod", "hitl-2": "prod"}}], "", "exactly the pending"),
        ([{"decision_type": "approve"}], "", "approves or denies tool calls"),
        ([{"decision_type": "confirm"}], "", "Nothing to confirm yet"),
        ([], "prod please", "Could not read an answer"),
        ([{"decision_type": "answer"}], "", "Malformed answer"),
    ],
)
def test_bad_answers_change_nothing(data: list[Any], text: str, needle: str) -> None:
    with pytest.raises(QuestionError) as info:
        apply_message(_state(requireConfirmation=True), data, text)
    assert needle in str(info.value) and "still pending" in str(info.value)


def test_confirm_stage_rejects_new_answer_and_approval() -> None:
    state, _ = apply_message(_state(requireConfirmation=True), _answer("prod"), "")
    for data in (_answer("staging"), [{"decision_type": "approve"}]):
        with pytest.raises(QuestionError):
            apply_message(state, data, "")
    with pytest.raises(QuestionError):
        apply_message(state, [], "approve")


def test_replay_after_done_is_rejected() -> None:
    state, _ = apply_message(_state(), _answer("prod"), "")
    with pytest.raises(QuestionError, match="already answered"):
        apply_message(state, _answer("prod"), "")


def test_timeout_takes_default_only_without_confirmation() -> None:
    result = on_timeout(_state(defaultOption="staging"))
    assert (result.ok, result.status, result.selected_option, result.source) == (True, "timeout", "staging", "timeout")
    assert result.confirmed is False
    result = on_timeout(_state(defaultOption="staging", requireConfirmation=True))
    assert (result.ok, result.status, result.selected_option, result.confirmed) == (False, "timeout", None, False)
    confirming, _ = apply_message(_state(requireConfirmation=True), _answer("prod"), "")
    assert on_timeout(confirming).confirmed is False
    assert on_timeout(_state()).ok is False


def test_prompt_shape() -> None:
    prompt = question_wire.QuestionInterrupt(requests=[_state(requireConfirmation=True).prompt("2026-11-21T10:00:00Z")])
    data = prompt.model_dump()
    assert data["interrupt_type"] == "hitl_request"
    assert data["requests"][0]["options"] == ["staging", "prod"] and data["requests"][0]["stage"] == "answer"


def test_an_option_named_like_a_cancel_word_is_an_answer() -> None:
    state = QuestionState(request_id="hitl-1", args=QuestionArgs(question="Go on?", options=["no", "yes"]))
    _, result = apply_message(state, [], "no")
    assert result is not None and (result.status, result.selected_option) == ("confirmed", "no")
    _, result = apply_message(state, [], "cancel")
    assert result is not None and result.status == "canceled"


def test_describe_prompt_numbers_options_and_says_how_to_answer() -> None:
    state = _state(defaultOption="prod")
    text = question_wire.describe_prompt(state.prompt("2026-11-21T10:00:00Z"))
    assert "Question [hitl-1]: Which env?" in text and "1) staging" in text and "2) prod (default on timeout)" in text
    assert '"decision_type": "answer"' in text
    confirming, _ = apply_message(_state(requireConfirmation=True, confirmationMessage="Sure?"), _answer("prod"), "")
    text = question_wire.describe_prompt(confirming.prompt("2026-11-21T10:00:00Z"))
    assert "Chosen: prod" in text and "Sure?" in text and '"decision_type": "confirm"' in text
