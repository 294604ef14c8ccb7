"""Whether a new message may start a turn in its context: not while another task of the same conversation waits.

A context has one conversation (one ADK session); while one of its tasks waits for a human — a gated call, a
``hitl_request`` question, a tool's question, a sub-agent's pause — a new message there would run the model beside a
half-finished turn. Each kind of pause is looked up in its own store; another principal's task under the same context
id is not this caller's business and never blocks it (nor is it named).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from a2a.helpers import get_data_parts, get_text_parts
from a2a.types import Message

from agent_runtime import wire
from agent_runtime.approvals import ApprovalService


class _Open(Protocol):
    async def open_in_context(self, context_id: str) -> Sequence[Any]: ...


class ContextGuard:
    def __init__(
        self, approvals: ApprovalService, *, owner_of: Callable[[str], Awaitable[str | None]] | None,
        hitl: _Open | None = None, elicit: _Open | None = None, delegate: _Open | None = None,
    ) -> None:
        self._approvals = approvals
        self._owner_of = owner_of
        self._hitl = hitl
        self._elicit = elicit
        self._delegate = delegate

    async def _open(self, flow: _Open | None, context_id: str, owner: str) -> list[Any]:
        found = list(await flow.open_in_context(context_id)) if flow is not None else []
        if found and self._owner_of is not None and await self._owner_of(found[0].task_id) != owner:
            return []  # another principal's conversation under the same context id
        return found

    async def refusal(self, context_id: str, owner: str, message: Message) -> str:
        """Why ``message`` may not start a turn (empty when it may)."""
        waiting = await self._approvals.pending_in_context(context_id, owner)
        if not waiting:
            relayed = await self._open(self._delegate, context_id, owner)
            if relayed:
                return (f"Task {relayed[0].task_id} of this context waits for the sub-agent {relayed[0].agent} "
                        f"({relayed[0].id}); decide it (same task_id) before sending a new message.")
            asked = await self._open(self._elicit, context_id, owner)
            if asked:
                return (f"Task {asked[0].task_id} of this context is waiting for an answer to {asked[0].tool}'s question "
                        f"{asked[0].id}; answer it (same task_id) before sending a new message.")
            asking = await self._open(self._hitl, context_id, owner)
            if asking:
                return (f"Task {asking[0].task_id} of this context is waiting for an answer to question {asking[0].id} "
                        "(hitl_request); answer it (same task_id) before sending a new message.")
        if any(isinstance(d, dict) and "decision_type" in d for d in get_data_parts(message.parts)):
            problem = "There is no pending request on this task."
            if waiting:
                problem += f" Task {waiting[0].task_id} of this context is waiting; send the decision with its task_id."
            return str(wire.DecisionError(problem))
        if waiting:
            return (f"Task {waiting[0].task_id} of this context is waiting for a decision on "
                    f"{', '.join(r.id for r in waiting)}; decide it (same task_id) before sending a new message.")
        if not "\n".join(get_text_parts(message.parts)).strip():
            return "The message has no text."
        return ""


__all__ = ["ContextGuard"]
