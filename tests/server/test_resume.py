"""The request handler's protocol edges (agent_runtime/server/resume.py), on the runtime app in-process (ASGI) with the
demo MCP server: a message to a finished task is -32004 and builds nothing that outlives it; the runtime's own late
decisions are told, not raised at."""

from __future__ import annotations

import asyncio
import gc
import logging
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from a2a.types import Message

from agent_runtime.approvals import Resolution
from agent_runtime.contract import wire
from agent_runtime.server.resume import GatehouseRequestHandler
from tests.support.inprocess import InProcessApp, served
from tests.support.runtime import finished_explanation, request_ids, state

pytestmark = pytest.mark.e2e

DESTROYED = "Task was destroyed but it is pending!"


@pytest.fixture
async def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[InProcessApp]:
    monkeypatch.setenv("GOOGLE_API_USE_CLIENT_CERTIFICATE", "false")
    async with served(tmp_path) as app:
        yield app


async def _finished_task(app: InProcessApp, name: str) -> dict[str, Any]:
    (app.tools.sandbox / name).write_text(name)
    task = (await app.send(f"delete {name}"))["task"]
    assert state((await app.send(data=wire.approve_all(), task=task))["task"]) == "TASK_STATE_COMPLETED"
    return task


async def _replay(app: InProcessApp, task: dict[str, Any]) -> dict[str, Any]:
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "taskId": task["id"], "contextId": task["contextId"],
               "parts": [{"data": wire.approve_all()}]}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    return (await app.client.post("/", json=body)).json()


async def _destroyed(caplog: pytest.LogCaptureFixture) -> list[str]:
    await asyncio.sleep(0.1)  # let a2a-sdk's clean-up callbacks run, then collect what they dropped
    gc.collect()
    await asyncio.sleep(0)
    return [r.getMessage() for r in caplog.records if DESTROYED in r.getMessage()]


async def test_messages_to_a_finished_task_leave_no_task_behind(app: InProcessApp, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="asyncio")
    task = await _finished_task(app, "done.txt")
    for _ in range(5):
        reply = await _replay(app, task)
        assert reply["error"]["code"] == -32004 and finished_explanation(reply["error"]).startswith("Already decided:")
    assert await _destroyed(caplog) == []
    assert len(app.tools.executions("delete_file", "done.txt")) == 1


async def test_a_task_finished_under_a2a_sdk_is_let_go_of_too(
    app: InProcessApp, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the task finished after the handler looked (another replica): a2a-sdk refuses it after setting up the task's
    queues, whose dispatcher tasks the handler closes; the client gets the same -32004."""
    caplog.set_level(logging.ERROR, logger="asyncio")
    task = await _finished_task(app, "elsewhere.txt")

    async def looked_too_early(self: GatehouseRequestHandler, params: Any, context: Any) -> Message | None:
        return None

    monkeypatch.setattr(GatehouseRequestHandler, "_admit", looked_too_early)
    for _ in range(5):
        reply = await _replay(app, task)
        assert reply["error"]["code"] == -32004 and finished_explanation(reply["error"]).startswith("Already decided:")
    assert await _destroyed(caplog) == []


async def test_a_late_internal_decision_is_told_not_raised_at(app: InProcessApp) -> None:
    (app.tools.sandbox / "late.txt").write_text("late")
    task = (await app.send("delete late.txt"))["task"]
    (rid,) = request_ids(task)
    assert state((await app.send(data=wire.deny_all("no"), task=task))["task"]) == "TASK_STATE_COMPLETED"
    told = await app.runtime.resumer.resume(task["id"], task["contextId"], {rid: Resolution("expired", "timeout")}, "timeout", "")
    assert isinstance(told, Message) and told.context_id == task["contextId"]
    assert told.parts[0].text.startswith(f"Already decided: {rid} (delete_file) was denied by a2a")
    assert app.tools.executions("delete_file", "late.txt") == []
