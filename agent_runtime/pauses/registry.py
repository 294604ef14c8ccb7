"""The ordered registry of pause kinds: the one place the server asks which pause is current.

Routing a message on an ``input-required`` task (pure once the rows are read, :func:`current`):

1. an in-process verdict goes to the kind whose :class:`~agent_runtime.pauses.kind.Internal` it is (approvals' own
   ``InternalDecision`` to approvals);
2. a pending approval request, or any other in-process verdict: approvals;
3. a kind with an open pause (there is one pause per turn);
4. nothing open anywhere (a restart cut a resume short): whichever paused last finishes it; a tie goes to the kind
   registered first, and approvals come after every kind.

Kinds are registered in the order of that tie-break (delegation, elicitation, question). A taskless kind
(:class:`~agent_runtime.pauses.taskless.TasklessKind`) registers with :meth:`PauseKinds.add_taskless`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from agent_runtime.pauses.kind import Internal, Paused, PauseKind
from agent_runtime.pauses.taskless import TasklessKind


class _Approval(Protocol):
    @property
    def status(self) -> str: ...
    @property
    def created_at(self) -> float: ...


def current(
    kinds: Sequence[PauseKind], rows: Sequence[Sequence[Paused]], approvals: Sequence[_Approval], internal: Internal | None,
) -> PauseKind | None:
    """Which kind a message on the task is for (None: approvals); ``rows[i]`` are ``kinds[i]``'s pauses of the task."""
    if internal is not None:
        return next((k for k in kinds if isinstance(internal, k.internal_type)), None)
    if any(r.status == "pending" for r in approvals):
        return None
    for kind, found in zip(kinds, rows, strict=True):
        if any(r.open for r in found):
            return kind
    best: PauseKind | None = None
    best_at = max((r.created_at for r in approvals), default=float("-inf"))
    for kind, found in zip(kinds, rows, strict=True):
        at = max((r.created_at for r in found), default=None)
        # a kind wins a tie with approvals, and an earlier kind a tie with a later one
        if at is not None and (at > best_at or (best is None and at >= best_at)):
            best, best_at = kind, at
    return best


class PauseKinds:
    """The kinds of paused call this runtime serves, in order."""

    def __init__(self, kinds: Sequence[PauseKind] = ()) -> None:
        self._kinds: list[PauseKind] = []
        self._taskless: list[TasklessKind] = []
        for kind in kinds:
            self.add(kind)

    def add(self, kind: PauseKind) -> None:
        if any(k.name == kind.name for k in self._kinds):
            raise ValueError(f"a pause kind named {kind.name!r} is registered already")
        self._kinds.append(kind)

    def add_taskless(self, kind: TasklessKind) -> None:
        if any(kind.prefix.startswith(k.prefix) or k.prefix.startswith(kind.prefix) for k in self._taskless):
            raise ValueError(f"task id prefix {kind.prefix!r} overlaps a registered taskless kind's")
        self._taskless.append(kind)

    def __iter__(self) -> Any:
        return iter(self._kinds)

    def named(self, name: str) -> PauseKind:
        return next(k for k in self._kinds if k.name == name)

    @property
    def internal_keys(self) -> tuple[str, ...]:
        return tuple(k.internal_key for k in self._kinds)

    def internal_of(self, state: Mapping[str, Any]) -> Internal | None:
        """The in-process verdict a server call context carries for one of the kinds, if any."""
        for key in self.internal_keys:
            found = state.get(key)
            if found is not None:
                # the context state is untyped; only Internal verdicts are put under these keys
                return found  # type: ignore[no-any-return]
        return None

    def taskless_for(self, task_id: str) -> TasklessKind | None:
        """The taskless kind whose pauses this (runtime-made) task id names, if any."""
        return next((k for k in self._taskless if task_id.startswith(k.prefix)), None)

    async def rows(self, task_id: str) -> list[Sequence[Paused]]:
        return list(await asyncio.gather(*(k.for_task(task_id) for k in self._kinds)))

    async def route(self, task_id: str, approvals: Sequence[_Approval], internal: Internal | None) -> PauseKind | None:
        """The kind a message on the input-required task is for (None: approvals); see the module docstring."""
        if internal is not None:
            return current(self._kinds, [()] * len(self._kinds), approvals, internal)
        if any(r.status == "pending" for r in approvals):
            return None
        return current(self._kinds, await self.rows(task_id), approvals, None)

    async def busy(self, context_id: str, same_owner: Callable[[str], Awaitable[bool]]) -> str:
        """Why a new message may not start a turn in ``context_id`` while a kind's pause waits there ("" if none);
        another principal's task under the same context id is not the caller's business (``same_owner``)."""
        for kind in self._kinds:
            found = await kind.open_in_context(context_id)
            if found and await same_owner(found[0].task_id):
                return kind.busy_text(found[0])
        return ""

    async def finished_text(self, task_id: str, approvals: Sequence[_Approval]) -> str | None:
        """What a message to the finished task is told when its last pause was a kind's (None: approvals' or none)."""
        rows = await self.rows(task_id)
        latest = max((r.created_at for r in approvals), default=None)
        best: tuple[PauseKind, Sequence[Paused]] | None = None
        for kind, found in zip(self._kinds, rows, strict=True):
            if not found:
                continue
            last = found[-1].created_at
            if latest is None or last > latest:
                best, latest = (kind, found), last
        return best[0].finished_text(best[1]) if best is not None else None

    async def withdraw(self, task_id: str) -> bool:
        """Before a cancel, ahead of approvals: True when a kind's open pause was the task's and is ended."""
        for kind in self._kinds:
            if await kind.withdraw(task_id):
                return True
        return False

    async def canceled(self, task_id: str) -> None:
        for kind in self._kinds:
            await kind.canceled(task_id)


__all__ = ["PauseKinds", "current"]
