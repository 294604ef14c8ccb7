"""The scope of one agent run (one A2A request): what the gate and the human tools learn while ADK runs.

Set by the turn runner (:mod:`agent_runtime.server.turns`) around each ADK run and read by the approval gate
(:mod:`agent_runtime.server.gate`), the ``hitl_request`` tool (:mod:`agent_runtime.questions.tool`) and the MCP tools
that may ask the user (:mod:`agent_runtime.server.toolsets`), which never import each other: each only needs the
scope of the run it is called in.
"""

from __future__ import annotations

import json
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from google.adk.tools.base_tool import BaseTool
from pydantic import BaseModel

from agent_runtime.contract.agent_config import ApproversConfig, RedactConfig


@dataclass(frozen=True)
class PendingCall:
    request_id: str
    call_id: str
    tool: str
    server: str | None
    args: dict[str, Any]
    hint: str
    approvers: ApproversConfig | None = None  # who may decide it (policy.py), fixed when the call pauses
    redact: RedactConfig | None = None  # what others do not see of its arguments (spec.approval.redact), fixed likewise
    rule: str = ""  # the policy rule that gated it (policy.Decision.rule), for the audit


@dataclass
class PendingElicitation:
    """An MCP tool call that came back ``input_required`` with questions for the user (round 1 of its call)."""

    request_id: str
    call_id: str
    tool: str
    server: str | None
    args: dict[str, Any]  # exactly as the tool was called (an approver's edit applied): the retry must match them
    requests: dict[str, Any]  # key -> {"mode": "form", "message", "requested_schema"} (elicitations/wire.FormRequest)
    preset: dict[str, Any]  # key -> ElicitResult answered by the runtime itself (URL mode: declined)
    request_state: str | None
    note: str = ""  # what the model is told with the final result (an approver's edit, a URL request declined)


@dataclass(frozen=True)
class Pause:
    """A sub-agent's input-required status, as received: its text, data parts and status-message metadata (stored in
    ``gatehouse_delegations.pause_json``; agent_runtime/delegation)."""

    text: str = ""
    data: list[dict[str, Any]] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps({"text": self.text, "data": self.data, "metadata": self.metadata}, sort_keys=True)

    @classmethod
    def from_json(cls, raw: str) -> Pause:
        value = json.loads(raw)
        return cls(str(value.get("text", "")), list(value.get("data", [])), dict(value.get("metadata", {})))


@dataclass(frozen=True)
class PendingQuestion:
    """A ``hitl_request`` call the run paused on (agent_runtime/questions/tool.py)."""

    request_id: str
    call_id: str
    tool: str
    args: BaseModel  # questions.wire.QuestionArgs, validated when the model called the tool


@dataclass
class PendingDelegation:
    """A sub-agent call whose sub-agent paused (agent_runtime/delegation/tool.py): this run pauses with it."""

    request_id: str
    call_id: str
    tool: str
    agent: str
    args: dict[str, Any]
    child_task_id: str
    child_context_id: str
    pause: Pause  # the sub-agent's pause, as received
    note: str = ""  # what the model is told with the final result (an approver's edit of the delegation itself)


@dataclass
class RunScope:
    """What one agent run (one A2A request) learns from the gate: the calls it paused."""

    task_id: str
    context_id: str
    owner: str = ""  # the principal the run acts for: the task's owner, who asked for these calls
    pending: list[PendingCall] = field(default_factory=list)
    questions: list[PendingQuestion] = field(default_factory=list)  # the hitl_request question it paused on (questions/tool.py)
    eliciting: list[PendingElicitation] = field(default_factory=list)  # an MCP tool's question (server/toolsets.py)
    delegating: list[PendingDelegation] = field(default_factory=list)  # a sub-agent's pause (delegation/tool.py)
    requester: str = ""  # the human the run acts for, when it differs from the owner (a task delegated by a parent agent)
    depth: int = 0  # how many agents are above this one in the chain that started the task (0: called by a person)
    claimed: set[str] = field(default_factory=set)  # approved calls this run claimed: marked done when they return
    # claimed calls that run with an approver's edited arguments: what the model is told about each
    edited: dict[str, str] = field(default_factory=dict)


class HumanTool(BaseTool):
    """A built-in tool that is itself the human step (``hitl_request``): never gated, pauses on its own."""


CURRENT_RUN: ContextVar[RunScope | None] = ContextVar("gatehouse_run", default=None)


__all__ = [
    "CURRENT_RUN", "HumanTool", "Pause", "PendingCall", "PendingDelegation", "PendingElicitation", "PendingQuestion", "RunScope",
]
