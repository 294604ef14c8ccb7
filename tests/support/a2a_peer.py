"""A tiny A2A agent for client tests: it pauses with the DESIGN.md shapes and records every decision it gets.

Texts it understands: ``delete X`` (one gated call), ``clean up X and Y`` (two), ``picky delete X`` (the first
decision is refused once, the task stays input-required with an error text), anything else is echoed back.
It runs in a uvicorn thread on 127.0.0.1 so a client subprocess or the test's own loop can reach it.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from a2a.helpers.proto_helpers import get_data_parts, get_message_text, new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Message, Part, Role, TaskState
from google.protobuf import struct_pb2
from google.protobuf.json_format import ParseDict
from starlette.applications import Starlette

from agent_runtime.contract import wire
from tests.support.processes import free_port


@dataclass
class PeerState:
    decisions: list[Any] = field(default_factory=list)
    pending: dict[str, list[wire.ActionRequest]] = field(default_factory=dict)
    picky: set[str] = field(default_factory=set)
    executed: list[str] = field(default_factory=list)


class PeerExecutor(AgentExecutor):
    def __init__(self, state: PeerState) -> None:
        self.state = state

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        assert message is not None
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        requests = self.state.pending.get(task.id)
        if requests is not None:
            await self._decide(updater, message, requests)
            return
        text = get_message_text(message).strip()
        m = re.match(r"(picky )?delete (\S+)$", text) or re.match(r"clean up (\S+) and (\S+)$", text)
        if not m:
            await updater.add_artifact([new_text_part(f"echo: {text}")])
            await updater.complete()
            return
        paths = [m.group(2)] if text.startswith(("delete", "picky")) else [m.group(1), m.group(2)]
        if text.startswith("picky"):
            self.state.picky.add(task.id)
        requests = [
            wire.ActionRequest(
                id=f"apr-{uuid.uuid4().hex[:8]}",
                name="delete_file",
                args={"path": p},
                call_id=f"call-{i}",
                hint="delete_file requires approval",
                expires_at="2099-01-01T00:00:00Z",
            )
            for i, p in enumerate(paths)
        ]
        self.state.pending[task.id] = requests
        await self._pause(updater, requests, wire.describe_requests(requests))

    async def _decide(self, updater: TaskUpdater, message: Message, requests: list[wire.ActionRequest]) -> None:
        data = get_data_parts(message.parts)
        text = get_message_text(message)
        self.state.decisions.append(data[0] if len(data) == 1 else {"text": text, "data": data})
        try:
            verdicts = wire.parse_decision(data, text, [r.id for r in requests], allow_session=False)
        except wire.DecisionError as exc:
            await self._pause(updater, requests, str(exc))
            return
        if updater.task_id in self.state.picky:
            self.state.picky.discard(updater.task_id)
            await self._pause(updater, requests, "This approver may not decide yet; nothing was decided. Try again.")
            return
        del self.state.pending[updater.task_id]
        lines = []
        for r in requests:
            verdict = verdicts[r.id]
            if verdict.approved:
                self.state.executed.append(r.args["path"])
                lines.append(f"deleted {r.args['path']}")
            else:
                lines.append(f"did not delete {r.args['path']}: denied ({verdict.reason or 'no reason'})")
        await updater.add_artifact([new_text_part("; ".join(lines))])
        await updater.complete()

    async def _pause(self, updater: TaskUpdater, requests: list[wire.ActionRequest], text: str) -> None:
        payload = wire.ApprovalInterrupt(action_requests=requests).model_dump()
        data = Part(data=ParseDict(payload, struct_pb2.Value()))
        status = Message(
            role=Role.ROLE_AGENT,
            parts=[new_text_part(text), data],
            message_id=str(uuid.uuid4()),
            task_id=updater.task_id,
            context_id=updater.context_id,
        )
        await updater.update_status(
            TaskState.TASK_STATE_INPUT_REQUIRED, message=status, metadata={"interrupt_type": wire.INTERRUPT_TOOL_APPROVAL}
        )

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


def build_peer_app(url: str, state: PeerState) -> Starlette:
    card = AgentCard(
        name="peer",
        description="test peer",
        version="0.0.1",
        supported_interfaces=[AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text"],
        default_output_modes=["text"],
        skills=[AgentSkill(id="files", name="files", description="deletes files", tags=["files"])],
    )
    handler = DefaultRequestHandler(agent_executor=PeerExecutor(state), task_store=InMemoryTaskStore(), agent_card=card)
    return Starlette(routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, rpc_url="/")])


@contextmanager
def running_peer() -> Iterator[tuple[str, PeerState]]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    state = PeerState()
    server = uvicorn.Server(uvicorn.Config(build_peer_app(url, state), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the A2A test peer did not start")
        time.sleep(0.02)
    try:
        yield url, state
    finally:
        server.should_exit = True
        thread.join(10)
