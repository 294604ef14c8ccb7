"""The scope of one agent run (one A2A request): what the gate and the human tools learn while ADK runs.

Set by the turn runner (:mod:`agent_runtime.server.turns`) around each ADK run and read by the approval gate
(:mod:`agent_runtime.server.gate`) and the ``hitl_request`` tool (:mod:`agent_runtime.questions.tool`), which
never import each other: both only need the scope of the run they are called in.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from google.adk.tools.base_tool import BaseTool

from agent_runtime.agent_config import ApproversConfig, RedactConfig


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
class RunScope:
    """What one agent run (one A2A request) learns from the gate: the calls it paused."""

    task_id: str
    context_id: str
    owner: str = ""  # the principal the run acts for: the task's owner, who asked for these calls
    pending: list[PendingCall] = field(default_factory=list)
    hitl: list[Any] = field(default_factory=list)  # the hitl_request question this run paused on (questions/tool.py)
    claimed: set[str] = field(default_factory=set)  # approved calls this run claimed: marked done when they return
    # claimed calls that run with an approver's edited arguments: what the model is told about each
    edited: dict[str, str] = field(default_factory=dict)


class HumanTool(BaseTool):
    """A built-in tool that is itself the human step (``hitl_request``): never gated, pauses on its own."""


CURRENT_RUN: ContextVar[RunScope | None] = ContextVar("gatehouse_run", default=None)


__all__ = ["CURRENT_RUN", "HumanTool", "PendingCall", "RunScope"]
