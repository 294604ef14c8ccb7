"""CachedTaskStore on sqlite: a pause and an end are written at once; steps in between wait for them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from a2a.helpers import new_text_part
from a2a.server.context import ServerCallContext
from a2a.types import ListTasksRequest, Message, Role, Task, TaskState, TaskStatus

from agent_runtime.infra.database import Database, default_database_url
from agent_runtime.server.task_store import CachedTaskStore

CONTEXT = ServerCallContext()


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    database = Database(default_database_url(tmp_path))
    yield database
    await database.dispose()


async def _store(db: Database) -> CachedTaskStore:
    store = CachedTaskStore(db)
    await store.initialize()
    return store


def _task(state: TaskState, text: str = "", history: int = 0) -> Task:
    task = Task(id="t1", context_id="c1", status=TaskStatus(state=state))
    if text:
        task.status.message.CopyFrom(Message(role=Role.ROLE_AGENT, message_id=f"m-{text}", parts=[new_text_part(text)]))
    for i in range(history):
        task.history.append(Message(role=Role.ROLE_USER, message_id=f"h{i}", parts=[new_text_part(f"h{i}")]))
    return task


async def _stored(db: Database) -> Task | None:
    """What a restarted runtime reads: a fresh store on the same file."""
    return await (await _store(db)).get("t1", CONTEXT)


async def test_a_pause_and_an_end_are_written_at_once(db: Database) -> None:
    store = await _store(db)
    await store.save(_task(TaskState.TASK_STATE_SUBMITTED), CONTEXT)
    assert await _stored(db) is None  # a step in between: cached only
    assert (await store.get("t1", CONTEXT)).status.state == TaskState.TASK_STATE_SUBMITTED
    await store.save(_task(TaskState.TASK_STATE_INPUT_REQUIRED, "approve?"), CONTEXT)
    assert (await _stored(db)).status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    await store.save(_task(TaskState.TASK_STATE_COMPLETED, "done", history=2), CONTEXT)
    stored = await _stored(db)
    assert stored.status.state == TaskState.TASK_STATE_COMPLETED and len(stored.history) == 2


async def test_a_reply_arriving_on_a_pause_is_written_with_the_next_status(db: Database) -> None:
    store = await _store(db)
    await store.save(_task(TaskState.TASK_STATE_INPUT_REQUIRED, "approve?"), CONTEXT)
    # a2a-sdk moves the question into the history and appends the reply: same state, no status message
    await store.save(_task(TaskState.TASK_STATE_INPUT_REQUIRED, history=2), CONTEXT)
    stored = await _stored(db)
    assert stored.status.message.parts[0].text == "approve?" and len(stored.history) == 0
    # a new status message on the same state (e.g. "still waiting for ...") is news: written
    await store.save(_task(TaskState.TASK_STATE_INPUT_REQUIRED, "still waiting", history=2), CONTEXT)
    stored = await _stored(db)
    assert stored.status.message.parts[0].text == "still waiting" and len(stored.history) == 2


async def test_listing_and_shutdown_write_what_waits_in_the_cache(db: Database) -> None:
    store = await _store(db)
    await store.save(_task(TaskState.TASK_STATE_WORKING), CONTEXT)
    listed = await store.list(ListTasksRequest(), CONTEXT)
    assert [t.status.state for t in listed.tasks] == [TaskState.TASK_STATE_WORKING]
    await store.save(_task(TaskState.TASK_STATE_WORKING, history=1), CONTEXT)
    await store.write_unwritten()
    assert len((await _stored(db)).history) == 1


async def test_a_task_not_yet_written_is_never_evicted(db: Database) -> None:
    store = CachedTaskStore(db, max_cached=1)
    await store.initialize()
    await store.save(_task(TaskState.TASK_STATE_WORKING), CONTEXT)
    other = Task(id="t2", context_id="c2", status=TaskStatus(state=TaskState.TASK_STATE_COMPLETED))
    await store.save(other, CONTEXT)
    assert (await store.get("t1", CONTEXT)).status.state == TaskState.TASK_STATE_WORKING


async def test_a_task_that_left_the_cache_reads_back_the_same(db: Database) -> None:
    store = CachedTaskStore(db, max_cached=1)
    await store.initialize()
    await store.save(_task(TaskState.TASK_STATE_INPUT_REQUIRED, "approve?", history=2), CONTEXT)
    await store.save(Task(id="t2", context_id="c2", status=TaskStatus(state=TaskState.TASK_STATE_COMPLETED)), CONTEXT)
    back = await store.get("t1", CONTEXT)  # out of the cache: from its packed copy
    assert back == _task(TaskState.TASK_STATE_INPUT_REQUIRED, "approve?", history=2)
    # and a save after that is written as usual
    await store.save(_task(TaskState.TASK_STATE_COMPLETED, "done", history=3), CONTEXT)
    assert (await _stored(db)).status.state == TaskState.TASK_STATE_COMPLETED


async def test_a_full_cache_of_tasks_mid_run_still_takes_one_more(db: Database) -> None:
    store = CachedTaskStore(db, max_cached=2)
    await store.initialize()
    for i in range(4):  # more tasks mid-run than the cache holds: none may be dropped
        await store.save(Task(id=f"t{i}", context_id="c", status=TaskStatus(state=TaskState.TASK_STATE_WORKING)), CONTEXT)
    for i in range(4):
        assert (await store.get(f"t{i}", CONTEXT)).status.state == TaskState.TASK_STATE_WORKING
    listed = await store.list(ListTasksRequest(), CONTEXT)  # a listing writes them first
    assert sorted(t.id for t in listed.tasks) == ["t0", "t1", "t2", "t3"]


def test_fresh_ids_are_new_uuids_known_empty_until_written_under() -> None:
    import uuid

    from a2a.server.id_generator import IDGeneratorContext

    from agent_runtime.infra.fresh_ids import FreshIds

    fresh = FreshIds(limit=2)
    a, b = fresh.generate(IDGeneratorContext()), fresh.generate(IDGeneratorContext(context_id="c"))
    assert a != b and uuid.UUID(a).version == 4 and a in fresh and b in fresh
    assert "chosen-by-a-client" not in fresh  # ids it did not generate are never "known empty"
    fresh.written(a)
    assert a not in fresh and b in fresh
    c, d = fresh.generate(IDGeneratorContext()), fresh.generate(IDGeneratorContext())
    assert b not in fresh and c in fresh and d in fresh  # past the limit the oldest are forgotten: lookups query


async def test_a_fresh_task_id_is_not_looked_up_until_saved_and_then_is(db: Database) -> None:
    from a2a.server.id_generator import IDGeneratorContext

    from agent_runtime.infra.fresh_ids import FreshIds

    fresh = FreshIds()
    store = CachedTaskStore(db, fresh=fresh, max_cached=1, packed_bytes=0)  # what leaves the cache is only in the table
    await store.initialize()
    task_id = fresh.generate(IDGeneratorContext())
    assert await store.get(task_id, CONTEXT) is None
    first = _task(TaskState.TASK_STATE_INPUT_REQUIRED, "approve?")
    first.id = task_id
    await store.save(first, CONTEXT)
    assert task_id not in fresh
    later = _task(TaskState.TASK_STATE_INPUT_REQUIRED)
    later.id = "t2"
    await store.save(later, CONTEXT)  # pushes the first out of the one-task cache
    found = await store.get(task_id, CONTEXT)  # read back from the table, not answered as "new"
    assert found is not None and found.id == task_id and found.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
