"""A task's row in a2a-sdk's ``tasks`` table, made without an ORM instance: the values ``DatabaseTaskStore._to_orm``
gives its ``TaskModel`` (a2a-sdk 1.x, protocol version ``1.0``), by attribute name.

Every save of a task writes its whole history again, and protobuf's pure-Python ``MessageToDict`` of each message
was most of a save's cost (a resume re-converts the messages of its pause). The messages of a history do not change
once there, so each one's dict is remembered by the message's serialised bytes (:class:`Dicts`, least recently
used first): a save converts only what is new. ``tests/server/test_task_rows.py`` checks the values against
a2a-sdk's own ``_to_orm``.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from a2a.types import Task
from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message

# The attributes of a2a-sdk's TaskModel this translation fills; a store whose model has others uses _to_orm instead.
ATTRIBUTES = frozenset({"id", "context_id", "kind", "owner", "last_updated", "status", "artifacts", "history",
                        "task_metadata", "protocol_version"})


class Dicts:
    """``MessageToDict`` of messages, remembered by their serialised bytes (at most ``size``, least recently used
    first). The dicts are shared between rows: they are only read (serialised to JSON), never changed."""

    def __init__(self, size: int = 4096) -> None:
        self._size = size
        self._known: OrderedDict[bytes, dict[str, Any]] = OrderedDict()

    def __call__(self, message: Message) -> dict[str, Any]:
        key = message.SerializeToString(deterministic=True)
        found = self._known.get(key)
        if found is None:
            found = self._known[key] = MessageToDict(message)
            if len(self._known) > self._size:
                self._known.popitem(last=False)
        else:
            self._known.move_to_end(key)
        return found


def row_values(task: Task, owner: str, dicts: Dicts) -> dict[str, Any]:
    """The values a2a-sdk's ``_to_orm(task, owner)`` sets, by TaskModel attribute."""
    return {
        "id": task.id,
        "context_id": task.context_id,
        "kind": "task",
        "owner": owner,
        "last_updated": task.status.timestamp.ToDatetime() if task.status.HasField("timestamp") else None,
        "status": MessageToDict(task.status),  # changes with every save: not worth remembering
        "artifacts": [dicts(artifact) for artifact in task.artifacts],
        "history": [dicts(message) for message in task.history],
        "task_metadata": MessageToDict(task.metadata) if task.metadata.fields else None,
        "protocol_version": "1.0",
    }


__all__ = ["ATTRIBUTES", "Dicts", "row_values"]
