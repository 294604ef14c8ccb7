"""What a kind of paused call is, to the server: the :class:`PauseKind` protocol and the shapes it trades in.

A kind owns its durable rows (a :class:`Paused` each), its in-process verdicts (an :class:`Internal` subclass, set in
the server call context under :attr:`PauseKind.internal_key`, which only in-process code can set) and the A2A shapes
of its pause. The server never imports a kind: it asks :class:`~agent_runtime.pauses.registry.PauseKinds`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from a2a.server.tasks import TaskUpdater
from a2a.types import Message, Task

from agent_runtime.contract.principals import Principal
from agent_runtime.runs.run_scope import RunScope


class Internal:
    """Base of every in-process verdict (a sweeper's timeout, a watcher's news, DecideOne's resume): the executor's
    ``internal`` is one of these or None, never a client's field."""

    # On a task that is submitted or working (someone else is resuming it), the verdict changes nothing and is dropped
    # without a word; False: the executor answers it as it would a client's message.
    dropped_while_working: ClassVar[bool] = False


class Paused(Protocol):
    """A stored pause of any kind, as far as the server reads it."""

    @property
    def id(self) -> str: ...
    @property
    def task_id(self) -> str: ...
    @property
    def context_id(self) -> str: ...
    @property
    def created_at(self) -> float: ...
    @property
    def open(self) -> bool: ...


class Outcome(Protocol):
    """What a kind reads of a resumed turn (the server's ``TurnOutcome``)."""

    @property
    def text(self) -> str: ...
    @property
    def errors(self) -> list[str]: ...
    @property
    def paused(self) -> bool: ...


Report = Callable[[TaskUpdater, Any], Awaitable[None]]
"""The executor's reporting of a turn's outcome (a resumed turn that pauses again is reported by the executor)."""


@dataclass(frozen=True)
class Decision:
    """A message on a paused task that the registry routed to a kind: the task, the message, who sent it (after a
    relayed requester was checked), the in-process verdict if any, and why a relayed claim was refused ("" if not)."""

    task: Task
    message: Message
    updater: TaskUpdater
    internal: Internal | None
    report: Report
    voter: Principal
    refused: str = ""


class Recorder(Protocol):
    """Turns what a run paused on (its :class:`~agent_runtime.runs.run_scope.RunScope`) into the kind's durable row, before
    anyone is told; None when the run did not pause on this kind. ``confirmation_ids``: ADK's confirmation call id of
    each paused call id."""

    async def record(self, scope: RunScope, confirmation_ids: Mapping[str, str]) -> Paused | None: ...


@dataclass(frozen=True)
class Recorded:
    """A turn's pause of a kind (``TurnOutcome.pause``): the kind's name and its new row."""

    kind: str
    record: Any


class PauseKind(Protocol):
    """One kind of paused call with an A2A task (a question, a tool's question, a sub-agent's pause).

    Registered in order in :class:`~agent_runtime.pauses.registry.PauseKinds`; approvals are the fallback the executor
    keeps (the richest kind: votes, N-of-M, batches, grants)."""

    @property
    def name(self) -> str:
        """Its name in the registry (its pause's interrupt_type where it has one of its own)."""
        ...

    @property
    def internal_key(self) -> str:
        """Where its in-process verdicts travel in the server call context."""
        ...

    @property
    def internal_type(self) -> type[Internal]: ...

    async def for_task(self, task_id: str) -> Sequence[Paused]:
        """Every pause of the task, oldest first."""
        ...

    async def open_in_context(self, context_id: str) -> Sequence[Paused]: ...

    def busy_text(self, record: Any) -> str:
        """Why a new message may not start a turn while ``record`` (open, this kind's) waits in its context."""
        ...

    def finished_text(self, records: Sequence[Any]) -> str:
        """What a message to a finished task whose last pause was this kind's is told."""
        ...

    async def decision(self, decision: Decision) -> None: ...

    async def withdraw(self, task_id: str) -> bool:
        """Before a cancel, ahead of approvals: end this kind's open pause; True when that was the task's pause."""
        ...

    async def canceled(self, task_id: str) -> None:
        """Before a cancel, after approvals were withdrawn (a question open beside a started approved call)."""
        ...

    async def report_pause(self, updater: TaskUpdater, record: Any) -> None: ...


__all__ = ["Decision", "Internal", "Outcome", "PauseKind", "Paused", "Recorded", "Recorder", "Report"]
