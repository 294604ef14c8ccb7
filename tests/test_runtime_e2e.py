"""The approval gate over A2A, end to end: runtime and demo MCP server as real processes on 127.0.0.1.

One runtime serves every test of this module (each test uses its own files and conversations); it runs
the example agent with an extra policy rule that refuses deleting ``*.lock`` files.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_runtime import wire
from tests.support.runtime import (
    Rpc,
    RuntimeProcess,
    Tools,
    demo_tools,
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
    assert message["metadata"] == {"interrupt_type": "tool_approval"}
    assert [list(p) for p in message["parts"]] == [["text"], ["data"]]
    pause = wire.ApprovalInterrupt.model_validate(interrupt(task))
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
    _file(tools, "replay.txt")
    task = _pause(rpc, "delete replay.txt")
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "taskId": task["id"], "contextId": task["contextId"],
               "parts": [{"data": wire.batch({request_ids(task)[0]: True})}]}
    first = rpc.call("SendMessage", {"message": message})["result"]["task"]
    assert state(first) == "TASK_STATE_COMPLETED"
    for again in (message, {**message, "messageId": str(uuid.uuid4())}):
        reply = rpc.call("SendMessage", {"message": again})["result"]
        text = reply["message"]["parts"][0]["text"]
        assert text.startswith("Already decided:") and "approved by a2a" in text and "Nothing was run again" in text
    assert len(tools.executions("delete_file", "replay.txt")) == 1
    assert state(rpc.get_task(task["id"])) == "TASK_STATE_COMPLETED"


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
        # A replay over the stream is answered with a message; nothing runs again.
        replay = Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()), task_id=task_id, context_id=context_id,
                         parts=[new_data_part(wire.approve_all())])
        events = [e async for e in client.send_message(SendMessageRequest(message=replay))]
        assert [e.HasField("message") for e in events] == [True]
        assert events[0].message.parts[0].text.startswith("Already decided:")
        assert len(tools.executions("delete_file", "streamed.txt")) == 1


def test_cancel_a_paused_task_refuses_its_requests(rpc: Rpc, tools: Tools) -> None:
    target = _file(tools, "cancel-me.txt")
    task = _pause(rpc, "delete cancel-me.txt")
    reply = rpc.call("CancelTask", {"id": task["id"]})
    assert state(reply["result"]) == "TASK_STATE_CANCELED"
    late = rpc.send("approve", task=task)["message"]["parts"][0]["text"]
    assert late.startswith("Already decided:") and "denied by cancel" in late
    assert target.exists() and tools.executions("delete_file", "cancel-me.txt") == []
