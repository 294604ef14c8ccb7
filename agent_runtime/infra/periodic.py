"""A background loop that sweeps every ``interval`` seconds (approval timeouts, question timeouts).

Kept apart from what is swept so both sweepers share it without importing each other.
"""

from __future__ import annotations

import asyncio
import logging

from agent_runtime.infra.tasks import cancel_and_wait

log = logging.getLogger(__name__)


class PeriodicSweep:
    """A background loop that calls :meth:`sweep` every ``interval`` seconds; a failed sweep is logged and
    the loop goes on. Subclasses: ``server.sweeper.TimeoutSweeper``, ``questions.flow.QuestionSweeper`` for questions."""

    name = "gatehouse-sweeper"

    def __init__(self, interval: float) -> None:
        self._interval = interval
        self._task: asyncio.Task[None] | None = None

    async def sweep(self) -> int:
        raise NotImplementedError

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name=self.name)

    async def stop(self) -> None:
        await cancel_and_wait([self._task])

    async def _loop(self) -> None:
        while True:
            try:
                await self.sweep()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s failed", self.name)
            await asyncio.sleep(self._interval)


__all__ = ["PeriodicSweep"]
