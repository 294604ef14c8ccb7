"""What a paused task waits on, read from its stored status alone.

A task is ``input-required`` for one of several reasons, and an approval decided a moment ago does not mean the task
still waits on it: an approved call may have gone on to ask its tool's question (an elicitation), to delegate to a
sub-agent that paused, or the model may have asked the user a question after it. Start-up recovery
(:meth:`agent_runtime.server.decide_one.DecideOne.resume_recorded`) resumes a task only when its *current* pause is
this agent's own tool approval and every request that pause lists is decided; resuming any other pause would answer
it with nothing (the task would complete "(no reply)" and the question be lost).

The kind is the status message's ``interrupt_type`` (docs/wire-contract.md); a sub-agent's pause relayed by its parent
carries the child's ``interrupt_type`` too, marked by :data:`agent_runtime.contract.wire.RELAYED_PAUSE`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from a2a.types import Task, TaskState
from google.protobuf.json_format import MessageToDict

from agent_runtime.contract import wire


class Waiting(StrEnum):
    NOTHING = "nothing"  # not input-required
    APPROVAL = "approval"  # this agent's own gated calls (``tool_approval``)
    SUB_AGENT = "sub_agent"  # a sub-agent's pause, relayed
    QUESTION = "question"  # the model asked the user (``hitl_request``)
    ELICITATION = "elicitation"  # an MCP tool asked the user
    UNKNOWN = "unknown"  # input-required with no kind this runtime knows: never resumed blindly


_KINDS: Mapping[str, Waiting] = {
    wire.INTERRUPT_TOOL_APPROVAL: Waiting.APPROVAL,
    wire.INTERRUPT_HITL: Waiting.QUESTION,
    wire.INTERRUPT_ELICITATION: Waiting.ELICITATION,
}


@dataclass(frozen=True)
class Pause:
    waiting: Waiting
    request_ids: frozenset[str] = frozenset()  # for APPROVAL: the requests the pause lists (empty: none listed)


def waiting_on(task: Task) -> Pause:
    """What ``task`` waits on now (pure: reads the task's status only)."""
    if task.status.state != TaskState.TASK_STATE_INPUT_REQUIRED:
        return Pause(Waiting.NOTHING)
    message = task.status.message
    metadata: dict[str, Any] = MessageToDict(message.metadata) if message.metadata.fields else {}
    if wire.RELAYED_PAUSE in metadata:
        return Pause(Waiting.SUB_AGENT)
    kind = _KINDS.get(str(metadata.get("interrupt_type")), Waiting.UNKNOWN)
    if kind is not Waiting.APPROVAL:
        return Pause(kind)
    ids: set[str] = set()
    for part in message.parts:
        if part.HasField("data"):
            data = MessageToDict(part.data)
            if isinstance(data, dict) and data.get("interrupt_type") == wire.INTERRUPT_TOOL_APPROVAL:
                ids.update(str(r.get("id")) for r in data.get("action_requests") or [] if isinstance(r, dict))
    return Pause(Waiting.APPROVAL, frozenset(ids))


__all__ = ["Pause", "Waiting", "waiting_on"]
