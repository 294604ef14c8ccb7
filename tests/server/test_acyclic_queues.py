"""What a pause and a decision leave for the garbage collector (issue 40, bar 2): on the runtime app in-process with
the demo MCP server, pauses and decisions made with the collector off; once a2a-sdk has released their tasks, none of
their queues or event sources (agent_runtime/server/acyclic_queues.py) and no bind parameter of a statement built per
call (the votes' and deciders' reads) may still exist. Before, each request left five culsans queues and one
source/sink pair in reference cycles (~45 objects) and each pause two bind parameters, waiting for a collection.
"""

from __future__ import annotations

import asyncio
import gc
import time
from pathlib import Path
from typing import Any

import culsans
import pytest
from a2a.server.agent_execution.active_task import ActiveTask
from a2a.server.events.event_queue_v2 import EventQueueSink, EventQueueSource
from sqlalchemy.sql.elements import BindParameter

from agent_runtime.contract import wire
from tests.support.inprocess import InProcessApp, served
from tests.support.runtime import interrupt, state

pytestmark = pytest.mark.e2e

QUEUE_KINDS = (culsans.Queue, EventQueueSource, EventQueueSink)
# A statement built per call (approvals/votes.py and deciders.py once did, for every pause) leaves its cloned column's
# bind parameters in a cycle: each read of a pause's votes added two of these.
STATEMENT_KINDS = (BindParameter,)


def _alive(kinds: tuple[type, ...]) -> int:
    """Objects of these types the collector tracks: alive or unreachable but not yet collected alike."""
    return sum(1 for o in gc.get_objects() if isinstance(o, kinds))


async def _released(deadline: float = 10.0) -> None:
    """Until a2a-sdk has let go of every ActiveTask (an idle paused one after its ``interrupted_task_timeout``, 0.1 s)."""
    end = time.monotonic() + deadline
    while _alive((ActiveTask,)) and time.monotonic() < end:
        await asyncio.sleep(0.1)
    assert _alive((ActiveTask,)) == 0, "a2a-sdk still holds an ActiveTask"


async def _pause(app: InProcessApp, name: str) -> dict[str, Any]:
    (app.tools.sandbox / name).write_text(name)
    task: dict[str, Any] = (await app.send(f"delete {name}"))["task"]
    assert interrupt(task)["action_requests"], task
    return task


async def test_paused_and_decided_tasks_leave_no_queue_or_statement_for_the_collector(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOOGLE_API_USE_CLIENT_CERTIFICATE", "false")
    # as the example and the bench run it: approvers named, so every pause also reads its requests' votes
    async with served(tmp_path, app_type=InProcessApp, approvers={"users": ["anonymous"]}) as app:
        first = await _pause(app, "warm.txt")  # warm-up: what the first requests build once
        assert state((await app.send(data=wire.approve_all(), task=first))["task"]) == "TASK_STATE_COMPLETED"
        await _released()
        gc.collect()
        before = _alive(QUEUE_KINDS), _alive(STATEMENT_KINDS)
        gc.disable()
        try:
            paused = [await _pause(app, f"p{i}.txt") for i in range(10)]
            await _released()  # paused tasks are released by a2a-sdk, and later decided from the store
            for task in paused[:5]:
                assert state((await app.send(data=wire.approve_all(), task=task))["task"]) == "TASK_STATE_COMPLETED"
            await _released()
            left = _alive(QUEUE_KINDS) - before[0], _alive(STATEMENT_KINDS) - before[1]
        finally:
            gc.enable()
        assert [p.name for p in sorted(app.tools.sandbox.glob("p*.txt"))] == [f"p{i}.txt" for i in range(5, 10)]
        assert left[0] <= 0, f"{left[0]} of a2a-sdk's queue objects from 15 requests are waiting for the collector"
        assert left[1] <= 0, f"{left[1]} SQLAlchemy bind parameters from 15 requests are waiting for the collector"


async def test_a_default_sink_closed_after_its_source_is_gone_has_nothing_to_leave() -> None:
    """The default sink holds its source weakly: once the source is closed and dropped it is freed by reference
    counting alone; the sink then closes without error (there is no set of sinks left to leave), and a tap says why it
    cannot instead of failing on a dead reference."""
    import weakref

    from agent_runtime.server.acyclic_queues import AcyclicEventQueueSource

    source = AcyclicEventQueueSource()
    sink = source._default_sink
    assert sink is not None
    await source.close(immediate=True)
    freed = weakref.ref(source)
    del source
    await asyncio.sleep(0)
    assert freed() is None, "the source outlived its last strong reference"
    await sink.close(immediate=True)
    with pytest.raises(RuntimeError, match="gone"):
        await sink.tap()
