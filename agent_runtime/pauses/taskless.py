"""A pause with no A2A task: an approval request the runtime made for something that is not an agent turn (an MCP
gateway's held call, an agent CLI hook's request), resumed by its kind's own callback instead of the A2A resumer.

Its approval requests live in ``gatehouse_approvals`` like any other (votes, N-of-M, grants, the sweeper, every
channel), under a task id the runtime makes with the kind's :attr:`TasklessKind.prefix` (never a client's field), so
which kind resumes a decided request is derived from the stored row alone
(:class:`~agent_runtime.pauses.resumptions.Resumptions`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from agent_runtime.approvals import ApprovalRecord


class TasklessKind(Protocol):
    name: str  # its gatehouse.dev/kind and interrupt_type value
    prefix: str  # the task ids of its approval requests start with it (made by the runtime, e.g. "held-")

    async def resume(self, decided: Sequence[ApprovalRecord], source: str, note: str) -> None:
        """Every request of the pause is decided (``decided``: the pause's requests, as stored): go on."""
        ...

    async def restate(self, pending: Sequence[ApprovalRecord], source: str, note: str) -> None:
        """A vote counted or part of the pause was decided; ``pending`` still wait (tell whoever watches)."""
        ...


__all__ = ["TasklessKind"]
