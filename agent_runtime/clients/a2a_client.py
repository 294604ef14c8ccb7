"""A2A plumbing for clients of a Gatehouse agent: send text, send a decision, read a task back.

Every call returns a :class:`TurnResult`, a small typed summary of the events one request produced:

    StreamResponse events ─► TurnResult(task_id, context_id, state, text, status_text, interrupt | hitl)

``text`` is the agent's answer (artifact texts — where Gatehouse returns a finished turn's reply —, else the final
status message's text, else a direct message);
``status_text`` is the text of the last status message (for a pause: what the server says is pending, or what
was wrong with the last decision). A pause for approval (``input-required`` with ``interrupt_type:
tool_approval`` in the status metadata or in the data part) is parsed with :class:`wire.ApprovalInterrupt`,
a question (``interrupt_type: hitl_request``) with :class:`question_wire.QuestionInterrupt`. A message to a task that
finished meanwhile is refused by the server (``UnsupportedOperationError``, -32004): its result is the task's final
state with the server's explanation ("Already decided: …") as ``message_text`` and the task's context, in which the
next message (a new task) goes on. Used by ``gatehouse chat``, the demo and the tests alike.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.helpers.proto_helpers import get_data_parts, get_text_parts, new_data_part, new_text_part
from a2a.types import (
    AgentCard,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
)
from a2a.utils.errors import UnsupportedOperationError
from google.protobuf.json_format import MessageToDict
from pydantic import ValidationError

from agent_runtime.contract import wire
from agent_runtime.questions import question_wire

__all__ = [
    "TextCallback",
    "TurnResult",
    "connect",
    "get_task",
    "open_client",
    "pinned_to",
    "send_decision",
    "send_message",
    "send_text",
    "state_name",
]

TextCallback = Callable[[str], None]
"""Called with each chunk of the agent's answer text as it streams in."""

TERMINAL = frozenset({"completed", "failed", "canceled", "rejected"})


def state_name(state: int) -> str:
    """``TASK_STATE_INPUT_REQUIRED`` → ``input-required`` (the A2A spec's spelling)."""
    return TaskState.Name(state).removeprefix("TASK_STATE_").lower().replace("_", "-")


@dataclass
class TurnResult:
    """What one request did: where the task is now and what the agent said."""

    task_id: str | None = None
    context_id: str | None = None
    state: str = "unknown"
    text: str = ""
    status_text: str = ""
    interrupt: wire.ApprovalInterrupt | None = None
    question: question_wire.QuestionInterrupt | None = None
    interrupt_error: str | None = None
    artifacts: dict[str, str] = field(default_factory=dict)
    message_text: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def pending(self) -> bool:
        """The task waits for a human (an approval, a hitl answer, or an unreadable pause)."""
        return self.state == "input-required"

    @property
    def answer(self) -> str:
        """The best single text to show for this turn."""
        return self.text or self.status_text or self.message_text


TOKEN_ENV = "GATEHOUSE_TOKEN"


@asynccontextmanager
async def connect(
    url: str, *, httpx_client: httpx.AsyncClient | None = None, timeout: float = 300.0, token: str | None = None,
    on_note: TextCallback | None = None,
) -> AsyncIterator[Client]:
    """An a2a-sdk client for the agent at ``url`` (card resolved from ``/.well-known/agent-card.json``), sending
    ``token`` (default: ``$GATEHOUSE_TOKEN``) as a bearer token on every request. ``on_note`` is told when the card
    announces another address than ``url`` (:func:`pinned_to`)."""
    own = httpx_client is None
    token = token if token is not None else os.environ.get(TOKEN_ENV)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx_client or httpx.AsyncClient(timeout=timeout, headers=headers)
    try:
        client = await open_client(url, http, on_note)
        try:
            yield client
        finally:
            await client.close()
    finally:
        if own:
            await http.aclose()


async def open_client(url: str, httpx_client: httpx.AsyncClient, on_note: TextCallback | None = None) -> Client:
    """A streaming client sharing ``httpx_client`` (the caller closes both), talking to ``url`` whatever address the
    card announces (:func:`pinned_to`)."""
    card = await A2ACardResolver(httpx_client, url).get_agent_card()
    card, note = pinned_to(card, url)
    if note and on_note is not None:
        on_note(note)
    return ClientFactory(ClientConfig(streaming=True, httpx_client=httpx_client)).create(card)


def pinned_to(card: AgentCard, url: str) -> tuple[AgentCard, str]:
    """``card`` with every interface moved to ``url``'s scheme, host and port (each keeps its path), and a note saying
    so when that changed something ("" otherwise).

    A card announces the address its agent is reached at from where it runs: in a cluster, its Service's name
    (``http://file-manager.default.svc.cluster.local:8080/``). A client that found the card at another address (a
    ``kubectl port-forward``, a proxy, an ingress) must keep talking there: the announced name does not resolve, or
    leads elsewhere, from where the client is."""
    given = urlsplit(url)
    pinned = AgentCard()
    pinned.CopyFrom(card)
    moved = []
    for interface in pinned.supported_interfaces:
        announced = urlsplit(interface.url)
        if (announced.scheme, announced.netloc) != (given.scheme, given.netloc):
            interface.url = urlunsplit((given.scheme, given.netloc, announced.path or "/", announced.query, ""))
            moved.append(announced.geturl())
    if not moved:
        return card, ""
    return pinned, (f"the agent card announces {', '.join(dict.fromkeys(moved))}; talking to {given.scheme}://"
                    f"{given.netloc} as given (a port-forward or a proxy)")


async def send_text(
    client: Client,
    text: str,
    *,
    context_id: str | None = None,
    task_id: str | None = None,
    on_text: TextCallback | None = None,
) -> TurnResult:
    """Send a user text message (a new task, unless ``task_id`` is given) and collect the reply."""
    return await send_message(client, [new_text_part(text)], context_id=context_id, task_id=task_id, on_text=on_text)


async def send_decision(
    client: Client,
    decision: dict[str, Any],
    *,
    task_id: str,
    context_id: str,
    on_text: TextCallback | None = None,
) -> TurnResult:
    """Answer a pause with ONE data part (``wire.approve_all()``, ``wire.deny_all(reason)``, ``wire.batch(...)``)."""
    return await send_message(client, [new_data_part(decision)], context_id=context_id, task_id=task_id, on_text=on_text)


async def send_message(
    client: Client,
    parts: list[Part],
    *,
    context_id: str | None = None,
    task_id: str | None = None,
    on_text: TextCallback | None = None,
) -> TurnResult:
    message = Message(
        role=Role.ROLE_USER,
        parts=parts,
        message_id=str(uuid.uuid4()),
        context_id=context_id or "",
        task_id=task_id or "",
    )
    collector = _Collector(on_text)
    try:
        async for event in client.send_message(SendMessageRequest(message=message)):
            collector.add(event)
    except UnsupportedOperationError as exc:
        if not task_id or not isinstance(exc.data, dict) or "state" not in exc.data:
            raise
        return _finished(task_id, context_id, exc.data)
    result = collector.result()
    result.context_id = result.context_id or context_id
    result.task_id = result.task_id or task_id
    return result


def _finished(task_id: str, context_id: str | None, data: dict[str, Any]) -> TurnResult:
    """The task was finished before the message came (a replayed decision, one that lost to a timeout or a cancel):
    the server's explanation, the task's final state, and its context, in which a new message goes on."""
    try:
        state = state_name(TaskState.Value(str(data["state"])))
    except ValueError:
        state = "unknown"
    return TurnResult(task_id=task_id, context_id=str(data.get("contextId") or context_id or "") or None, state=state,
                      message_text=str(data.get("explanation", "")))


async def get_task(client: Client, task_id: str) -> TurnResult:
    """The task's current state, read back (e.g. to resume a pending approval after a restart)."""
    task = await client.get_task(GetTaskRequest(id=task_id))
    collector = _Collector(None)
    collector.add_task(task)
    return collector.result()


class _Collector:
    """Folds a stream of ``StreamResponse`` events into one :class:`TurnResult`."""

    def __init__(self, on_text: TextCallback | None) -> None:
        self.on_text = on_text
        self.out = TurnResult()
        self.status_message: Message | None = None

    def add(self, event: StreamResponse) -> None:
        if event.HasField("task"):
            self.add_task(event.task)
        elif event.HasField("status_update"):
            update = event.status_update
            self._ids(update.task_id, update.context_id)
            self.out.state = state_name(update.status.state)
            self.status_message = update.status.message if update.status.HasField("message") else None
            self.out.metadata.update(MessageToDict(update.metadata))
        elif event.HasField("artifact_update"):
            artifact = event.artifact_update
            self._ids(artifact.task_id, artifact.context_id)
            # One update's parts are paragraphs (a note, the reply); chunks of one artifact (append) run on.
            chunk = "\n".join(get_text_parts(artifact.artifact.parts))
            key = artifact.artifact.artifact_id
            self.out.artifacts[key] = (self.out.artifacts.get(key, "") if artifact.append else "") + chunk
            if chunk and self.on_text:
                self.on_text(chunk)
        elif event.HasField("message"):
            self._ids(event.message.task_id, event.message.context_id)
            self.out.message_text = "\n".join(get_text_parts(event.message.parts))
            if self.out.state == "unknown":
                self.out.state = "message"
            if self.out.message_text and self.on_text:
                self.on_text(self.out.message_text)

    def add_task(self, task: Task) -> None:
        self._ids(task.id, task.context_id)
        self.out.state = state_name(task.status.state)
        self.status_message = task.status.message if task.status.HasField("message") else None
        self.out.metadata.update(MessageToDict(task.metadata))
        for artifact in task.artifacts:
            self.out.artifacts[artifact.artifact_id] = "\n".join(get_text_parts(artifact.parts))

    def _ids(self, task_id: str, context_id: str) -> None:
        self.out.task_id = task_id or self.out.task_id
        self.out.context_id = context_id or self.out.context_id

    def result(self) -> TurnResult:
        out = self.out
        out.text = "\n".join(t for t in out.artifacts.values() if t)
        message = self.status_message
        if message is not None:
            out.status_text = "\n".join(get_text_parts(message.parts))
            if not out.text and out.state in TERMINAL:
                out.text = out.status_text
        if out.state == "input-required":
            _read_interrupt(out, get_data_parts(message.parts) if message is not None else [])
        return out


def _read_interrupt(out: TurnResult, data_parts: list[Any]) -> None:
    payload = next((d for d in data_parts if isinstance(d, dict)), None)
    kind = out.metadata.get("interrupt_type") or (payload or {}).get("interrupt_type")
    if kind == wire.INTERRUPT_TOOL_APPROVAL:
        if payload is None:
            out.interrupt_error = "The task waits for a tool approval but its status message has no data part."
            return
        try:
            out.interrupt = wire.ApprovalInterrupt.model_validate(payload)
        except ValidationError as exc:
            out.interrupt_error = f"Could not read the approval request: {exc}"
    elif kind == wire.INTERRUPT_HITL:
        if payload is None:
            out.interrupt_error = "The task waits for an answer but its status message has no data part."
            return
        try:
            out.question = question_wire.QuestionInterrupt.model_validate(payload)
        except ValidationError as exc:
            out.interrupt_error = f"Could not read the question: {exc}"
    elif payload is not None:
        out.interrupt_error = f"The task waits for input of an unknown kind {kind!r}."
