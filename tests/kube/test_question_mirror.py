"""hitl_request questions mirrored as ToolApprovals (in-process runtime against the emulated API).

The example Agent offers ``hitl_request`` (``humanTools.hitlRequest``) and its Scripted model asks on
``ask <question>`` (options staging/production, with a confirmation). A question shows up as a ToolApproval
labelled ``gatehouse.dev/kind: hitl_request``; answering it over A2A sets its phase; a ``spec.decision``
written on it (as ``kubectl gatehouse approve`` would, were it not refused) is ignored.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from agent_runtime.kube.objects import approval_name
from agent_runtime.questions import question_wire
from tests.kube.test_runtime import App, app, phase, until  # noqa: F401  (the fixture)
from tests.support.runtime import state

pytestmark = pytest.mark.e2e


def _prompt(task: dict[str, Any]) -> question_wire.QuestionPrompt:
    (data,) = [p["data"] for p in task["status"]["message"]["parts"] if "data" in p]
    return question_wire.QuestionInterrupt.model_validate(data).requests[0]


def _answer(prompt: question_wire.QuestionPrompt, option: str) -> dict[str, Any]:
    return {"decision_type": "answer", "answers": {prompt.id: option}}


async def test_a_question_is_mirrored_with_its_kind_and_answering_it_sets_the_phase(app: App) -> None:  # noqa: F811
    task = (await app.send("ask Deploy where?"))["task"]
    assert state(task) == "TASK_STATE_INPUT_REQUIRED"
    prompt = _prompt(task)
    obj = await until(lambda: phase(app.approval(prompt.id)) == "Pending" and app.approval(prompt.id), what="mirrored")
    meta, spec = obj["metadata"], obj["spec"]
    assert meta["name"] == approval_name("file-manager", prompt.id)
    assert meta["labels"] == {"gatehouse.dev/agent": "file-manager", "gatehouse.dev/context": task["contextId"],
                              "gatehouse.dev/kind": "hitl_request"}
    assert meta["ownerReferences"][0]["uid"] == app.agent()["metadata"]["uid"]
    assert spec["tool"] == "hitl_request" and spec["hint"] == "Deploy where?"
    assert spec["arguments"] == {"question": "Deploy where?", "options": ["staging", "production"],
                                 "requireConfirmation": True}
    assert (spec["requestId"], spec["taskId"], spec["contextId"]) == (prompt.id, task["id"], task["contextId"])
    assert spec["expiresAt"] == prompt.expires_at
    await app.runtime.kube.mirror.drained()
    assert app.agent()["status"].get("pendingApprovals", 0) == 0  # counts tool approvals only

    paused = (await app.send(data=_answer(prompt, "staging"), task=task))["task"]
    assert _prompt(paused).stage == "confirm"
    waiting = await until(lambda: (app.approval(prompt.id) or {}).get("status", {}).get("reason") and app.approval(prompt.id),
                          what="the chosen option")
    assert phase(waiting) == "Pending" and "'staging'" in waiting["status"]["reason"]

    done = (await app.send(data={"decision_type": "confirm"}, task=task))["task"]
    assert state(done) == "TASK_STATE_COMPLETED"
    final = await until(lambda: phase(app.approval(prompt.id)) == "Approved" and app.approval(prompt.id), what="Approved")
    status = final["status"]
    assert (status["source"], status["decidedBy"]) == ("a2a", "a2a client") and status["decidedAt"]
    assert status["reason"] == "the user confirmed 'staging'; selected option: staging"


async def test_a_canceled_question_is_denied(app: App) -> None:  # noqa: F811
    task = (await app.send("ask Really?"))["task"]
    prompt = _prompt(task)
    await until(lambda: phase(app.approval(prompt.id)) == "Pending", what="mirrored")
    done = (await app.send(data={"decision_type": "cancel"}, task=task))["task"]
    assert state(done) == "TASK_STATE_COMPLETED"
    final = await until(lambda: phase(app.approval(prompt.id)) == "Denied" and app.approval(prompt.id), what="Denied")
    assert final["status"]["reason"] == "the user canceled" and final["status"]["source"] == "a2a"


async def test_a_kubectl_decision_on_a_question_is_ignored(app: App, caplog: pytest.LogCaptureFixture) -> None:  # noqa: F811
    task = (await app.send("ask Which one?"))["task"]
    prompt = _prompt(task)
    await until(lambda: phase(app.approval(prompt.id)) == "Pending", what="mirrored")
    with caplog.at_level(logging.WARNING, logger="agent_runtime.kube.watcher"):
        await app.decide(prompt.id, "Approve", "sure", who="mallory")
        await until(lambda: "is a hitl_request question" in caplog.text, what="the warning")
    await asyncio.sleep(1.0)
    await app.runtime.kube.mirror.drained()
    assert phase(app.approval(prompt.id)) == "Pending"
    still = await app.get(task["id"])
    assert state(still) == "TASK_STATE_INPUT_REQUIRED" and _prompt(still).stage == "answer"
    assert app.runtime.questions is not None
    (record,) = await app.runtime.questions.store.for_task(task["id"])
    assert record.open and record.version == 0
    # The question is still answered in the chat, and its ToolApproval follows.
    await app.send(data=_answer(prompt, "production"), task=task)
    done = (await app.send(data={"decision_type": "confirm"}, task=task))["task"]
    assert state(done) == "TASK_STATE_COMPLETED"
    final = await until(lambda: phase(app.approval(prompt.id)) == "Approved" and app.approval(prompt.id), what="Approved")
    assert final["status"]["decidedBy"] == "a2a client"


async def test_reconcile_catches_up_with_open_and_finished_questions(app: App) -> None:  # noqa: F811
    kube = app.runtime.kube
    assert kube is not None
    open_task = (await app.send("ask Left open?"))["task"]
    open_prompt = _prompt(open_task)
    done_task = (await app.send("ask Finished?"))["task"]
    done_prompt = _prompt(done_task)
    await until(lambda: phase(app.approval(done_prompt.id)) == "Pending", what="mirrored")
    await kube.mirror.drained()
    # As if the API missed everything: one object is gone, the other's outcome never reached it.
    await kube.client.delete(kube.mirror.path(approval_name("file-manager", open_prompt.id)))
    app.api.emulator.forbid("PATCH", "/status$", status=422)  # refused for good: dropped
    await app.send(data={"decision_type": "cancel"}, task=done_task)
    await kube.mirror.drained()
    app.api.emulator.allow_all()
    assert app.approval(open_prompt.id) is None and phase(app.approval(done_prompt.id)) == "Pending"
    await kube.mirror.reconcile()
    await until(lambda: phase(app.approval(open_prompt.id)) == "Pending", what="the open question again")
    await until(lambda: phase(app.approval(done_prompt.id)) == "Denied", what="the finished one's outcome")
