"""The approval gate over A2A, end to end: runtime and demo MCP server as real processes on 127.0.0.1.

One runtime serves every test of this module (each test uses its own files and conversations); it runs
the example agent with an extra policy rule that refuses deleting ``*.lock`` files.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_runtime.contract import kagent_hitl, wire
from tests.support.runtime import (
    Rpc,
    RuntimeProcess,
    Tools,
    demo_tools,
    finished_explanation,
    interrupt,
    request_ids,
    runtime,
    state,
    status_text,
)

pytestmark = pytest.mark.e2e

RULES = [
    {"tool": "read_file", "when": {"arg": "path", "glob": "**/.env*"}, "action": "require"},
    {"tool": "delete_file", "when": {"arg": "path", "glob": "**/*.lock"}, "action": "deny"},
]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Tools, RuntimeProcess]]:
    base = tmp_path_factory.mktemp("runtime-e2e")
    with demo_tools(base / "tools") as tools, runtime(base / "rt", tools, rules=RULES) as proc:
        yield tools, proc


@pytest.fixture
def tools(env: tuple[Tools, RuntimeProcess]) -> Tools:
    return env[0]


@pytest.fixture
def rpc(env: tuple[Tools, RuntimeProcess]) -> Rpc:
    return Rpc(env[1].url)


def _file(tools: Tools, name: str) -> Path:
    path = tools.sandbox / name
    path.write_text(f"content of {name}")
    return path


def _pause(rpc: Rpc, text: str, context_id: str | None = None) -> dict[str, Any]:
    task = rpc.send(text, context_id=context_id)["task"]
    assert state(task) == "TASK_STATE_INPUT_REQUIRED", task
    return task


def _history_texts(task: dict[str, Any]) -> list[str]:
    return [p.get("text", "") for m in task.get("history", []) for p in m["parts"]]


def test_card_probes_and_metrics(rpc: Rpc) -> None:
    card = rpc.client.get("/.well-known/agent-card.json").json()
    assert card["name"] == "file-manager"
    assert card["capabilities"]["streaming"] is True
    assert [s["id"] for s in card["skills"]] == ["files"]
    assert rpc.client.get("/healthz").status_code == 200
    assert rpc.client.get("/readyz").json() == {"status": "ready"}
    text = rpc.client.get("/metrics").text
    for name in ("gatehouse_model_calls_total", "gatehouse_approval_requests_total", "gatehouse_decisions_total",
                 "gatehouse_pending_approvals"):
        assert name in text


def test_pause_shape_then_approve_runs_once_with_two_model_calls(rpc: Rpc, tools: Tools) -> None:
    target = _file(tools, "approve-me.txt")
    calls_before = rpc.metric("gatehouse_model_calls_total")
    requests_before = rpc.metric("gatehouse_approval_requests_total", agent="file-manager", tool="delete_file")
    approved_before = rpc.metric("gatehouse_decisions_total", outcome="approved", source="a2a")

    task = _pause(rpc, "delete approve-me.txt")
    assert task["metadata"] == {"interrupt_type": "tool_approval"}
    message = task["status"]["message"]
    assert [list(p) for p in message["parts"]] == [["text"], ["data"]]
    pause = wire.ApprovalInterrupt.model_validate(interrupt(task))
    # Ours, and the same calls in kagent's hitl/v1 shape (tests/test_kagent_hitl*.py).
    assert message["metadata"] == {
        "interrupt_type": "tool_approval", kagent_hitl.URI: kagent_hitl.tool_approval_request(pause.action_requests),
    }
    (request,) = pause.action_requests
    assert request.id.startswith("apr-") and request.name == "delete_file" and request.args == {"path": "approve-me.txt"}
    assert request.call_id and request.approval is None and "requireApproval" in request.hint
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", request.expires_at)
    assert message["parts"][0]["text"] == wire.describe_requests(pause.action_requests)
    assert target.exists() and tools.executions("delete_file", "approve-me.txt") == []
    assert rpc.metric("gatehouse_pending_approvals") >= 1

    done = rpc.send(data=wire.approve_all(), task=task)["task"]
    assert state(done) == "TASK_STATE_COMPLETED", done
    assert "Delete of approve-me.txt" in status_text(done)
    assert not target.exists()
    assert len(tools.executions("delete_file", "approve-me.txt")) == 1
    assert rpc.metric("gatehouse_model_calls_total") - calls_before == 2
    assert rpc.metric("gatehouse_approval_requests_total", agent="file-manager", tool="delete_file") - requests_before == 1
    assert rpc.metric("gatehouse_decisions_total", outcome="approved", source="a2a") - approved_before == 1
    # Audit: the request and the decision are in the task history, the applied decision on the final status.
    stored = rpc.get_task(task["id"])
    history = stored["history"]
    assert any(p.get("data", {}).get("interrupt_type") == "tool_approval" for m in history for p in m["parts"])
    assert any(p.get("data") == wire.approve_all() for m in history if m["role"] == "ROLE_USER" for p in m["parts"])
    record = stored["status"]["message"]["metadata"]["decisions"][request.id]
    assert record == {"tool": "delete_file", "outcome": "approved", "source": "a2a", "reason": "", "scope": "once"}


def test_deny_with_reason_reaches_the_model(rpc: Rpc, tools: Tools) -> None:
    target = _file(tools, "keep-me.txt")
    task = _pause(rpc, "delete keep-me.txt")
    done = rpc.send(data=wire.deny_all("it is needed for the audit"), task=task)["task"]
    assert state(done) == "TASK_STATE_COMPLETED"
    assert "rejected by the user: it is needed for the audit" in status_text(done)
    assert target.exists() and tools.executions("delete_file", "keep-me.txt") == []

    task = _pause(rpc, "delete keep-me.txt")
    done = rpc.send("no", task=task)["task"]
    assert "rejected by the user: no reason given" in status_text(done)
    assert target.exists() and tools.executions("delete_file", "keep-me.txt") == []


def test_one_turn_two_gated_one_ungated_decided_by_batch(rpc: Rpc, tools: Tools) -> None:
    a, b = _file(tools, "batch-a.txt"), _file(tools, "batch-b.txt")
    lists_before = len(tools.executions("list_dir"))
    task = _pause(rpc, "clean up batch-a.txt and batch-b.txt")
    requests = interrupt(task)["action_requests"]
    assert [r["args"]["path"] for r in requests] == ["batch-a.txt", "batch-b.txt"]
    # The ungated sibling already ran, once.
    assert len(tools.executions("list_dir")) == lists_before + 1
    first, second = (r["id"] for r in requests)
    done = rpc.send(data=wire.batch({first: True, second: False}, {second: "b stays"}), task=task)["task"]
    assert state(done) == "TASK_STATE_COMPLETED"
    reply = status_text(done)
    assert "rejected by the user: b stays" in reply and "batch-a.txt" in reply  # list result kept in the reply
    assert not a.exists() and b.exists()
    assert len(tools.executions("delete_file", "batch-a.txt")) == 1
    assert tools.executions("delete_file", "batch-b.txt") == []
    assert len(tools.executions("list_dir")) == lists_before + 1


def test_malformed_decisions_change_nothing(rpc: Rpc, tools: Tools) -> None:
    target = _file(tools, "malformed.txt")
    task = _pause(rpc, "delete malformed.txt")
    other = _pause(rpc, "delete someone-elses.txt")
    (pending,) = request_ids(task)
    bad: list[tuple[Any, str]] = [
        (wire.batch({"apr-unknown": True}), ""),                                   # unknown (and missing) id
        ({"decision_type": "batch", "decisions": {}}, ""),                         # missing id
        ({"decision_type": "batch", "decisions": [{"id": pending, "decision": "approve"},
                                                  {"id": pending, "decision": "deny"}]}, ""),  # duplicate id
        ({"decision_type": "approve_everything"}, ""),                             # unknown decision_type
        (None, "yes, but only the first one"),                                     # ambiguous text
        (wire.batch({request_ids(other)[0]: True}), ""),                          # another task's request
    ]
    for data, text in bad:
        with pytest.raises(wire.DecisionError) as expected:
            wire.parse_decision([] if data is None else [data], text, [pending], allow_session=True)
        reply = rpc.send(text or None, data=data, task=task)["task"]
        assert state(reply) == "TASK_STATE_INPUT_REQUIRED", (data, text)
        assert status_text(reply) == str(expected.value)
        assert request_ids(reply) == [pending]
        assert reply["metadata"]["interrupt_type"] == "tool_approval"
    # A decision sent on a new task of the same context is refused; the paused task is untouched.
    stray = rpc.send(data=wire.approve_all(), context_id=task["contextId"])["task"]
    assert state(stray) == "TASK_STATE_REJECTED"
    assert task["id"] in status_text(stray)
    # A decision naming the task but another context is a protocol error; nothing changes.
    reply = rpc.call("SendMessage", {"message": {
        "messageId": str(uuid.uuid4()), "role": "ROLE_USER", "taskId": task["id"], "contextId": other["contextId"],
        "parts": [{"data": wire.approve_all()}]}})
    assert "error" in reply
    assert state(rpc.get_task(task["id"])) == "TASK_STATE_INPUT_REQUIRED"
    assert state(rpc.get_task(other["id"])) == "TASK_STATE_INPUT_REQUIRED"
    assert target.exists() and tools.executions("delete_file", "malformed.txt") == []
    # Still decidable afterwards.
    assert state(rpc.send("approve", task=task)["task"]) == "TASK_STATE_COMPLETED"
    assert len(tools.executions("delete_file", "malformed.txt")) == 1
    assert state(rpc.send(data=wire.deny_all("not mine"), task=other)["task"]) == "TASK_STATE_COMPLETED"


def test_replayed_decision_never_runs_twice(rpc: Rpc, tools: Tools) -> None:
    """A message to a finished task is the A2A UnsupportedOperationError (-32004); its data explains what happened, and
    the conversation goes on with a new task in the same context (never a new context id)."""
    _file(tools, "replay.txt")
    task = _pause(rpc, "delete replay.txt")
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "taskId": task["id"], "contextId": task["contextId"],
               "parts": [{"data": wire.batch({request_ids(task)[0]: True})}]}
    first = rpc.call("SendMessage", {"message": message})["result"]["task"]
    assert state(first) == "TASK_STATE_COMPLETED"
    no_context = {k: v for k, v in message.items() if k != "contextId"}
    for again in (message, {**message, "messageId": str(uuid.uuid4())}, {**no_context, "messageId": str(uuid.uuid4())}):
        reply = rpc.call("SendMessage", {"message": again})
        assert "result" not in reply and reply["error"]["code"] == -32004, reply
        text = finished_explanation(reply["error"])
        assert text.startswith("Already decided:") and "approved by a2a" in text and "Nothing was run again" in text
        (info,) = reply["error"]["data"]
        assert info["reason"] == "UNSUPPORTED_OPERATION"
        assert {k: info["metadata"][k] for k in ("taskId", "contextId", "state")} == {
            "taskId": task["id"], "contextId": task["contextId"], "state": "TASK_STATE_COMPLETED"}
        assert task["contextId"] in reply["error"]["message"]
    assert len(tools.executions("delete_file", "replay.txt")) == 1
    assert state(rpc.get_task(task["id"])) == "TASK_STATE_COMPLETED"
    # To go on: a new task in the same context.
    _file(tools, "after-replay.txt")
    after = rpc.send("read after-replay.txt", context_id=task["contextId"])["task"]
    assert (after["contextId"], state(after)) == (task["contextId"], "TASK_STATE_COMPLETED") and after["id"] != task["id"]


def test_a_message_naming_only_the_task_stays_in_its_context(rpc: Rpc, tools: Tools) -> None:
    _file(tools, "no-context.txt")
    task = _pause(rpc, "delete no-context.txt")
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "taskId": task["id"], "parts": [{"text": "approve"}]}
    done = rpc.call("SendMessage", {"message": message})["result"]["task"]
    assert state(done) == "TASK_STATE_COMPLETED"
    assert done["contextId"] == done["status"]["message"]["contextId"] == task["contextId"]
    assert {m["contextId"] for m in rpc.get_task(task["id"])["history"]} == {task["contextId"]}


def test_a_session_grant_covers_the_same_call_or_a_glob_for_the_rest_of_the_context(rpc: Rpc, tools: Tools) -> None:
    one, two, three = _file(tools, "grant-1.txt"), _file(tools, "grant-2.txt"), _file(tools, "grant-3.txt")
    task = _pause(rpc, "delete grant-1.txt")
    done = rpc.send(data=wire.approve_all(scope="session"), task=task)["task"]
    assert state(done) == "TASK_STATE_COMPLETED" and not one.exists()
    # The grant covers the approved arguments only: another file asks again, even in the same context.
    other = _pause(rpc, "delete grant-2.txt", context_id=task["contextId"])
    glob = {"decision_type": "approve", "scope": "session", "grant": {"argument": "path", "glob": "grant-*.txt"}}
    assert state(rpc.send(data=glob, task=other)["task"]) == "TASK_STATE_COMPLETED" and not two.exists()
    again = rpc.send("delete grant-3.txt", context_id=task["contextId"])["task"]  # under the glob: runs at once
    assert state(again) == "TASK_STATE_COMPLETED" and not three.exists()
    four = _file(tools, "grant-4.txt")
    elsewhere = _pause(rpc, "delete grant-4.txt")  # another context: asks again
    assert four.exists()
    rpc.send("deny", task=elsewhere)


def test_policy_deny_is_refused_without_asking(rpc: Rpc, tools: Tools) -> None:
    target = _file(tools, "package.lock")
    done = rpc.send("delete package.lock")["task"]
    assert state(done) == "TASK_STATE_COMPLETED"
    assert "refused by policy" in status_text(done)
    assert target.exists() and tools.executions("delete_file", "package.lock") == []


def test_ungated_call_runs_without_pause(rpc: Rpc, tools: Tools) -> None:
    _file(tools, "plain.txt")
    done = rpc.send("read plain.txt")["task"]
    assert state(done) == "TASK_STATE_COMPLETED"
    assert "content of plain.txt" in status_text(done)


async def test_a2a_sdk_client_streams_pause_and_resume(env: tuple[Tools, RuntimeProcess]) -> None:
    from a2a.client import ClientConfig, ClientFactory
    from a2a.helpers import new_data_part, new_text_part
    from a2a.types import Message, Role, SendMessageRequest, TaskState
    from a2a.utils.errors import UnsupportedOperationError

    tools, proc = env
    target = _file(tools, "streamed.txt")
    async with httpx.AsyncClient(timeout=60) as http:
        client = await ClientFactory(ClientConfig(streaming=True, httpx_client=http)).create_from_url(proc.url)

        async def send(message: Message) -> tuple[str, str, Any]:
            last = None
            async for event in client.send_message(SendMessageRequest(message=message)):
                if event.HasField("task"):
                    last = event.task.status, event.task.id, event.task.context_id
                elif event.HasField("status_update"):
                    u = event.status_update
                    last = u.status, u.task_id, u.context_id
            assert last is not None
            status, task_id, context_id = last
            return task_id, context_id, status

        task_id, context_id, status = await send(
            Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=[new_text_part("delete streamed.txt")])
        )
        assert status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert target.exists()
        _, _, status = await send(Message(
            role=Role.ROLE_USER, message_id=str(uuid.uuid4()), task_id=task_id, context_id=context_id,
            parts=[new_data_part(wire.approve_all())],
        ))
        assert status.state == TaskState.TASK_STATE_COMPLETED
        assert not target.exists()
        # A replay over the stream is refused at once (-32004, before any event); nothing runs again.
        replay = Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()), task_id=task_id, context_id=context_id,
                         parts=[new_data_part(wire.approve_all())])
        with pytest.raises(UnsupportedOperationError) as refused:
            _ = [e async for e in client.send_message(SendMessageRequest(message=replay))]
        assert refused.value.data is not None and refused.value.data["explanation"].startswith("Already decided:")
        assert refused.value.data["contextId"] == context_id
        assert len(tools.executions("delete_file", "streamed.txt")) == 1


async def test_the_client_told_the_task_finished_goes_on_in_the_same_context(env: tuple[Tools, RuntimeProcess]) -> None:
    """``gatehouse chat``'s client: a decision for a task finished meanwhile shows the server's explanation (no
    exception), keeps the context, and the next message starts a new task in it."""
    from agent_runtime.clients import a2a_client

    tools, proc = env
    _file(tools, "client-replay.txt")
    async with a2a_client.connect(proc.url) as client:
        paused = await a2a_client.send_text(client, "delete client-replay.txt")
        assert paused.pending and paused.task_id and paused.context_id
        ids = {"task_id": paused.task_id, "context_id": paused.context_id}
        assert (await a2a_client.send_decision(client, wire.approve_all(), **ids)).state == "completed"
        late = await a2a_client.send_decision(client, wire.deny_all("too late"), **ids)
        assert (late.task_id, late.context_id, late.state) == (paused.task_id, paused.context_id, "completed")
        assert late.answer.startswith("Already decided:") and "approved by a2a" in late.answer
        _file(tools, "client-next.txt")
        after = await a2a_client.send_text(client, "read client-next.txt", context_id=late.context_id)
        assert (after.context_id, after.state) == (paused.context_id, "completed") and after.task_id != paused.task_id
    assert len(tools.executions("delete_file", "client-replay.txt")) == 1


def test_cancel_a_paused_task_refuses_its_requests(rpc: Rpc, tools: Tools) -> None:
    target = _file(tools, "cancel-me.txt")
    task = _pause(rpc, "delete cancel-me.txt")
    reply = rpc.call("CancelTask", {"id": task["id"]})
    assert state(reply["result"]) == "TASK_STATE_CANCELED"
    late = rpc.call("SendMessage", {"message": {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "taskId": task["id"],
                                                "contextId": task["contextId"], "parts": [{"text": "approve"}]}})["error"]
    assert late["code"] == -32004, late
    explanation = finished_explanation(late)
    assert explanation.startswith("Already decided:") and "denied by cancel" in explanation
    assert target.exists() and tools.executions("delete_file", "cancel-me.txt") == []
    again = rpc.call("CancelTask", {"id": task["id"]})["error"]  # a finished task is not cancelable (-32002)
    assert again["code"] == -32002 and "denied by cancel" in finished_explanation(again), again


def test_cancel_long_after_the_pause_still_refuses_its_requests(rpc: Rpc, tools: Tools) -> None:
    """a2a-sdk lets go of a paused task's run once idle (interrupted_task_timeout, 0.1 s): a cancel then must still
    deny what is pending, or a REST decision could approve a call of a canceled task."""
    target = _file(tools, "cancel-later.txt")
    task = _pause(rpc, "delete cancel-later.txt")
    time.sleep(1.5)
    assert state(rpc.call("CancelTask", {"id": task["id"]})["result"]) == "TASK_STATE_CANCELED"
    (view,) = [a for a in rpc.client.get("/approvals", params={"state": "all"}).json()["approvals"] if a["task_id"] == task["id"]]
    assert (view["status"], view["source"], view["reason"]) == ("denied", "cancel", "task canceled")
    assert target.exists() and tools.executions("delete_file", "cancel-later.txt") == []
