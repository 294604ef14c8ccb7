"""kagent's hitl/v1 end to end: the runtime and the demo MCP server as real processes, raw A2A JSON-RPC over HTTP.

A kagent client reads the pause from the status message's metadata and answers in the message's metadata, each
keyed by the extension's URI and declared in ``extensions`` (docs/wire-contract.md, "kagent hitl/v1").
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_runtime.contract import kagent_hitl, wire
from tests.support.runtime import Rpc, RuntimeProcess, Tools, demo_tools, interrupt, reply_text, runtime, state, status_text

pytestmark = pytest.mark.e2e

URI = "https://kagent.dev/extensions/hitl/v1"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Tools, RuntimeProcess]]:
    base = tmp_path_factory.mktemp("kagent-hitl-e2e")
    # Approvers named, so a pause's data part carries numbers (approvers.required) for the integer checks.
    with demo_tools(base / "tools") as tools, runtime(base / "rt", tools, approvers={"users": ["anonymous"]}) as proc:
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


def _kagent_request(task: dict[str, Any]) -> dict[str, Any]:
    """The pause as a kagent client reads it: only where the status message declares the extension."""
    message = task["status"]["message"]
    assert URI in message.get("extensions", []), message
    payload: dict[str, Any] = message["metadata"][URI]
    return payload


def _pause(rpc: Rpc, text: str) -> tuple[dict[str, Any], dict[str, Any]]:
    task = rpc.send(text)["task"]
    assert state(task) == "TASK_STATE_INPUT_REQUIRED", task
    return task, _kagent_request(task)


def _send_kagent(
    rpc: Rpc, payload: Any, task: dict[str, Any] | None, text: str = "Decided in the kagent UI", declare: bool = True
) -> dict[str, Any]:
    """A kagent decision message (kagent's UI sends a text part and the payload in metadata); the JSON-RPC reply.
    The default text is no decision word, so only the payload can decide."""
    message: dict[str, Any] = {
        "messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}],
        "metadata": {URI: payload}, "extensions": [URI] if declare else [],
    }
    if task is not None:
        message["taskId"], message["contextId"] = task["id"], task["contextId"]
    return rpc.call("SendMessage", {"message": message})


def _decide(rpc: Rpc, task: dict[str, Any], *approvals: dict[str, Any], text: str = "Decided in the kagent UI") -> dict[str, Any]:
    reply = _send_kagent(rpc, {"type": "tool_approval_response", "approvals": list(approvals)}, task, text)
    assert "result" in reply, reply
    done: dict[str, Any] = reply["result"]["task"]
    return done


def test_card_declares_the_extension(rpc: Rpc) -> None:
    card = rpc.client.get("/.well-known/agent-card.json").json()
    (extension,) = [e for e in card["capabilities"]["extensions"] if e["uri"] == URI]
    assert extension.get("required", False) is False  # proto3 JSON leaves a false out
    assert extension["description"] == kagent_hitl.DESCRIPTION


def test_pause_carries_both_shapes_for_the_same_calls(rpc: Rpc, tools: Tools) -> None:
    for name in ("both-a.txt", "both-b.txt"):
        _file(tools, name)
    task, request = _pause(rpc, "clean up both-a.txt and both-b.txt")
    ours = wire.ApprovalInterrupt.model_validate(interrupt(task))
    assert request == kagent_hitl.tool_approval_request(ours.action_requests)
    assert [(t["id"], t["call_id"], t["name"], t["args"]) for t in request["tools"]] == [
        (r.id, r.call_id, r.name, r.args) for r in ours.action_requests
    ]
    assert task["status"]["message"]["metadata"]["interrupt_type"] == "tool_approval"  # ours is still there
    stored = rpc.get_task(task["id"])
    assert _kagent_request(stored) == request  # what a kagent UI reloading the task reconstructs the pause from


def test_kagent_approval_runs_the_call_once(rpc: Rpc, tools: Tools) -> None:
    target = _file(tools, "kagent-approve.txt")
    task, request = _pause(rpc, "delete kagent-approve.txt")
    (tool,) = request["tools"]
    assert (tool["name"], tool["args"]) == ("delete_file", {"path": "kagent-approve.txt"})
    done = _decide(rpc, task, {"id": tool["id"], "approved": True})
    assert state(done) == "TASK_STATE_COMPLETED", done
    # The reply is the task's artifact, which is what kagent's UI renders of a completed task; the final status
    # message has no copy of it (a client showing both would show it twice).
    (artifact,) = done["artifacts"]
    assert artifact["name"] == "reply" and "Delete of kagent-approve.txt: deleted" in reply_text(done)
    assert [p for p in done["status"]["message"].get("parts", []) if "text" in p] == []
    assert rpc.get_task(task["id"])["artifacts"] == done["artifacts"]  # what a kagent UI reloading the task shows
    assert not target.exists() and len(tools.executions("delete_file", "kagent-approve.txt")) == 1
    assert done["status"]["message"]["metadata"]["decisions"][tool["id"]]["outcome"] == "approved"

    # The same decision again: the task is finished; nothing runs twice.
    again = _send_kagent(rpc, {"type": "tool_approval_response", "approvals": [{"id": tool["id"], "approved": True}]}, task)
    assert again["error"]["code"] == -32004
    assert len(tools.executions("delete_file", "kagent-approve.txt")) == 1


def test_kagent_rejection_reason_reaches_the_model(rpc: Rpc, tools: Tools) -> None:
    target = _file(tools, "kagent-keep.txt")
    task, request = _pause(rpc, "delete kagent-keep.txt")
    (tool,) = request["tools"]
    done = _decide(rpc, task, {"id": tool["id"], "approved": False, "rejection_reason": "not production"})
    assert state(done) == "TASK_STATE_COMPLETED", done
    assert "rejected by the user: not production" in status_text(done)
    assert target.exists() and tools.executions("delete_file", "kagent-keep.txt") == []


def test_kagent_decides_each_call_of_a_batch(rpc: Rpc, tools: Tools) -> None:
    a, b = _file(tools, "kagent-a.txt"), _file(tools, "kagent-b.txt")
    task, request = _pause(rpc, "clean up kagent-a.txt and kagent-b.txt")
    first, second = (t["id"] for t in request["tools"])

    # Partial (one of two), and an approval that is not a JSON boolean: nothing is decided, the pause is restated.
    for approvals in ([{"id": first, "approved": True}], [{"id": first, "approved": True}, {"id": second, "approved": "true"}]):
        still = _decide(rpc, task, *approvals, text="Approved")  # the text part is not read when the payload is there
        assert state(still) == "TASK_STATE_INPUT_REQUIRED" and "Nothing was decided" in status_text(still)
        assert _kagent_request(still) == request
    assert a.exists() and b.exists() and tools.executions("delete_file", "kagent-a.txt") == []

    done = _decide(rpc, task, {"id": first, "approved": True}, {"id": second, "approved": False, "rejection_reason": "b stays"})
    assert state(done) == "TASK_STATE_COMPLETED", done
    assert "rejected by the user: b stays" in status_text(done)
    assert not a.exists() and b.exists()
    assert len(tools.executions("delete_file", "kagent-a.txt")) == 1 and tools.executions("delete_file", "kagent-b.txt") == []


def test_payloads_that_cannot_be_a_decision_are_refused(rpc: Rpc, tools: Tools) -> None:
    target = _file(tools, "kagent-refused.txt")
    task, request = _pause(rpc, "delete kagent-refused.txt")
    approve = {"type": "tool_approval_response", "approvals": [{"id": request["tools"][0]["id"], "approved": True}]}
    undeclared = _send_kagent(rpc, approve, task, "Approved", declare=False)  # nor is the text read instead
    assert undeclared["error"]["code"] == -32602 and "extensions" in undeclared["error"]["message"]
    no_task = _send_kagent(rpc, approve, None)
    assert no_task["error"]["code"] == -32602 and "taskId" in no_task["error"]["message"]
    legacy = _send_kagent(rpc, {"decision_type": "approve"}, task)  # kagent's pre-extension shape, under the URI
    assert legacy["error"]["code"] == -32602
    assert state(rpc.get_task(task["id"])) == "TASK_STATE_INPUT_REQUIRED"
    assert target.exists() and tools.executions("delete_file", "kagent-refused.txt") == []


def test_kagent_answers_a_question_and_confirms_it(rpc: Rpc) -> None:
    task, request = _pause(rpc, "ask Where to deploy?")
    assert request["type"] == "ask_user_request"
    (question,) = request["questions"]
    assert question == {"question": "Where to deploy?", "choices": ["staging", "production"], "multiple": False}

    answer = {"type": "ask_user_response", "id": request["id"], "answers": [{"answer": ["production"]}]}
    confirming = _send_kagent(rpc, answer, task, "Answered questions")["result"]["task"]
    assert state(confirming) == "TASK_STATE_INPUT_REQUIRED", confirming
    step = _kagent_request(confirming)
    assert step["id"] == request["id"] + "/confirm" and step["questions"][0]["choices"] == ["confirm", "cancel"]

    replay = _send_kagent(rpc, answer, task, "Answered questions")["result"]["task"]  # the first step's answer again
    assert state(replay) == "TASK_STATE_INPUT_REQUIRED" and "still pending" in status_text(replay)

    confirm = {"type": "ask_user_response", "id": step["id"], "answers": [{"answer": ["confirm"]}]}
    done = _send_kagent(rpc, confirm, task, "Answered questions")["result"]["task"]
    assert state(done) == "TASK_STATE_COMPLETED", done
    reply = status_text(done)
    assert '"status":"confirmed"' in reply.replace(" ", "") and "production" in reply


async def test_kagent_decision_over_the_stream_with_the_extension_requested(env: tuple[Tools, RuntimeProcess]) -> None:
    """As a kagent client built on a2a-sdk does it: the ``A2A-Extensions`` header asks for hitl/v1, the pause is read
    from the streamed status message and the decision is streamed back."""
    import httpx
    from a2a.client import ClientConfig, ClientFactory
    from a2a.extensions.common import HTTP_EXTENSION_HEADER
    from a2a.helpers import get_text_parts, new_text_part
    from a2a.types import Message, Role, SendMessageRequest, TaskState
    from google.protobuf.json_format import MessageToDict

    tools, proc = env
    target = _file(tools, "kagent-streamed.txt")
    async with httpx.AsyncClient(timeout=60, headers={HTTP_EXTENSION_HEADER: URI}) as http:
        client = await ClientFactory(ClientConfig(streaming=True, httpx_client=http)).create_from_url(proc.url)

        states: list[str] = []
        shown: list[str] = []  # every text the stream carries in an artifact or a status message, one per event

        async def send(message: Message) -> tuple[str, str, Any]:
            last = None
            states.clear()
            shown.clear()
            async for event in client.send_message(SendMessageRequest(message=message)):
                if event.HasField("task"):
                    last = event.task.status, event.task.id, event.task.context_id
                    shown.extend(t for a in event.task.artifacts if (t := "\n".join(get_text_parts(a.parts))))
                elif event.HasField("status_update"):
                    last = event.status_update.status, event.status_update.task_id, event.status_update.context_id
                elif event.HasField("artifact_update"):
                    shown.append("\n".join(get_text_parts(event.artifact_update.artifact.parts)))
                if last is not None:
                    states.append(TaskState.Name(last[0].state))
                    if last[0].HasField("message") and (text := "\n".join(get_text_parts(last[0].message.parts))):
                        shown.append(text)
            assert last is not None
            return last[1], last[2], last[0]

        task_id, context_id, status = await send(
            Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=[new_text_part("delete kagent-streamed.txt")])
        )
        assert status.state == TaskState.TASK_STATE_INPUT_REQUIRED and URI in status.message.extensions
        request = MessageToDict(status.message.metadata)[URI]
        approvals = [{"id": t["id"], "approved": True} for t in request["tools"]]
        decision = Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()), task_id=task_id, context_id=context_id,
                           parts=[new_text_part("Approve all shown")], extensions=[URI])
        decision.metadata.update({URI: {"type": "tool_approval_response", "approvals": approvals}})
        _, _, status = await send(decision)
        assert status.state == TaskState.TASK_STATE_COMPLETED
        assert not target.exists() and len(tools.executions("delete_file", "kagent-streamed.txt")) == 1
    # The decision is taken, the work resumes (WORKING), then the reply: shown once, as the artifact.
    assert [s for i, s in enumerate(states) if i == 0 or s != states[i - 1]][-2:] == [
        "TASK_STATE_WORKING", "TASK_STATE_COMPLETED"], states
    assert len(shown) == 1 and "Delete of kagent-streamed.txt: deleted" in shown[0], shown


def _numbers(value: Any) -> list[Any]:
    """Every number in parsed JSON (booleans are not numbers)."""
    if isinstance(value, dict):
        return [n for v in value.values() for n in _numbers(v)]
    if isinstance(value, list):
        return [n for v in value for n in _numbers(v)]
    return [value] if isinstance(value, int | float) and not isinstance(value, bool) else []


def test_integers_in_a_pause_reach_the_wire_as_json_integers(rpc: Rpc, tools: Tools) -> None:
    """What a kagent client (Go, TypeScript) parses: the raw JSON, unary and streamed, and the task read back."""
    _file(tools, "ints.txt")
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": "delete ints.txt"}]}
    body = {"jsonrpc": "2.0", "id": "1", "method": "SendMessage", "params": {"message": message}}
    task = rpc.client.post("/", json=body).json()["result"]["task"]
    (request,) = interrupt(task)["action_requests"]
    assert request["approvers"]["required"] == 1 and type(request["approvers"]["required"]) is int

    streamed = []
    stream_body = {**body, "method": "SendStreamingMessage",
                   "params": {"message": {**message, "messageId": str(uuid.uuid4())}}}
    with rpc.client.stream("POST", "/", json=stream_body) as response:
        streamed = [json.loads(line[5:]) for line in response.iter_lines() if line.startswith("data:")]
    statuses = [e["result"].get("statusUpdate", e["result"].get("task", {})).get("status", {}) for e in streamed]
    (paused,) = [s for s in statuses if s.get("state") == "TASK_STATE_INPUT_REQUIRED"]
    for status_message in (task["status"]["message"], paused["message"], rpc.get_task(task["id"])["status"]["message"]):
        numbers = _numbers({"parts": status_message["parts"], "metadata": status_message["metadata"]})
        assert numbers and all(type(n) is int for n in numbers), numbers
