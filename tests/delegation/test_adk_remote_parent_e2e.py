"""google-adk's own ``RemoteA2aAgent`` as the parent of a Gatehouse agent, end to end.

A plain ADK orchestrator — an ADK ``Runner`` in this process with an in-memory session service — talks to a real
``gatehouse-runtime serve`` process (and the demo MCP tools server) over A2A. Nothing on the client side is
Gatehouse code: ADK's ``RemoteA2aAgent`` is either the runner's root agent (it needs no model), or a sub-agent an
``LlmAgent`` transfers to (that parent runs on Gatehouse's offline Scripted model, a product feature, scripted to
call ``transfer_to_agent``). ``read_file`` of a ``**/.env*`` path is gated.

What ADK 2.13 does with the pause (read from ``google/adk/a2a``, not guessed):

- ``RemoteA2aAgent._handle_a2a_response`` (``agent/_remote_a2a_agent.py``) converts the ``TASK_STATE_INPUT_REQUIRED``
  status message into an event and calls ``_add_mock_function_call``, which
  (``converters/to_adk_event.py``, ``_create_mock_function_call_for_required_user_input``) replaces the last part
  holding a prompt — our text part — with a function call ``mock_function_call_for_required_user_input``
  ``{"input_required": <text>}`` whose id is the event's only ``long_running_tool_ids`` entry. Our data part stays
  as ADK's generic data-part blob (``inline_data``, ``text/plain``, ``<a2a_datapart_json>…</a2a_datapart_json>``).
  The event's ``custom_metadata`` keeps ``a2a:task_id``, ``a2a:context_id`` and the task as ``a2a:response``.
- The user answers that long-running call with a ``FunctionResponse`` (same id) in the same session. The runner
  routes it back to the agent that made the call; ``_create_a2a_request_for_user_function_response`` sends it to
  the **same** remote task (task and context id from the call's ``custom_metadata``), after
  ``_sanitize_user_function_response_event`` has flattened the answer to text: ``{"result": X}`` becomes the text
  ``X``, any other dict its JSON as text. Other parts of the user's message go along: an ADK data-part blob becomes
  an A2A data part (``converters/part_converter.py``, ``convert_genai_part_to_a2a_part``).

So ``{"result": "approve"}`` reaches Gatehouse as the word ``approve``; a deny with a reason goes either as the
decision in a data part next to it, or as the function response itself, which arrives as JSON *text*: Gatehouse
reads a text that is one whole JSON decision object like the data part (``agent_runtime/contract/wire.py``, ``parse_payload``).

The demo tools server's journal has one line per execution: the count of runs.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from google.adk.a2a.converters.part_converter import (
    A2A_DATA_PART_END_TAG,
    A2A_DATA_PART_START_TAG,
    A2A_DATA_PART_TEXT_MIME_TYPE,
)
from google.adk.a2a.converters.to_adk_event import MOCK_FUNCTION_CALL_FOR_REQUIRED_USER_INPUT
from google.adk.agents import BaseAgent, LlmAgent
from google.adk.agents.remote_a2a_agent import RemoteA2aAgent
from google.adk.events import Event
from google.adk.runners import InMemoryRunner
from google.genai import types

from agent_runtime.contract.agent_config import ScriptedModel, ScriptedRule, ScriptedToolCall
from agent_runtime.models.scripted import ScriptedLlm
from tests.support.runtime import Rpc, RuntimeProcess, Tools, demo_tools, runtime, state

pytestmark = [
    pytest.mark.e2e,
    # ADK marks its whole A2A integration experimental and says so with a UserWarning on every use.
    pytest.mark.filterwarnings(r"ignore:\[EXPERIMENTAL\]:UserWarning"),
]

RULES = [{"tool": "read_file", "when": {"arg": "path", "glob": "**/.env*"}, "action": "require"}]
REMOTE = "gatehouse"  # the RemoteA2aAgent's name: the author of every event relayed from the remote task
REASON = "secrets stay in the vault"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Tools, RuntimeProcess]]:
    base = tmp_path_factory.mktemp("adk-remote-parent-e2e")
    with demo_tools(base / "tools") as tools, runtime(base, tools, rules=RULES) as proc:
        yield tools, proc


@dataclass
class Orchestrator:
    """An ADK runner whose agent tree holds ``remote``; one in-memory session, as an ADK application keeps it."""

    runner: InMemoryRunner
    remote: RemoteA2aAgent
    session_id: str
    kind: str  # the fixture parameter: how ADK is set up (unique per test file path)

    async def send(self, *parts: types.Part) -> list[Event]:
        events = []
        message = types.Content(role="user", parts=list(parts))
        async for event in self.runner.run_async(user_id="user", session_id=self.session_id, new_message=message):
            events.append(event)
        return events


def _root(kind: str, remote: RemoteA2aAgent) -> BaseAgent:
    if kind in ("remote-root", "unary"):
        return remote  # a BaseAgent without a model: the runner runs it directly
    script = ScriptedModel(
        model="orchestrator",
        rules=[ScriptedRule(match=".", tool_calls=[ScriptedToolCall(name="transfer_to_agent", args={"agent_name": REMOTE})])],
    )
    model = ScriptedLlm.from_config(script)
    return LlmAgent(name="orchestrator", model=model, instruction="Hand file work to gatehouse.", sub_agents=[remote])


@pytest.fixture(params=["remote-root", "llm-parent", "unary"])
async def adk(request: pytest.FixtureRequest, env: tuple[Tools, RuntimeProcess]) -> AsyncIterator[Orchestrator]:
    card = f"{env[1].url}/.well-known/agent-card.json"  # anonymous on loopback
    http = httpx.AsyncClient(timeout=60)
    if request.param == "unary":  # a2a-sdk's client without streaming: ADK reads each answer as a whole task
        factory = ClientFactory(ClientConfig(streaming=False, httpx_client=http))
        remote = RemoteA2aAgent(name=REMOTE, agent_card=card, a2a_client_factory=factory)
    else:
        remote = RemoteA2aAgent(name=REMOTE, agent_card=card)
    runner = InMemoryRunner(agent=_root(request.param, remote), app_name="adk-orchestrator")
    session = await runner.session_service.create_session(app_name="adk-orchestrator", user_id="user")
    try:
        yield Orchestrator(runner, remote, session.id, request.param)
    finally:
        await remote.cleanup()  # closes the httpx client the agent made for itself
        await runner.close()
        await http.aclose()


# --- what an ADK user sees and sends ------------------------------------------------------------------------------


def _relayed(events: list[Event]) -> Event:
    """The last event relayed from the remote task (not the orchestrator's own transfer events)."""
    relayed = [e for e in events if e.author == REMOTE and (e.custom_metadata or {}).get("a2a:response")]
    assert relayed, [e.model_dump(exclude_none=True) for e in events]
    return relayed[-1]


def _shown(events: list[Event]) -> list[str]:
    """Every text an ADK user is shown of the remote task's answer: one entry per event (thoughts are not shown)."""
    shown = []
    for event in events:
        if event.author == REMOTE and not event.partial and event.content and event.content.parts:
            text = "\n".join(p.text for p in event.content.parts if p.text and not p.thought)
            if text:
                shown.append(text)
    return shown


def _task_state(event: Event) -> str:
    return str(event.custom_metadata["a2a:response"]["status"]["state"])  # type: ignore[index]


def _adk_data_part(payload: dict[str, Any]) -> types.Part:
    """An A2A data part as ADK represents one in a ``genai`` message (its pause's data part arrives the same way)."""
    raw = A2A_DATA_PART_START_TAG + json.dumps(payload).encode() + A2A_DATA_PART_END_TAG
    return types.Part(inline_data=types.Blob(mime_type=A2A_DATA_PART_TEXT_MIME_TYPE, data=raw))


def _read_adk_data_part(part: types.Part) -> Any:
    assert part.inline_data is not None and part.inline_data.mime_type == A2A_DATA_PART_TEXT_MIME_TYPE, part
    raw = part.inline_data.data or b""
    assert raw.startswith(A2A_DATA_PART_START_TAG) and raw.endswith(A2A_DATA_PART_END_TAG), raw
    return json.loads(raw[len(A2A_DATA_PART_START_TAG) : -len(A2A_DATA_PART_END_TAG)])


@dataclass
class Pause:
    call: types.FunctionCall  # the long-running call ADK made up for the remote input-required task
    task_id: str
    context_id: str
    request: dict[str, Any]  # Gatehouse's action request, read from the data part ADK relayed


def _answer(pause: Pause, response: dict[str, Any]) -> types.Part:
    """The ADK way to answer a long-running call: a function response with its id and name."""
    return types.Part(function_response=types.FunctionResponse(id=pause.call.id, name=pause.call.name, response=response))


async def _paused(adk: Orchestrator, tools: Tools, rpc: Rpc, path: str) -> Pause:
    """``read <path>`` through ADK: checks what ADK shows of the Gatehouse pause, and that nothing ran."""
    (tools.sandbox / path).write_text(f"TOKEN={path}\n")
    event = _relayed(await adk.send(types.Part(text=f"read {path}")))

    assert _task_state(event) == "TASK_STATE_INPUT_REQUIRED"
    parts = event.content.parts if event.content and event.content.parts else []
    calls = [p.function_call for p in parts if p.function_call]
    assert len(calls) == 1, parts
    call = calls[0]
    assert call.name == MOCK_FUNCTION_CALL_FOR_REQUIRED_USER_INPUT and call.id, call
    assert event.long_running_tool_ids == {call.id}  # the runner's sign that the turn waits for the user
    prompt = (call.args or {})["input_required"]  # our status text, as the call's argument
    assert prompt.startswith("Approval needed for 1 tool call:\n- [apr-"), prompt
    assert f"read_file(path='{path}') — approval required: argument 'path' matches glob '**/.env*'" in prompt
    assert 'Reply "approve" or "deny", or send a decision data part' in prompt

    (blob,) = [p for p in parts if p.inline_data]  # our data part, in ADK's data-part encoding
    interrupt = _read_adk_data_part(blob)
    assert interrupt["interrupt_type"] == "tool_approval"
    (request,) = interrupt["action_requests"]
    assert (request["name"], request["args"]) == ("read_file", {"path": path})
    assert f"[{request['id']}]" in prompt

    metadata = event.custom_metadata or {}
    task_id, context_id = metadata["a2a:task_id"], metadata["a2a:context_id"]
    assert metadata["a2a:response"]["id"] == task_id
    assert state(rpc.get_task(task_id)) == "TASK_STATE_INPUT_REQUIRED"  # ADK holds the real task's id
    assert tools.executions("read_file", path) == []
    return Pause(call, task_id, context_id, request)


def _sent(event: Event, pause: Pause) -> dict[str, Any]:
    """The A2A message ADK sent for ``event`` (``a2a:request``), checked to continue the paused task."""
    sent: dict[str, Any] = (event.custom_metadata or {})["a2a:request"]
    assert (sent.get("taskId"), sent.get("contextId"), sent["role"]) == (pause.task_id, pause.context_id, "ROLE_USER"), sent
    return sent


def _approval(rpc: Rpc, request_id: str) -> dict[str, Any]:
    (record,) = [r for r in rpc.client.get("/approvals?state=all").json()["approvals"] if r["id"] == request_id]
    return dict(record)


@pytest.fixture
def rpc(env: tuple[Tools, RuntimeProcess]) -> Rpc:
    return Rpc(env[1].url)


# --- the tests ------------------------------------------------------------------------------------------------------


async def test_approve_through_adk_resumes_the_same_task_and_runs_the_tool_once(
    adk: Orchestrator, env: tuple[Tools, RuntimeProcess], rpc: Rpc
) -> None:
    tools = env[0]
    path = f".env.approve-{adk.kind}"
    pause = await _paused(adk, tools, rpc, path)

    events = await adk.send(_answer(pause, {"result": "approve"}))
    done = _relayed(events)
    assert _sent(done, pause)["parts"] == [{"text": "approve"}]  # ADK flattened {"result": …} to the word
    assert _task_state(done) == "TASK_STATE_COMPLETED"
    assert done.custom_metadata["a2a:task_id"] == pause.task_id  # type: ignore[index]
    # The model's reply, with the tool's result, shown exactly once (streaming: the artifact's event; the final
    # status message carries no second copy).
    assert _shown(events) == [f"{path}: TOKEN={path}"], [e.model_dump(exclude_none=True) for e in events]
    assert not done.long_running_tool_ids and not done.error_message
    assert len(tools.executions("read_file", path)) == 1
    assert state(rpc.get_task(pause.task_id)) == "TASK_STATE_COMPLETED"
    record = _approval(rpc, pause.request["id"])
    assert (record["status"], record["source"], record["task_id"]) == ("approved", "a2a", pause.task_id)

    # The same answer again through ADK: the task is finished; ADK reports the A2A error, nothing runs again.
    again = await adk.send(_answer(pause, {"result": "approve"}))
    errors = [e.error_message for e in again if e.error_message]
    assert len(errors) == 1 and f"Task {pause.task_id} is in terminal state: TASK_STATE_COMPLETED" in str(errors[0]), again
    assert len(tools.executions("read_file", path)) == 1


async def test_deny_with_a_reason_through_adk_tells_the_model_why_and_runs_nothing(
    adk: Orchestrator, env: tuple[Tools, RuntimeProcess], rpc: Rpc
) -> None:
    tools = env[0]
    path = f".env.deny-{adk.kind}"
    pause = await _paused(adk, tools, rpc, path)

    decision = {"decision_type": "deny", "reason": REASON}
    events = await adk.send(_answer(pause, {"result": "deny"}), _adk_data_part(decision))
    done = _relayed(events)
    assert _sent(done, pause)["parts"] == [{"text": "deny"}, {"data": decision}]
    assert _task_state(done) == "TASK_STATE_COMPLETED"
    assert _shown(events) == [f"{path}: rejected by the user: {REASON}"]  # the model quotes the reason, once
    assert tools.executions("read_file", path) == []
    record = _approval(rpc, pause.request["id"])
    assert (record["status"], record["reason"], record["source"]) == ("denied", REASON, "a2a")


async def test_deny_with_the_reason_in_the_function_response_itself(
    adk: Orchestrator, env: tuple[Tools, RuntimeProcess], rpc: Rpc
) -> None:
    tools = env[0]
    path = f".env.deny-json-{adk.kind}"
    pause = await _paused(adk, tools, rpc, path)

    decision = {"decision_type": "deny", "reason": REASON}
    events = await adk.send(_answer(pause, decision))
    event = _relayed(events)
    assert _sent(event, pause)["parts"] == [{"text": json.dumps(decision)}]  # ADK sends the dict as JSON text
    assert tools.executions("read_file", path) == []
    assert _task_state(event) == "TASK_STATE_COMPLETED"
    assert _shown(events) == [f"{path}: rejected by the user: {REASON}"]
    assert _approval(rpc, pause.request["id"])["status"] == "denied"
