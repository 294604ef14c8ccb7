"""The runtime app in-process (ASGI) against a real demo MCP server: internal decisions and recovery paths."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from a2a.types import Task, TaskState

from agent_runtime.approvals import Resolution
from agent_runtime.contract import wire
from tests.support.inprocess import InProcessApp, served
from tests.support.runtime import interrupt, request_ids, state, status_text

pytestmark = pytest.mark.e2e


class App(InProcessApp):
    """The in-process runtime of these tests."""


@pytest.fixture
async def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[App]:
    monkeypatch.setenv("GOOGLE_API_USE_CLIENT_CERTIFICATE", "false")  # as `gatehouse-runtime serve` does
    async with served(tmp_path, app_type=App) as app:
        yield app


async def test_an_internal_decision_that_lost_the_race_leaves_the_task_alone(app: App) -> None:
    (app.tools.sandbox / "race.txt").write_text("x")
    task = (await app.send("delete race.txt"))["task"]
    before = await app.get(task["id"])
    await app.runtime.resumer.resume(task["id"], task["contextId"], {"apr-other": Resolution("expired")}, "timeout", "late")
    after = await app.get(task["id"])
    assert after["status"] == before["status"] and state(after) == "TASK_STATE_INPUT_REQUIRED"
    done = (await app.send(data=wire.approve_all(), task=task))["task"]
    assert state(done) == "TASK_STATE_COMPLETED" and not (app.tools.sandbox / "race.txt").exists()


async def test_an_internal_decision_resumes_without_a_client(app: App) -> None:
    (app.tools.sandbox / "internal.txt").write_text("x")
    task = (await app.send("delete internal.txt"))["task"]
    (request_id,) = request_ids(task)
    result = await app.runtime.resumer.resume(
        task["id"], task["contextId"], {request_id: Resolution("approved")}, "kubernetes", "Approved by alice (ToolApproval)."
    )
    assert isinstance(result, Task) and result.status.state == TaskState.TASK_STATE_COMPLETED
    stored = await app.get(task["id"])
    assert "Approved by alice" in "\n".join(p.get("text", "") for m in stored["history"] for p in m["parts"])
    assert stored["status"]["message"]["metadata"]["decisions"][request_id]["source"] == "kubernetes"
    assert len(app.tools.executions("delete_file", "internal.txt")) == 1


async def test_a_resume_cut_short_is_finished_by_the_next_message_without_running_twice(app: App) -> None:
    (app.tools.sandbox / "cut.txt").write_text("x")
    task = (await app.send("delete cut.txt"))["task"]
    (request_id,) = request_ids(task)
    # As if the runtime died right after recording the decision, before the agent ran on.
    await app.runtime.approvals.decide(task["id"], {request_id: Resolution("approved")}, "a2a")
    done = (await app.send("approve", task=task))["task"]
    assert state(done) == "TASK_STATE_COMPLETED" and "Delete of cut.txt" in status_text(done)
    assert len(app.tools.executions("delete_file", "cut.txt")) == 1
    assert [r.exec_state for r in await app.runtime.approvals.for_task(task["id"])] == ["done"]


async def test_a_call_cut_short_after_its_claim_is_not_run_again_and_the_reply_says_its_outcome_is_unknown(app: App) -> None:
    (app.tools.sandbox / "claimed.txt").write_text("x")
    task = (await app.send("delete claimed.txt"))["task"]
    (request_id,) = request_ids(task)
    # As if the runtime died after committing the claim, before the MCP call went out.
    (record,) = await app.runtime.approvals.decide(task["id"], {request_id: Resolution("approved")}, "a2a")
    assert (await app.runtime.approvals.claim_execution(record.call_id, record.tool, record.args_hash)).ok
    done = (await app.send("approve", task=task))["task"]
    assert state(done) == "TASK_STATE_COMPLETED"
    assert "not run again" in status_text(done) and "whether it took effect is unknown" in status_text(done)
    assert app.tools.executions("delete_file", "claimed.txt") == [] and (app.tools.sandbox / "claimed.txt").exists()


async def test_a_paused_conversation_dropped_from_memory_resumes_with_its_history(app: App) -> None:
    """Paused conversations are not all held in memory (small LRU caches, a2a's ActiveTask released when idle):
    the decision reads the session and the task back from the database and the turn goes on as if they had stayed."""
    runtime = app.runtime
    runtime.sessions._max = runtime.task_store._max = 1
    names = ["kept.txt", "other-1.txt", "other-2.txt"]
    for name in names:
        (app.tools.sandbox / name).write_text("x")
    tasks = [(await app.send(f"delete {name}"))["task"] for name in names]
    assert [state(t) for t in tasks] == ["TASK_STATE_INPUT_REQUIRED"] * 3
    first = tasks[0]
    registry = runtime.handler._active_task_registry
    for _ in range(100):  # released after interrupted_task_timeout (0.1 s)
        if all([await registry.get(t["id"]) is None for t in tasks]):
            break
        await asyncio.sleep(0.1)
    assert await registry.get(first["id"]) is None
    assert (runtime.settings.config.name, "anonymous", first["contextId"]) not in runtime.sessions._cache
    assert all(key[1] != first["id"] for key in runtime.task_store._cache)

    done = (await app.send(data=wire.approve_all(), task=first))["task"]
    assert state(done) == "TASK_STATE_COMPLETED" and "Delete of kept.txt" in status_text(done)
    assert not (app.tools.sandbox / "kept.txt").exists() and (app.tools.sandbox / "other-1.txt").exists()
    assert len(app.tools.executions("delete_file", "kept.txt")) == 1
    texts = [p.get("text", "") for m in done["history"] for p in m["parts"]]
    assert texts[0] == "delete kept.txt"
    other = (await app.send("approve", task=tasks[1]))["task"]
    assert state(other) == "TASK_STATE_COMPLETED" and "Delete of other-1.txt" in status_text(other)

    # The ADK session (what the model sees next) is the one a conversation decided while cached ends with.
    runtime.sessions._max = runtime.task_store._max = 64
    (app.tools.sandbox / "control.txt").write_text("x")
    control = (await app.send("delete control.txt"))["task"]
    assert state((await app.send(data=wire.approve_all(), task=control))["task"]) == "TASK_STATE_COMPLETED"

    async def shape(task: dict[str, Any], name: str) -> list[tuple[str, list[str], list[str], str]]:
        session = await runtime.sessions.get_session(
            app_name=runtime.settings.config.name, user_id="anonymous", session_id=task["contextId"]
        )
        assert session is not None
        parts = [(e, e.content.parts if e.content and e.content.parts else []) for e in session.events]
        return [
            (e.author, [c.name for c in e.get_function_calls()], [r.name for r in e.get_function_responses()],
             "".join(p.text or "" for p in ps).replace(name, "F"))
            for e, ps in parts
        ]

    kept, reference = await shape(first, "kept.txt"), await shape(control, "control.txt")
    assert kept == reference and kept[0] == ("user", [], [], "delete F")
    app_name = runtime.settings.config.name
    session = await runtime.sessions.get_session(app_name=app_name, user_id="anonymous", session_id=first["contextId"])
    assert session is not None
    results = [r.response for e in session.events for r in e.get_function_responses() if r.name == "delete_file"]
    assert "deleted /kept.txt" in str(results[-1])


@pytest.mark.parametrize(("first", "waiting"), [
    ("delete fresh.txt", "is waiting for a decision"), ("ask Where to deploy?", "is waiting for an answer"),
], ids=["approval", "question"])
async def test_a_new_conversation_sees_its_own_pause_from_its_second_message_on(app: App, first: str, waiting: str) -> None:
    # The first message's lookups skip the database (nothing can be stored under ids just generated); once the
    # pause is written, the next message in that context must find it and be refused.
    (app.tools.sandbox / "fresh.txt").write_text("x")
    paused = (await app.send(first))["task"]
    assert state(paused) == "TASK_STATE_INPUT_REQUIRED", paused
    same_context = {"id": "", "contextId": paused["contextId"]}  # a new task in that conversation
    refused = (await app.send("list", task=same_context))["task"]
    assert state(refused) == "TASK_STATE_REJECTED" and waiting in status_text(refused), refused
    assert refused["id"] != paused["id"]
    if first.startswith("delete"):
        done = (await app.send(data=wire.approve_all(), task=paused))["task"]
        assert state(done) == "TASK_STATE_COMPLETED" and not (app.tools.sandbox / "fresh.txt").exists()
    else:
        (question,) = interrupt(paused)["requests"]
        answer = {"decision_type": "answer", "answers": {question["id"]: "staging"}}
        answered = (await app.send(data=answer, task=paused))["task"]
        if state(answered) == "TASK_STATE_INPUT_REQUIRED":  # confirmation required
            answered = (await app.send(data={"decision_type": "confirm"}, task=paused))["task"]
        assert state(answered) == "TASK_STATE_COMPLETED", answered
    # The conversation goes on, with its history (read back from the database once dropped from memory).
    await app.runtime.sessions.flush()
    again = (await app.send("list", task=same_context))["task"]
    assert state(again) == "TASK_STATE_COMPLETED" and again["contextId"] == paused["contextId"], again
