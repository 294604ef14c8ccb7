"""agent_runtime.server.task_rows: a task's row values are exactly those of a2a-sdk's own ``_to_orm`` (any task:
history, artifacts, status with or without a message or timestamp, metadata), remembered dicts included."""

from __future__ import annotations

from typing import Any

from a2a.server.tasks import DatabaseTaskStore
from a2a.types import Artifact, Message, Part, Role, Task, TaskState, TaskStatus
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy.ext.asyncio import create_async_engine

from agent_runtime.server.task_rows import ATTRIBUTES, Dicts, row_values

texts = st.text(max_size=12)
json_values = st.recursive(st.none() | st.booleans() | st.integers(-5, 5) | texts,
                           lambda inner: st.lists(inner, max_size=2) | st.dictionaries(texts, inner, max_size=2), max_leaves=5)


@st.composite
def parts(draw: Any) -> Part:
    part = Part()
    if draw(st.booleans()):
        part.text = draw(texts)
    else:
        part.data.struct_value.update({"k": draw(json_values)})
    return part


@st.composite
def messages(draw: Any) -> Message:
    return Message(role=draw(st.sampled_from([Role.ROLE_USER, Role.ROLE_AGENT])), message_id=draw(texts),
                   parts=draw(st.lists(parts(), max_size=3)))


@st.composite
def tasks(draw: Any) -> Task:
    task = Task(id=draw(texts), context_id=draw(texts),
                status=TaskStatus(state=draw(st.sampled_from([TaskState.TASK_STATE_INPUT_REQUIRED,
                                                              TaskState.TASK_STATE_COMPLETED]))))
    if draw(st.booleans()):
        task.status.message.CopyFrom(draw(messages()))
    if draw(st.booleans()):
        task.status.timestamp.FromSeconds(draw(st.integers(0, 2**31)))
    task.history.extend(draw(st.lists(messages(), max_size=4)))
    for _ in range(draw(st.integers(0, 2))):
        task.artifacts.append(Artifact(artifact_id=draw(texts), parts=draw(st.lists(parts(), max_size=2))))
    if draw(st.booleans()):
        task.metadata.update({"m": draw(json_values)})
    return task


STORE = DatabaseTaskStore(create_async_engine("sqlite+aiosqlite://"))


def _theirs(task: Task, owner: str) -> dict[str, Any]:
    model = STORE._to_orm(task, owner)
    return {key: getattr(model, key) for key in ATTRIBUTES}


@settings(max_examples=150, deadline=None)
@given(task=tasks(), owner=texts)
def test_row_values_are_a2a_sdks_own(task: Task, owner: str) -> None:
    dicts = Dicts(size=3)  # small: evictions happen
    assert row_values(task, owner, dicts) == _theirs(task, owner)
    assert row_values(task, owner, dicts) == _theirs(task, owner)  # again, from remembered dicts


def test_a_history_message_is_converted_once_and_a_changed_one_afresh() -> None:
    dicts = Dicts()
    message = Message(role=Role.ROLE_USER, message_id="m1", parts=[Part(text="hello")])
    first = dicts(message)
    assert dicts(message) is first
    message.parts[0].text = "changed"
    assert dicts(message) == {"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": "changed"}]}
