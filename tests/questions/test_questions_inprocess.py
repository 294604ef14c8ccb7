"""hitl_request in-process (ASGI): a resume cut short by a restart, and a timeout that lost the race."""

from __future__ import annotations

import json

import pytest
from a2a.helpers import new_text_part
from a2a.server.context import ServerCallContext
from a2a.types import Message, Role, SendMessageRequest

from agent_runtime.app.factory import Runtime
from agent_runtime.questions import question_wire
from agent_runtime.questions.flow import INTERNAL_HITL, InternalHitl, QuestionRuntime
from tests.server.test_runtime_inprocess import App, app  # noqa: F401  (the fixture)
from tests.support.runtime import state, status_text

pytestmark = pytest.mark.e2e  # the app fixture serves the demo MCP tools from a subprocess on 127.0.0.1


def _prompt(task: dict) -> question_wire.QuestionPrompt:
    (data,) = [p["data"] for p in task["status"]["message"]["parts"] if "data" in p]
    return question_wire.QuestionInterrupt.model_validate(data).requests[0]


def _questions(runtime: Runtime) -> QuestionRuntime:
    assert runtime.questions is not None
    return runtime.questions


async def test_a_resume_cut_short_is_finished_with_the_recorded_result(app: App) -> None:  # noqa: F811
    task = (await app.send("ask Where?"))["task"]
    assert state(task) == "TASK_STATE_INPUT_REQUIRED"
    prompt = _prompt(task)
    store = _questions(app.runtime).store
    (record,) = await store.for_task(task["id"])
    # As if the runtime died right after recording the answer, before the agent ran on.
    answered, result = question_wire.apply_message(record.state(), [{"decision_type": "cancel"}], "")
    await store.advance(record, answered, result, "user")
    done = (await app.send("production", task=task))["task"]  # any message finishes it; the recorded result wins
    assert state(done) == "TASK_STATE_COMPLETED"
    model_saw = json.loads(status_text(done).removeprefix("The human answered: "))
    assert (model_saw["status"], model_saw["request_id"]) == ("canceled", prompt.id)


async def test_a_timeout_that_lost_the_race_leaves_the_task_alone(app: App) -> None:  # noqa: F811
    task = (await app.send("ask Where?"))["task"]
    before = await app.get(task["id"])
    message = Message(
        role=Role.ROLE_AGENT, message_id="late", task_id=task["id"], context_id=task["contextId"], parts=[new_text_part("late")]
    )
    context = ServerCallContext(state={INTERNAL_HITL: InternalHitl("hitl-other")})
    await app.runtime.handler.on_message_send(SendMessageRequest(message=message), context)
    after = await app.get(task["id"])
    assert after["status"] == before["status"] and state(after) == "TASK_STATE_INPUT_REQUIRED"
    (record,) = await _questions(app.runtime).store.for_task(task["id"])
    assert record.open and record.version == 0
