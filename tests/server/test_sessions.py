"""DurableSessionService: ADK sessions cached in memory, one transaction per run, reloaded after a restart."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions.base_session_service import GetSessionConfig
from google.adk.tools.tool_confirmation import ToolConfirmation
from google.genai import types

from agent_runtime.infra.database import Database, default_database_url
from agent_runtime.server.sessions import DurableSessionService

KEY = {"app_name": "app", "user_id": "u", "session_id": "s1"}


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[Database]:
    db = Database(default_database_url(tmp_path))
    yield db
    await db.dispose()


async def _service(engine: Database, validate: bool = False) -> DurableSessionService:
    svc = DurableSessionService(engine, validate_cache=validate)
    await svc.create_tables()
    return svc


def _call_event() -> Event:
    call = types.FunctionCall(id="call-1", name="delete_file", args={"path": "a"})
    return Event(
        author="agent", invocation_id="i1", content=types.Content(role="model", parts=[types.Part(function_call=call)]),
        actions=EventActions(
            state_delta={"gatehouse_grant:files/delete_file": True, "temp:scratch": 1},
            requested_tool_confirmations={"call-1": ToolConfirmation(hint="why", payload={"request_id": "apr-1"})},
        ),
    )


async def test_a_flushed_run_survives_a_restart(engine: Database) -> None:
    svc = await _service(engine)
    session = await svc.create_session(**KEY)
    with pytest.raises(AlreadyExistsError):
        await svc.create_session(**KEY)
    await svc.append_event(session, Event(author="user", invocation_id="i1",
                                          content=types.Content(role="user", parts=[types.Part(text="delete a")])))
    await svc.append_event(session, _call_event())
    assert session.state["temp:scratch"] == 1  # visible during the run
    await svc.flush_session("app", "u", "s1")

    restarted = await _service(engine)
    loaded = await restarted.get_session(**KEY)
    assert loaded is not None
    assert [e.author for e in loaded.events] == ["user", "agent"]
    assert loaded.events[1].get_function_calls()[0].args == {"path": "a"}
    assert loaded.events[1].actions.requested_tool_confirmations["call-1"].payload == {"request_id": "apr-1"}
    assert loaded.state == {"gatehouse_grant:files/delete_file": True}
    recent = await restarted.get_session(**KEY, config=GetSessionConfig(num_recent_events=1))
    assert recent is not None and [e.author for e in recent.events] == ["agent"]
    assert [s.id for s in (await restarted.list_sessions(app_name="app")).sessions] == ["s1"]


async def test_copies_share_one_cached_session(engine: Database) -> None:
    svc = await _service(engine)
    await svc.create_session(**KEY)
    first = await svc.get_session(**KEY)
    assert first is not None
    await svc.append_event(first, _call_event())
    second = await svc.get_session(**KEY)
    assert second is not None and len(second.events) == 1 and second is not first
    assert await svc.get_session(app_name="app", user_id="u", session_id="nope") is None


async def test_replicas_see_each_others_flushed_runs(engine: Database) -> None:
    a, b = await _service(engine, validate=True), await _service(engine, validate=True)
    await a.create_session(**KEY)
    await a.flush_session("app", "u", "s1")
    seen_by_b = await b.get_session(**KEY)
    assert seen_by_b is not None and seen_by_b.events == []
    session = await a.get_session(**KEY)
    assert session is not None
    await a.append_event(session, _call_event())
    await a.flush_session("app", "u", "s1")
    again = await b.get_session(**KEY)
    assert again is not None and len(again.events) == 1


async def test_delete_session(engine: Database) -> None:
    svc = await _service(engine)
    await svc.create_session(**KEY)
    await svc.delete_session(**KEY)
    assert await (await _service(engine)).get_session(**KEY) is None


async def test_the_cache_drops_written_sessions_only_and_reloads_them(engine: Database) -> None:
    svc = DurableSessionService(engine, max_cached=1)
    await svc.create_tables()
    written = await svc.create_session(app_name="app", user_id="u", session_id="written")
    await svc.append_event(written, _call_event())
    await svc.flush_session("app", "u", "written")
    fresh = await svc.create_session(app_name="app", user_id="u", session_id="fresh")  # not stored until its first flush
    await svc.create_session(app_name="app", user_id="u", session_id="third")
    assert ("app", "u", "written") not in svc._cache and ("app", "u", "fresh") in svc._cache
    await svc.append_event(fresh, Event(author="user", invocation_id="i2"))
    await svc.flush_session("app", "u", "fresh")
    reloaded = await svc.get_session(app_name="app", user_id="u", session_id="written")
    assert reloaded is not None and reloaded.events[0].get_function_calls()[0].args == {"path": "a"}
    assert reloaded.state == {"gatehouse_grant:files/delete_file": True}
    restarted = await _service(engine)
    again = await restarted.get_session(app_name="app", user_id="u", session_id="fresh")
    assert again is not None and [e.invocation_id for e in again.events] == ["i2"]


async def test_a_flush_commits_the_writes_given_with_it_or_neither(engine: Database) -> None:
    """The turn's approval requests are written with its events (server/turns.py): one transaction, both or none."""
    from sqlalchemy import Column, MetaData, String, Table, select

    table = Table("side", MetaData(), Column("id", String(8), primary_key=True))
    await engine.create_tables(table.metadata)
    svc = await _service(engine)
    session = await svc.create_session(**KEY)
    await svc.append_event(session, _call_event())

    def failing(conn: object) -> None:
        raise RuntimeError("the approval write failed")

    with pytest.raises(RuntimeError):
        await svc.flush_session("app", "u", "s1", also=failing)
    restarted = await _service(engine)
    assert await restarted.get_session(**KEY) is None  # the events went with the failed write

    await svc.flush_session("app", "u", "s1", also=lambda conn: conn.execute(table.insert().values(id="apr-1")))
    restarted = await _service(engine)
    loaded = await restarted.get_session(**KEY)
    assert loaded is not None and [e.author for e in loaded.events] == ["agent"]
    assert await engine.run(lambda conn: conn.execute(select(table.c.id)).scalars().all(), write=False) == ["apr-1"]

    # nothing new in the session: the writes still go, on their own
    await svc.flush_session("app", "u", "s1", also=lambda conn: conn.execute(table.insert().values(id="apr-2")))
    assert await engine.run(lambda conn: conn.execute(select(table.c.id)).scalars().all(), write=False) == ["apr-1", "apr-2"]
