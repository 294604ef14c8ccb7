"""The timeout sweeper: resolves expired approval requests server-side, with no client connected.

Every ``interval`` seconds it asks the approvals table for pending requests past ``expires_at`` and
resumes each of their tasks through :class:`~agent_runtime.server.resume.Resumer` with the policy's
``onTimeout`` (``deny`` → the model is told ``timeout: …`` and the call does not run; ``approve`` → it
runs). Several replicas may sweep at once: the approvals table lets exactly one of them decide.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from agent_runtime.approvals import AlreadyDecided, ApprovalRecord, ApprovalService, Resolution
from agent_runtime.infra.periodic import PeriodicSweep
from agent_runtime.pauses.resumptions import A2AResumer

log = logging.getLogger(__name__)


class TimeoutSweeper(PeriodicSweep):
    name = "gatehouse-timeout-sweeper"

    def __init__(self, approvals: ApprovalService, resumer: A2AResumer, on_timeout: str, interval: float = 0.25) -> None:
        super().__init__(interval)
        self._approvals = approvals
        self._resumer = resumer
        self._on_timeout = on_timeout

    async def sweep(self) -> int:
        """Resolve every expired request once; return how many tasks were resumed."""
        expired = await self._approvals.expired()
        resumed = await asyncio.gather(*(self._resume(records) for records in expired.values()), return_exceptions=True)
        for result in resumed:
            if isinstance(result, BaseException):
                log.error("timeout resume failed: %r", result)
        return len(expired)

    async def _resume(self, records: list[ApprovalRecord]) -> None:
        first = records[0]
        seconds = f"{first.expires_at - first.created_at:g}"
        status = "approved" if self._on_timeout == "approve" else "expired"
        reason = f"timeout: no decision within {seconds}s"
        resolutions = {r.id: Resolution(status, reason) for r in records}  # type: ignore[arg-type]
        # onTimeout ask (an MCPGateway's hooks): expired as for deny; the hook hands the call to the terminal.
        action = ("the calls run (onTimeout: approve)" if status == "approved"
                  else f"the calls are not run (onTimeout: {self._on_timeout})")
        note = f"Timeout: no decision on {', '.join(resolutions)} within {seconds}s; {action}."
        try:
            await self._resumer.resume(first.task_id, first.context_id, resolutions, "timeout", note)
        finally:
            # A task that could not be resumed (cancelled, say) must not be swept again and again.
            with contextlib.suppress(AlreadyDecided):
                await self._approvals.decide(first.task_id, resolutions, "timeout")


__all__ = ["TimeoutSweeper"]
