"""A real language model behind the gate: the example Agent, served by ``gatehouse-runtime serve``, talks to a
local open model (Qwen2.5-Coder-1.5B-Instruct on llama-server) through the OpenAI-compatible path a user takes
for a hosted model: ModelConfig ``provider: OpenAI`` + ``baseUrl`` → ADK's LiteLlm → LiteLLM → HTTP.

The assertions are what a user sees: the task's state, the gated call in the pause, the files in the sandbox,
the tool journal, and the reply's gist (not its wording). Sampling is greedy (``--temp 0``), so a run repeats
itself; each test says which of the model's choices it tolerates and never retries a model turn.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from agent_runtime.contract import wire
from agent_runtime.questions import question_wire
from tests.e2e_llm.conftest import NOTES
from tests.support.runtime import Rpc, Tools, interrupt, state, status_text

pytestmark = [pytest.mark.e2e_llm, pytest.mark.timeout(900)]

PAUSED, DONE = "TASK_STATE_INPUT_REQUIRED", "TASK_STATE_COMPLETED"


def _requests(task: dict[str, Any]) -> list[dict[str, Any]]:
    assert state(task) == PAUSED, status_text(task) or task
    assert task["status"]["message"]["metadata"]["interrupt_type"] == "tool_approval", task["status"]
    return list(interrupt(task)["action_requests"])


def _path(request: dict[str, Any]) -> str:
    """The file a call names; the model writes ``old.txt`` or ``/old.txt`` (both the same file in the sandbox)."""
    return str(request["args"].get("path", "")).lstrip("/")


def _reply(task: dict[str, Any]) -> str:
    assert state(task) == DONE, task["status"]
    text = status_text(task)
    assert text.strip(), "the model said nothing"
    return text


def _calls(rpc: Rpc) -> float:
    return rpc.metric("gatehouse_model_calls_total")


def test_gated_delete_pauses_and_approval_deletes(rpc: Rpc, tools: Tools) -> None:
    """Tolerates: ``/old.txt`` for ``old.txt``; any reply that says the file was deleted."""
    before = _calls(rpc)
    task = rpc.send("delete old.txt")["task"]
    (request,) = _requests(task)
    assert (request["name"], _path(request)) == ("delete_file", "old.txt")
    assert (tools.sandbox / "old.txt").exists() and not tools.executions("delete_file"), "nothing runs while paused"

    reply = _reply(rpc.send(data=wire.approve_all(), task=task)["task"])
    assert not (tools.sandbox / "old.txt").exists()
    assert len(tools.executions("delete_file")) == 1
    assert re.search(r"delet|remov", reply, re.I) and "old.txt" in reply, reply
    assert _calls(rpc) - before == 2, "the gate adds no model call: one to ask for the call, one to answer after it"


def test_denial_reason_reaches_the_model_and_its_reply(rpc: Rpc, tools: Tools) -> None:
    """Tolerates any wording that passes the reason on ("in use"); the file must stay."""
    task = rpc.send("delete old.txt")["task"]
    (request,) = _requests(task)
    assert request["name"] == "delete_file"

    reply = _reply(rpc.send(data=wire.deny_all("the file is in use"), task=task)["task"])
    assert (tools.sandbox / "old.txt").exists() and not tools.executions("delete_file")
    assert "in use" in reply.lower(), reply


def test_ungated_read_runs_without_a_pause(rpc: Rpc, tools: Tools) -> None:
    """Tolerates: the reply quoting or paraphrasing the file, as long as it carries its fact (Thursday)."""
    before = len(tools.executions("read_file"))
    reply = _reply(rpc.send("read notes.txt")["task"])
    assert len(tools.executions("read_file")) == before + 1
    assert "Thursday" in reply, (reply, NOTES)


def test_two_deletes_run_only_as_approved_and_once_each(rpc: Rpc, tools: Tools) -> None:
    """Tolerates every way the model may take "delete a.txt and b.txt": both calls in one response (one pause with
    two requests), one call per turn (a pause per file), or one call and then a reply (this model, greedy, does
    that: llama-server's parser takes parallel calls only comma-separated, this model separates them by newlines,
    and after the first result the harness's template asks it for a reply). Whatever it asked for, each file it
    named is deleted exactly once, after its approval, and no other file is touched."""
    task = rpc.send("delete a.txt and b.txt")["task"]
    asked: list[str] = []
    for _ in range(3):  # one pause per file at most; a third would fail the assertions below
        if state(task) != PAUSED:
            break
        requests = _requests(task)
        assert {r["name"] for r in requests} == {"delete_file"}
        asked += [_path(r) for r in requests]
        task = rpc.send(data=wire.approve_all(), task=task)["task"]
    reply = _reply(task)
    assert asked and set(asked) <= {"a.txt", "b.txt"} and len(asked) == len(set(asked)), (asked, reply)
    assert sorted(x["args"]["path"].lstrip("/") for x in tools.executions("delete_file")) == sorted(asked)
    assert {name for name in ("a.txt", "b.txt", "old.txt") if not (tools.sandbox / name).exists()} == set(asked)


def _question(task: dict[str, Any]) -> question_wire.QuestionPrompt:
    assert state(task) == PAUSED, status_text(task) or task
    assert task["status"]["message"]["metadata"]["interrupt_type"] == "hitl_request", task["status"]
    (data,) = [p["data"] for p in task["status"]["message"]["parts"] if "data" in p]
    (prompt,) = question_wire.QuestionInterrupt.model_validate(data).requests
    return prompt


def test_the_model_asks_before_choosing(rpc: Rpc, tools: Tools) -> None:
    """Told to ask first, the model calls hitl_request instead of a tool. Tolerates: the question's wording, options
    written with or without the extension, a confirmation step, and after the answer either a gated delete of the
    chosen file (denied here, so the sandbox stays as it was) or a reply naming the choice."""
    task = rpc.send("Two files could go: old.txt or notes.txt. Ask me which one to delete before you do anything.")["task"]
    prompt = _question(task)
    chosen = next((o for o in prompt.options if "old" in o.lower()), None)
    assert chosen is not None, prompt.options
    task = rpc.send(data={"decision_type": "answer", "answers": {prompt.id: chosen}}, task=task)["task"]
    if state(task) == PAUSED and task["status"]["message"]["metadata"]["interrupt_type"] == "hitl_request":
        task = rpc.send(data={"decision_type": "confirm"}, task=task)["task"]
    if state(task) == PAUSED:
        (request,) = _requests(task)
        assert (request["name"], _path(request)) == ("delete_file", "old.txt")
        task = rpc.send(data=wire.deny_all("just checking"), task=task)["task"]
        _reply(task)
    else:
        assert "old" in _reply(task).lower()
    assert (tools.sandbox / "old.txt").exists() and (tools.sandbox / "notes.txt").exists()
    assert not tools.executions("delete_file")
