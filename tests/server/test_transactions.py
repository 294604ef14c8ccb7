"""How many database transactions a pause and a resume cost (issue 40, bar 3: the lever named for our share above the
composed floor). Counted with SQLAlchemy's ``begin`` event on every engine, in a runtime served in-process with real
demo tools and sqlite state, after a warm-up pair (the first request creates what later ones reuse).

The counts are pinned: a change that adds a transaction to either path fails here and says so; one that removes
one updates the figure (and bench/README.md "Round three").
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine

from agent_runtime.contract import wire
from agent_runtime.infra.periodic import PeriodicSweep
from tests.support.inprocess import served
from tests.support.runtime import interrupt

PAUSE_TRANSACTIONS = 2  # the session's events with the approval request rows; the task at its pause
RESUME_TRANSACTIONS = 6  # read the task's requests; the vote; claim and finish the execution; the session; the task


@contextmanager
def _counting() -> Iterator[list[int]]:
    """Transactions begun on any engine while inside (read and write alike), but the background sweeps' (timeouts,
    every 0.25 s here): they are no request's."""
    count = [0]

    def begun(_conn: Any) -> None:
        task = asyncio.current_task()
        if task is None or task.get_coro().__qualname__ != PeriodicSweep._loop.__qualname__:  # type: ignore[union-attr]
            count[0] += 1

    event.listen(Engine, "begin", begun)
    try:
        yield count
    finally:
        event.remove(Engine, "begin", begun)


async def test_a_pause_and_a_resume_each_cost_the_pinned_number_of_transactions(tmp_path: Path) -> None:
    async with served(tmp_path) as app:
        for i in range(3):  # warm-up, and each path counted three times: the same figure every time
            (app.tools.sandbox / f"t{i}.txt").write_text("x")
            with _counting() as paused:
                task = (await app.send(f"delete t{i}.txt"))["task"]
            assert interrupt(task)["action_requests"], task
            with _counting() as resumed:
                done = (await app.send(data=wire.approve_all(), task=task))["task"]
            assert done["status"]["state"] == "TASK_STATE_COMPLETED", done
            assert not (app.tools.sandbox / f"t{i}.txt").exists()  # the approved call ran
            if i == 0:
                continue
            assert (paused[0], resumed[0]) == (PAUSE_TRANSACTIONS, RESUME_TRANSACTIONS), (
                f"a pause now costs {paused[0]} transactions and a resume {resumed[0]} "
                f"(pinned: {PAUSE_TRANSACTIONS} and {RESUME_TRANSACTIONS})")
