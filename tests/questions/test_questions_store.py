"""The hitl_request table and tool, without a server: compare-and-swap answers, expiry, the declared schema."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from agent_runtime.infra.database import Database, default_database_url
from agent_runtime.questions import question_wire
from agent_runtime.questions.store import QuestionAlreadyAnswered, QuestionRecord, QuestionStore
from agent_runtime.questions.tool import build_tools, declaration


@pytest.fixture
async def store(tmp_path: Path) -> QuestionStore:
    now = [1000.0]
    s = QuestionStore(Database(default_database_url(tmp_path)), clock=lambda: now[0])
    s.now = now  # type: ignore[attr-defined]
    await s.create_tables()
    return s


def _record(rid: str = "hitl-1", **args: object) -> QuestionRecord:
    parsed = question_wire.QuestionArgs.model_validate({"question": "Which?", "options": ["a", "b"], **args})
    return QuestionRecord(id=rid, task_id="t1", context_id="c1", confirmation_id=f"conf-{rid}", call_id=f"call-{rid}",
                      tool="hitl_request", args=parsed, created_at=1000.0, expires_at=1010.0, updated_at=1000.0)


async def test_answers_are_compare_and_swap_and_replays_change_nothing(store: QuestionStore) -> None:
    events: list[tuple[str, str]] = []
    store.subscribe(lambda kind, r: events.append((kind, r.stage)))
    record = _record(requireConfirmation=True, metadata={"ticket": "T-1"})
    await store.add(record)
    (stored,) = await store.for_task("t1")
    assert stored == record and stored.args.metadata == {"ticket": "T-1"}
    state, result = question_wire.apply_message(stored.state(), [{"decision_type": "answer", "answers": {"hitl-1": "b"}}], "")
    confirming = await store.advance(stored, state, result, "user")
    with pytest.raises(QuestionAlreadyAnswered):  # a second writer that read the same version loses
        await store.advance(stored, state, result, "user")
    state, result = question_wire.apply_message(confirming.state(), [{"decision_type": "confirm"}], "")
    done = await store.advance(confirming, state, result, "user")
    assert not done.open and done.result is not None and done.result.selected_option == "b"
    with pytest.raises(QuestionAlreadyAnswered, match="ended confirmed \\('b'\\) by user"):
        await store.advance(done, replace(done.state(), stage="done"), result, "timeout")
    assert [kind for kind, _ in events] == ["requested", "answered", "resolved"]
    assert await store.open_in_context("c1") == [] and await store.open_count() == 0


async def test_expired_lists_only_open_questions_past_their_deadline(store: QuestionStore) -> None:
    await store.add(_record("hitl-1"))
    await store.add(replace(_record("hitl-2"), expires_at=2000.0))
    assert await store.expired() == []
    store.now[0] = 1010.0  # type: ignore[attr-defined]
    assert [r.id for r in await store.expired()] == ["hitl-1"]


def test_tools_and_declaration() -> None:
    assert build_tools(False) == []
    assert [t.name for t in build_tools(True)] == ["hitl_request", "human_intervention_request"]
    schema = declaration("hitl_request").parameters
    assert schema is not None and schema.required == ["question", "options"]
    assert set(schema.properties or {}) == set(question_wire.QuestionArgs.model_fields)
