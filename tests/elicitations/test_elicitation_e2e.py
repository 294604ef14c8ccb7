"""MCP elicitation end to end: the runtime and the demo MCP server as real processes, raw A2A JSON-RPC over HTTP.

The demo's ``put_file`` asks before it overwrites a file (2026-07-28 ``input_required`` result). Its journal has one
line per run of the tool's body, which the SDK runs only on the final round: the count of executions. The example's
Scripted rule ``put <content> to <path>`` calls it and replies ``Put of <path>: {result}``. ``put_file`` is gated
for ``gated/**`` paths here, so one call is approved first and then asks.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_runtime.elicitations import elicitation_wire
from tests.support.runtime import (
    Rpc,
    RuntimeProcess,
    Tools,
    demo_tools,
    interrupt,
    request_ids,
    state,
    status_text,
    wait_for,
    write_manifests,
)

pytestmark = pytest.mark.e2e

KEY = "put_file:overwrite"
RULES = [
    {"tool": "read_file", "when": {"arg": "path", "glob": "**/.env*"}, "action": "require"},
    {"tool": "put_file", "when": {"arg": "path", "glob": "gated/**"}, "action": "require"},
]


def _answer(action: str, content: dict[str, Any] | None = None) -> dict[str, Any]:
    answer: dict[str, Any] = {"decision_type": elicitation_wire.DECISION_TYPE, "action": action}
    return answer if content is None else {**answer, "content": content}


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Tools, RuntimeProcess]]:
    base = tmp_path_factory.mktemp("elicitation-e2e")
    with demo_tools(base / "tools") as tools:
        proc = RuntimeProcess(write_manifests(base / "manifests", tools.url, rules=RULES), base / "state", base / "runtime.log")
        proc.start()
        try:
            yield tools, proc
        finally:
            proc.stop()


@pytest.fixture
def rpc(env: tuple[Tools, RuntimeProcess]) -> Rpc:
    return Rpc(env[1].url)


def _existing(tools: Tools, name: str, content: str = "old") -> Path:
    path = tools.sandbox / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    return path


def _asked(task: dict[str, Any]) -> elicitation_wire.ElicitationPrompt:
    assert state(task) == "TASK_STATE_INPUT_REQUIRED", task
    assert task["status"]["message"]["metadata"] == {"interrupt_type": "elicitation"}
    pause = elicitation_wire.ElicitationInterrupt.model_validate(interrupt(task))
    (prompt,) = pause.elicitations
    return prompt


def test_answered_the_tool_completes_with_the_answer_once(rpc: Rpc, env: tuple[Tools, RuntimeProcess]) -> None:
    tools = env[0]
    path = _existing(tools, "accept.txt")
    task = rpc.send("put fresh to accept.txt")["task"]
    prompt = _asked(task)
    assert (prompt.tool, prompt.server, prompt.round, list(prompt.requests)) == ("put_file", "file-tools", 1, [KEY])
    question = prompt.requests[KEY]
    assert question.message == "accept.txt exists. Overwrite it?"
    assert question.requested_schema["properties"]["overwrite"]["type"] == "boolean"
    assert "requestState" not in str(task) and "request_state" not in str(task)  # the server's state stays inside
    assert path.read_text() == "old" and tools.executions("put_file", "accept.txt") == []

    done = rpc.send(data=_answer("accept", {"overwrite": True}), task=task)["task"]
    assert state(done) == "TASK_STATE_COMPLETED", done
    assert status_text(done) == "Put of accept.txt: wrote 5 bytes to /accept.txt"
    assert done["status"]["message"]["metadata"]["elicitations"][prompt.id]["outcome"] == "accept"
    assert path.read_text() == "fresh"
    assert len(tools.executions("put_file", "accept.txt")) == 1
    # The same answer again: the task is finished, nothing runs again.
    explained = rpc.send_finished(data=_answer("accept", {"overwrite": True}), task=task)
    assert explained.startswith(f"Already answered: {prompt.id} (put_file) ended accept by user")
    assert len(tools.executions("put_file", "accept.txt")) == 1


@pytest.mark.parametrize(("how", "said"), [
    (_answer("decline"), "answered decline"),
    (_answer("cancel"), "answered cancel"),
    ("decline", "answered decline"),  # the word, as gatehouse chat sends it
    (_answer("accept", {"overwrite": False}), "kept it"),
])
def test_decline_and_cancel_reach_the_tool_as_such(rpc: Rpc, env: tuple[Tools, RuntimeProcess], how: Any, said: str) -> None:
    tools = env[0]
    name = f"keep-{abs(hash(str(how)))}.txt"
    path = _existing(tools, name)
    task = rpc.send(f"put fresh to {name}")["task"]
    _asked(task)
    done = rpc.send(how, task=task)["task"] if isinstance(how, str) else rpc.send(data=how, task=task)["task"]
    assert state(done) == "TASK_STATE_COMPLETED", done
    assert status_text(done) == f"Put of {name}: not written: {name} exists and the user {said}"
    assert path.read_text() == "old"
    assert len(tools.executions("put_file", name)) == 1  # the tool's body ran once, and wrote nothing


@pytest.mark.parametrize(("bad", "needle"), [
    (_answer("accept", {"overwrite": "yes"}), "does not match the tool's schema (overwrite: 'yes' is not of type 'boolean')"),
    (_answer("accept", {"overwrite": True, "force": True}), "fields the tool did not ask for: force"),
    (_answer("accept", {}), "does not match the tool's schema (content: 'overwrite' is a required property)"),
    (_answer("accept"), "accept needs content"),
    (_answer("decline", {"overwrite": False}), "decline carries no content"),
    (_answer("maybe"), "is malformed"),
    ({"decision_type": "elicitation_response", "responses": {"eli-unknown": {KEY: {"action": "decline"}}}},
     "responses must name exactly the open question"),
    ({"decision_type": "approve"}, "an approval or another answer never answers it"),
    ({"decision_type": "answer", "answers": {"x": "y"}}, "an approval or another answer never answers it"),
    ("approve", "Could not read an answer from the text 'approve'"),
])
def test_a_malformed_or_schema_invalid_answer_changes_nothing(
    rpc: Rpc, env: tuple[Tools, RuntimeProcess], bad: Any, needle: str,
) -> None:
    tools = env[0]
    name = f"bad-{abs(hash(str(bad)))}.txt"
    path = _existing(tools, name)
    task = rpc.send(f"put fresh to {name}")["task"]
    prompt = _asked(task)
    again = rpc.send(bad, task=task)["task"] if isinstance(bad, str) else rpc.send(data=bad, task=task)["task"]
    assert _asked(again).id == prompt.id  # still open, the question repeated
    assert needle in status_text(again), status_text(again)
    assert "Nothing was answered; the tool's question is still open." in status_text(again)
    assert path.read_text() == "old" and tools.executions("put_file", name) == []
    done = rpc.send(data={"decision_type": "elicitation_response", "responses": {prompt.id: {KEY: {"action": "accept",
                          "content": {"overwrite": True}}}}}, task=task)["task"]
    assert state(done) == "TASK_STATE_COMPLETED" and path.read_text() == "fresh"
    assert len(tools.executions("put_file", name)) == 1


def test_a_new_file_is_written_without_asking(rpc: Rpc, env: tuple[Tools, RuntimeProcess]) -> None:
    done = rpc.send("put hello to brand-new.txt")["task"]
    assert state(done) == "TASK_STATE_COMPLETED" and status_text(done) == "Put of brand-new.txt: wrote 5 bytes to /brand-new.txt"


def test_a_new_message_while_the_tool_asks_is_rejected_and_cancel_ends_it(rpc: Rpc, env: tuple[Tools, RuntimeProcess]) -> None:
    tools = env[0]
    path = _existing(tools, "cancel-task.txt")
    task = rpc.send("put fresh to cancel-task.txt")["task"]
    prompt = _asked(task)
    other = rpc.send("list /", context_id=task["contextId"])["task"]
    assert state(other) == "TASK_STATE_REJECTED"
    assert f"waiting for an answer to put_file's question {prompt.id}" in status_text(other)
    canceled = rpc.call("CancelTask", {"id": task["id"]})
    assert state(canceled["result"]) == "TASK_STATE_CANCELED", canceled
    explained = rpc.send_finished(data=_answer("accept", {"overwrite": True}), task=task)
    assert explained.startswith(f"Already answered: {prompt.id} (put_file) ended canceled by cancel")
    assert path.read_text() == "old" and tools.executions("put_file", "cancel-task.txt") == []


def test_an_approved_call_that_then_asks_runs_exactly_once(rpc: Rpc, env: tuple[Tools, RuntimeProcess]) -> None:
    tools = env[0]
    path = _existing(tools, "gated/g.txt")
    task = rpc.send("put fresh to gated/g.txt")["task"]
    assert state(task) == "TASK_STATE_INPUT_REQUIRED" and interrupt(task)["interrupt_type"] == "tool_approval"
    (approval_id,) = request_ids(task)
    asked = rpc.send(data={"decision_type": "approve"}, task=task)["task"]
    prompt = _asked(asked)  # approved, called once: the tool asks; it has not run
    assert path.read_text() == "old" and tools.executions("put_file", "gated/g.txt") == []
    done = rpc.send(data=_answer("accept", {"overwrite": True}), task=task)["task"]
    assert state(done) == "TASK_STATE_COMPLETED", done
    # The retry with the answer is part of the one approved execution: never refused as "already executed".
    assert status_text(done) == "Put of gated/g.txt: wrote 5 bytes to /gated/g.txt"
    assert path.read_text() == "fresh" and len(tools.executions("put_file", "gated/g.txt")) == 1
    (record,) = [r for r in rpc.client.get("/approvals?state=all").json()["approvals"] if r["id"] == approval_id]
    assert record["status"] == "approved"
    # One claim, finished once, when the retry with the answer returned (not when the tool first asked).
    with sqlite3.connect(env[1].state_dir / "gatehouse.db") as db:
        (exec_state,) = db.execute("SELECT exec_state FROM gatehouse_approvals WHERE id = ?", (approval_id,)).fetchone()
        events = db.execute("SELECT event, outcome FROM gatehouse_audit_events WHERE request_id = ? AND event IN "
                            "('started', 'executed', 'refused') ORDER BY at", (approval_id,)).fetchall()
    assert exec_state == "done" and events == [("started", "started"), ("executed", "ran")], events
    for replay in ({"decision_type": "approve"}, _answer("accept", {"overwrite": True})):
        explained = rpc.send_finished(data=replay, task=task)
        assert "Already answered" in explained and prompt.id in explained
    assert len(tools.executions("put_file", "gated/g.txt")) == 1


def test_the_question_survives_kill_9_between_pause_and_answer(rpc: Rpc, env: tuple[Tools, RuntimeProcess]) -> None:
    """Late in the module: it restarts the shared runtime."""
    tools, proc = env
    path = _existing(tools, "restart.txt")
    task = rpc.send("put fresh to restart.txt")["task"]
    prompt = _asked(task)
    proc.kill9()
    proc.start()
    assert _asked(rpc.get_task(task["id"])).id == prompt.id
    done = rpc.send(data=_answer("accept", {"overwrite": True}), task=task)["task"]
    assert state(done) == "TASK_STATE_COMPLETED", done
    assert status_text(done) == "Put of restart.txt: wrote 5 bytes to /restart.txt"
    assert path.read_text() == "fresh" and len(tools.executions("put_file", "restart.txt")) == 1


def test_an_unanswered_question_times_out_and_the_call_is_not_completed(tmp_path: Path) -> None:
    with demo_tools(tmp_path / "tools") as tools:
        path = _existing(tools, "slow.txt")
        files = write_manifests(tmp_path / "manifests", tools.url, timeout="2s")
        # An authenticated owner: the timeout is the runtime's own message, which must act for the task's owner.
        (tmp_path / "tokens").write_text("alice:tok-alice\n")
        proc = RuntimeProcess(files, tmp_path / "state", tmp_path / "runtime.log",
                              serve_args=["--api-token-file", str(tmp_path / "tokens")])
        proc.start()
        try:
            rpc = Rpc(proc.url, "tok-alice")
            task = rpc.send("put fresh to slow.txt")["task"]
            prompt = _asked(task)
            started = time.monotonic()
            done = wait_for(lambda: (t := rpc.get_task(task["id"])) and state(t) == "TASK_STATE_COMPLETED" and t, timeout=20)
            assert time.monotonic() - started < 15
            text = status_text(done)
            assert "Put of slow.txt: timeout: no answer to put_file's question within 2s; the call was not completed" in text
            assert f"{prompt.id} (put_file): timeout" in text
            assert done["status"]["message"]["metadata"]["elicitations"][prompt.id]["outcome"] == "timeout"
            assert path.read_text() == "old" and tools.executions("put_file") == []  # no retry after a timeout
            explained = rpc.send_finished(data=_answer("accept", {"overwrite": True}), task=task)
            assert explained.startswith(f"Already answered: {prompt.id} (put_file) ended timeout by timeout")
            assert tools.executions("put_file") == []
        finally:
            proc.stop()
