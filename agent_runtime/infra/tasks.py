"""Stopping background tasks: cancel them and wait until each has really ended.

One cancel is not always enough on Python 3.11: ``asyncio.wait_for`` drops a cancellation that arrives just as its
inner awaitable finishes (cpython gh-86296, fixed in 3.12), and a ``while True`` loop around it then runs on. A
``gather`` after a single ``cancel`` waits for it forever, which hung a shutdown under load. So the tasks still running
are cancelled again until none is left.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any


async def cancel_and_wait(tasks: Iterable[asyncio.Task[Any] | None], *, every: float = 0.5) -> None:
    """Cancel ``tasks`` (``None`` entries are skipped) and return once each is done; their exceptions are retrieved."""
    ours = [t for t in tasks if t is not None]
    pending = {t for t in ours if not t.done()}
    while pending:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=every)
    await asyncio.gather(*ours, return_exceptions=True)


__all__ = ["cancel_and_wait"]
