"""The one way a decision continues a pause: DecideOne and the timeout sweeper call :class:`Resumptions`, which hands
the decided requests to the taskless kind (:mod:`agent_runtime.pauses.taskless`) that owns the task id, and every
other task to the A2A resumer (:class:`agent_runtime.server.resume.Resumer`). So approvals' decisions reach a
resumption through the kind, whichever channel decided."""

from __future__ import annotations

from typing import Any, Protocol

from agent_runtime.approvals import AlreadyDecided, ApprovalService, Resolution
from agent_runtime.approvals.records import OUTCOME_LABEL
from agent_runtime.pauses.registry import PauseKinds
from agent_runtime.telemetry.metrics import Metrics


class A2AResumer(Protocol):
    """:class:`agent_runtime.server.resume.Resumer`: decides a task through the A2A request handler."""

    async def resume(
        self, task_id: str, context_id: str, resolutions: dict[str, Resolution], source: str, note: str,
    ) -> Any: ...


class Resumptions:
    """Continue a decided pause: through its taskless kind when one owns the task id, else through the A2A resumer."""

    def __init__(self, approvals: ApprovalService, a2a: A2AResumer, kinds: PauseKinds, metrics: Metrics | None = None) -> None:
        self._approvals = approvals
        self._a2a = a2a
        self._kinds = kinds
        self._metrics = metrics  # counts what it decides itself, as the executor does on the A2A path

    async def resume(
        self, task_id: str, context_id: str, resolutions: dict[str, Resolution], source: str, note: str,
    ) -> Any:
        """``resolutions``: verdicts the runtime itself decides now (the timeout sweeper); empty: resume what the
        votes recorded (DecideOne)."""
        kind = self._kinds.taskless_for(task_id)
        if kind is None:
            return await self._a2a.resume(task_id, context_id, resolutions, source, note)
        if resolutions:
            try:
                decided = await self._approvals.decide(task_id, resolutions, source)
            except AlreadyDecided:
                return None  # another channel decided first: that decision resumed (or resumes) the pause
            if self._metrics is not None:
                self._metrics.pending.dec(len(decided))
                for r in decided:
                    self._metrics.decisions.labels(outcome=OUTCOME_LABEL[r.status], source=source).inc()
        records = await self._approvals.for_task(task_id)
        last = max((r.created_at for r in records), default=0.0)
        pause = [r for r in records if r.created_at == last]
        pending = [r for r in pause if r.status == "pending"]
        if pending:
            return await kind.restate(pending, source, note)
        return await kind.resume(pause, source, note)


__all__ = ["A2AResumer", "Resumptions"]
