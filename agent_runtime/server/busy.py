"""Whether a new message may start a turn in its context: not while another task of the same conversation waits.

A context has one conversation (one ADK session); while one of its tasks waits for a human — a gated call, a
``hitl_request`` question, a tool's question, a sub-agent's pause — a new message there would run the model beside a
half-finished turn. Each kind of pause is looked up in its own store, in the registry's order (pauses/registry.py);
another principal's task under the same context id is not this caller's business and never blocks it (nor is it named).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from a2a.helpers import get_data_parts, get_text_parts
from a2a.types import Message

from agent_runtime.approvals import ApprovalService
from agent_runtime.contract import wire
from agent_runtime.pauses.registry import PauseKinds


class ContextGuard:
    def __init__(
        self, approvals: ApprovalService, *, owner_of: Callable[[str], Awaitable[str | None]] | None,
        kinds: PauseKinds | None = None,
    ) -> None:
        self._approvals = approvals
        self._owner_of = owner_of
        self._kinds = kinds if kinds is not None else PauseKinds()

    async def _same_owner(self, task_id: str, owner: str) -> bool:
        """Whether the task is ``owner``'s: another principal's conversation under the same context id is not."""
        return self._owner_of is None or await self._owner_of(task_id) == owner

    async def refusal(self, context_id: str, owner: str, message: Message) -> str:
        """Why ``message`` may not start a turn (empty when it may)."""
        waiting = await self._approvals.pending_in_context(context_id, owner)
        if not waiting:
            busy = await self._kinds.busy(context_id, lambda task_id: self._same_owner(task_id, owner))
            if busy:
                return busy
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
