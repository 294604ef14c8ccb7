"""hitl_request end to end: the runtime and the demo MCP server as real processes, raw A2A JSON-RPC over HTTP.

One runtime serves the module (tests/clients/test_questions_chat.py imports the same fixture); its Scripted model has one
rule per case (see ``RULES``), plus the example's rules. The model's reply
after the question is ``hitl: {result}``, i.e. the exact JSON it received as the tool's result.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from agent_runtime.contract import kagent_hitl, wire
from agent_runtime.questions import question_wire
from tests.support.runtime import Rpc, RuntimeProcess, Tools, demo_tools, state, status_text, wait_for, write_manifests

pytestmark = pytest.mark.e2e

ENVS = ["staging", "prod"]


def _rule(match: str, name: str = "hitl_request", **args: Any) -> dict[str, Any]:
    return {"match": match, "toolCalls": [{"name": name, "args": args}], "reply": "hitl: {result}"}


RULES = [
    _rule(r"^plain (?P<q>.+)", question="{q}", options=ENVS),
    _rule(r"^confirm (?P<q>.+)", question="{q}", options=ENVS, requireConfirmation=True,
          confirmationMessage="This is recorded.", metadata={"ticket": "T-1"}),
    _rule(r"^alias (?P<q>.+)", name="human_intervention_request", question="{q}", options=["no", "yes"]),
    _rule(r"^quick-default (?P<q>.+)", question="{q}", options=ENVS, defaultOption="staging", timeoutMs=800),
    _rule(r"^quick-confirm (?P<q>.+)", question="{q}", options=ENVS, defaultOption="staging", timeoutMs=800,
          requireConfirmation=True),
    _rule(r"^bad-extra", question="q", options=ENVS, allowFreeText=True),
    _rule(r"^bad-empty", question="q", options=["a", ""]),
    _rule(r"^bad-dup", question="q", options=["a", "a"]),
    _rule(r"^bad-default", question="q", options=ENVS, defaultOption="dev"),
    _rule(r"^bad-none", question="q", options=[]),
    {"match": r"^ask-and-delete (?P<path>\S+)", "reply": "mixed: {result_1} | {result_2}", "toolCalls": [
        {"name": "hitl_request", "args": {"question": "Delete {path}?", "options": ENVS}},
        {"name": "delete_file", "args": {"path": "{path}"}}]},
    {"match": r"^delete-and-ask (?P<path>\S+)", "reply": "mixed: {result_1} | {result_2}", "toolCalls": [
        {"name": "delete_file", "args": {"path": "{path}"}},
        {"name": "hitl_request", "args": {"question": "Delete {path}?", "options": ENVS}}]},
]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Tools, RuntimeProcess]]:
    base = tmp_path_factory.mktemp("hitl-e2e")
    with demo_tools(base / "tools") as tools:
        files = write_manifests(base / "manifests", tools.url)
        model = next(f for f in files if f.name == "modelconfig.yaml")
        doc = yaml.safe_load(model.read_text())
        doc["spec"]["scripted"]["rules"] = RULES + doc["spec"]["scripted"]["rules"]
        model.write_text(yaml.safe_dump(doc))
        proc = RuntimeProcess(files, base / "state", base / "runtime.log")
        proc.start()
        try:
            yield tools, proc
        finally:
            proc.stop()


@pytest.fixture
def rpc(env: tuple[Tools, RuntimeProcess]) -> Rpc:
    return Rpc(env[1].url)


def _ask(rpc: Rpc, text: str) -> tuple[dict[str, Any], question_wire.QuestionPrompt]:
    task = rpc.send(text)["task"]
    assert state(task) == "TASK_STATE_INPUT_REQUIRED", task
    return task, _prompt(task)


def _prompt(task: dict[str, Any]) -> question_wire.QuestionPrompt:
    metadata = task["status"]["message"]["metadata"]
    (data,) = [p["data"] for p in task["status"]["message"]["parts"] if "data" in p]
    (prompt,) = question_wire.QuestionInterrupt.model_validate(data).requests
    # Ours, and the same question in kagent's hitl/v1 shape (tests/test_kagent_hitl*.py).
    assert metadata == {"interrupt_type": "hitl_request", kagent_hitl.URI: kagent_hitl.ask_user_request(prompt)}
    return prompt


def _answer(prompt: question_wire.QuestionPrompt, option: str) -> dict[str, Any]:
    return {"decision_type": "answer", "answers": {prompt.id: option}}


def _model_result(task: dict[str, Any]) -> dict[str, Any]:
    """The JSON the model received (the Scripted reply is ``hitl: {result}``)."""
    text = status_text(task)
    assert text.startswith("hitl: "), text
    return json.loads(text.removeprefix("hitl: ").splitlines()[0])


def _done(task: dict[str, Any]) -> dict[str, Any]:
    assert state(task) == "TASK_STATE_COMPLETED", task
    return _model_result(task)


def test_pause_shape_and_answer_without_confirmation(rpc: Rpc) -> None:
    calls = rpc.metric("gatehouse_model_calls_total")
    task, prompt = _ask(rpc, "plain Which environment?")
    assert task["metadata"] == {"interrupt_type": "hitl_request"}
    assert prompt.id.startswith("hitl-") and prompt.question == "Which environment?" and prompt.options == ENVS
    assert (prompt.stage, prompt.require_confirmation, prompt.selected_option) == ("answer", False, None)
    text = status_text(task)
    assert "Which environment?" in text and "1) staging" in text and "2) prod" in text
    # A new message in the same context is refused while the question is open.
    blocked = rpc.send("plain another", context_id=task["contextId"])["task"]
    assert state(blocked) == "TASK_STATE_REJECTED" and prompt.id in status_text(blocked)

    result = _done(rpc.send(data=_answer(prompt, "prod"), task=task)["task"])
    assert result == {"ok": True, "status": "confirmed", "confirmed": True, "selected_option": "prod", "source": "user",
                      "request_id": prompt.id, "message": "the user chose 'prod'"}
    assert rpc.metric("gatehouse_model_calls_total") - calls == 2  # ask, then answer: the pause costs no model call
    assert rpc.metric("gatehouse_hitl_results_total", status="confirmed", source="user") >= 1
    history = rpc.get_task(task["id"])["history"]  # the audit trail: the question and the answer
    assert any(p.get("data", {}).get("interrupt_type") == "hitl_request" for m in history for p in m["parts"])
    assert any(p.get("data") == _answer(prompt, "prod") for m in history if m["role"] == "ROLE_USER" for p in m["parts"])


def test_answer_then_confirm(rpc: Rpc) -> None:
    task, prompt = _ask(rpc, "confirm Deploy where?")
    assert prompt.require_confirmation and prompt.confirmation_message == "This is recorded."
    paused = rpc.send(data=_answer(prompt, "prod"), task=task)["task"]
    assert state(paused) == "TASK_STATE_INPUT_REQUIRED"
    confirm = _prompt(paused)
    assert (confirm.id, confirm.stage, confirm.selected_option) == (prompt.id, "confirm", "prod")
    assert "This is recorded." in status_text(paused)
    # Neither an approval nor a second answer confirms.
    for wrong in (wire.approve_all(), _answer(prompt, "staging")):
        still = rpc.send(data=wrong, task=task)["task"]
        assert state(still) == "TASK_STATE_INPUT_REQUIRED" and "still pending" in status_text(still)
        assert _prompt(still).stage == "confirm"
    result = _done(rpc.send(data={"decision_type": "confirm"}, task=task)["task"])
    assert (result["ok"], result["status"], result["confirmed"], result["selected_option"]) == (True, "confirmed", True, "prod")


def test_answer_then_cancel_never_reports_success(rpc: Rpc) -> None:
    task, prompt = _ask(rpc, "confirm Deploy where?")
    assert state(rpc.send(data=_answer(prompt, "staging"), task=task)["task"]) == "TASK_STATE_INPUT_REQUIRED"
    result = _done(rpc.send(data={"decision_type": "cancel"}, task=task)["task"])
    assert (result["ok"], result["status"], result["confirmed"], result["source"]) == (False, "canceled", False, "user")
    assert result["selected_option"] is None


def test_invalid_option_and_other_kinds_are_rejected_and_the_prompt_stays(rpc: Rpc) -> None:
    task, prompt = _ask(rpc, "plain Which?")
    cases = [
        (_answer(prompt, "dev"), "'dev' is not one of the options"),
        ({"decision_type": "answer", "answers": {"hitl-other": "prod"}}, f"exactly the pending question {prompt.id}"),
        ({"decision_type": "answer", "answers": {prompt.id: "prod", "hitl-x": "prod"}}, "exactly the pending"),
        (wire.approve_all(), "approves or denies tool calls"),
        ({"decision_type": "confirm"}, "Nothing to confirm yet"),
    ]
    for data, needle in cases:
        still = rpc.send(data=data, task=task)["task"]
        assert state(still) == "TASK_STATE_INPUT_REQUIRED", still
        assert needle in status_text(still) and "still pending" in status_text(still)
        assert _prompt(still) == prompt  # unchanged
    still = rpc.send("approve", task=task)["task"]
    assert state(still) == "TASK_STATE_INPUT_REQUIRED" and "Could not read an answer" in status_text(still)
    assert _done(rpc.send("staging", task=task)["task"])["selected_option"] == "staging"  # the exact text of an option


def test_option_named_like_a_cancel_word_is_an_answer_and_alias_works(rpc: Rpc) -> None:
    task, prompt = _ask(rpc, "alias Continue?")
    assert prompt.options == ["no", "yes"]
    result = _done(rpc.send("no", task=task)["task"])
    assert (result["status"], result["selected_option"]) == ("confirmed", "no")


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("bad-extra", "allowFreeText: Extra inputs are not permitted"),
        ("bad-empty", "options must not be empty"),
        ("bad-dup", "options must be distinct; duplicated: ['a']"),
        ("bad-default", "defaultOption 'dev' is not one of the options"),
        ("bad-none", "options: List should have at least 1 item"),
    ],
)
def test_invalid_arguments_pause_nothing_and_tell_the_model(rpc: Rpc, text: str, needle: str) -> None:
    result = _done(rpc.send(text)["task"])
    assert (result["ok"], result["status"], result["source"]) == (False, "error", "system")
    assert result["message"].startswith("invalid hitl_request arguments") and needle in result["message"]


def test_answer_on_an_approval_pause_is_rejected(rpc: Rpc, env: tuple[Tools, RuntimeProcess]) -> None:
    tools = env[0]
    (tools.sandbox / "keep.txt").write_text("x")
    gated = rpc.send("delete keep.txt")["task"]
    assert state(gated) == "TASK_STATE_INPUT_REQUIRED"
    (data,) = [p["data"] for p in gated["status"]["message"]["parts"] if "data" in p]
    (request,) = wire.ApprovalInterrupt.model_validate(data).action_requests
    still = rpc.send(data={"decision_type": "answer", "answers": {request.id: "approve"}}, task=gated)["task"]
    assert state(still) == "TASK_STATE_INPUT_REQUIRED" and "answers a hitl_request question" in status_text(still)
    still = rpc.send(data={"decision_type": "confirm"}, task=gated)["task"]
    assert state(still) == "TASK_STATE_INPUT_REQUIRED" and (tools.sandbox / "keep.txt").exists()
    assert tools.executions("delete_file", "keep.txt") == []
    done = rpc.send(data=wire.deny_all("no"), task=gated)["task"]
    assert state(done) == "TASK_STATE_COMPLETED" and (tools.sandbox / "keep.txt").exists()


def test_replayed_answer_is_rejected(rpc: Rpc) -> None:
    task, prompt = _ask(rpc, "confirm Where?")
    answer = _answer(prompt, "prod")
    assert state(rpc.send(data=answer, task=task)["task"]) == "TASK_STATE_INPUT_REQUIRED"
    replay = rpc.send(data=answer, task=task)["task"]  # while confirming: the answer is not taken again
    assert state(replay) == "TASK_STATE_INPUT_REQUIRED" and _prompt(replay).stage == "confirm"
    _done(rpc.send(data={"decision_type": "confirm"}, task=task)["task"])
    late = rpc.send_finished(data=answer, task=task)
    assert late.startswith("Already answered:") and prompt.id in late and "Nothing changed" in late
    # The answer, sent as a new task of the same context, starts nothing.
    again = rpc.send(data=answer, context_id=task["contextId"])["task"]
    assert state(again) == "TASK_STATE_REJECTED"


def test_answer_for_another_task_is_rejected(rpc: Rpc) -> None:
    first, first_prompt = _ask(rpc, "plain First?")
    second, second_prompt = _ask(rpc, "plain Second?")
    still = rpc.send(data=_answer(first_prompt, "prod"), task=second)["task"]
    assert state(still) == "TASK_STATE_INPUT_REQUIRED"
    assert f"exactly the pending question {second_prompt.id}" in status_text(still)
    assert _done(rpc.send(data=_answer(second_prompt, "staging"), task=second)["task"])["selected_option"] == "staging"
    assert _done(rpc.send(data=_answer(first_prompt, "prod"), task=first)["task"])["selected_option"] == "prod"


def test_timeout_without_confirmation_takes_the_default(rpc: Rpc) -> None:
    task, prompt = _ask(rpc, "quick-default Which?")
    assert prompt.default_option == "staging"
    done = wait_for(lambda: (t := rpc.get_task(task["id"])) and state(t) == "TASK_STATE_COMPLETED" and t, timeout=20)
    result = _model_result(done)
    assert (result["ok"], result["status"], result["confirmed"], result["selected_option"], result["source"]) == (
        True, "timeout", False, "staging", "timeout")
    history = "\n".join(p.get("text", "") for m in done["history"] for p in m["parts"])
    assert f"Timeout: no answer to {prompt.id}" in history
    late = rpc.send_finished(data=_answer(prompt, "prod"), task=task)
    assert late.startswith("Already answered:")


def test_timeout_with_confirmation_never_confirms(rpc: Rpc) -> None:
    task, prompt = _ask(rpc, "quick-confirm Which?")
    assert state(rpc.send(data=_answer(prompt, "prod"), task=task)["task"]) == "TASK_STATE_INPUT_REQUIRED"
    done = wait_for(lambda: (t := rpc.get_task(task["id"])) and state(t) == "TASK_STATE_COMPLETED" and t, timeout=20)
    result = _model_result(done)
    assert (result["ok"], result["status"], result["confirmed"], result["selected_option"], result["source"]) == (
        False, "timeout", False, None, "timeout")
    assert rpc.metric("gatehouse_hitl_results_total", status="timeout", source="timeout") >= 1


def test_one_kind_of_pause_per_model_turn(rpc: Rpc, env: tuple[Tools, RuntimeProcess]) -> None:
    tools = env[0]
    (tools.sandbox / "m1.txt").write_text("x")
    task, prompt = _ask(rpc, "ask-and-delete m1.txt")  # the question first: the gated call is refused, not paused
    done = rpc.send(data=_answer(prompt, "prod"), task=task)["task"]
    assert state(done) == "TASK_STATE_COMPLETED"
    assert "not run: this model turn asks the human a question" in status_text(done)
    assert (tools.sandbox / "m1.txt").exists() and tools.executions("delete_file", "m1.txt") == []

    (tools.sandbox / "m2.txt").write_text("x")
    gated = rpc.send("delete-and-ask m2.txt")["task"]  # the gated call first: the question is refused
    assert state(gated) == "TASK_STATE_INPUT_REQUIRED" and gated["metadata"] == {"interrupt_type": "tool_approval"}
    done = rpc.send(data=wire.approve_all(), task=gated)["task"]
    assert state(done) == "TASK_STATE_COMPLETED" and not (tools.sandbox / "m2.txt").exists()
    assert '"status":"error"' in status_text(done) and "wait for approval" in status_text(done)


def test_question_survives_kill_9(rpc: Rpc, env: tuple[Tools, RuntimeProcess]) -> None:
    """Last in the module: it restarts the shared runtime."""
    proc = env[1]
    task, prompt = _ask(rpc, "ask Where to?")  # the example's rule: confirmation required
    assert state(rpc.send(data=_answer(prompt, "production"), task=task)["task"]) == "TASK_STATE_INPUT_REQUIRED"
    proc.kill9()
    proc.start()
    again = rpc.get_task(task["id"])
    assert state(again) == "TASK_STATE_INPUT_REQUIRED" and _prompt(again).stage == "confirm"
    done = rpc.send("confirm", task=task)["task"]
    assert state(done) == "TASK_STATE_COMPLETED"
    text = status_text(done)
    assert text.startswith("The human answered: ")
    result = json.loads(text.removeprefix("The human answered: ").splitlines()[0])
    assert (result["status"], result["selected_option"]) == ("confirmed", "production")
