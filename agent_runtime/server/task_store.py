"""``CachedTaskStore``: a2a-sdk's ``DatabaseTaskStore`` with a write-through in-process cache of tasks.

Every A2A request reads its task several times (request handler, task manager, executor); with one
process owning the sqlite file those reads are served from memory and only writes touch the database.
With Postgres (possibly several replicas) the cache is off and every read goes to the database.
"""

from __future__ import annotations

from collections import OrderedDict

from a2a.server.context import ServerCallContext
from a2a.server.tasks import DatabaseTaskStore
from a2a.types import Task
from sqlalchemy.ext.asyncio import AsyncEngine


class CachedTaskStore(DatabaseTaskStore):
    def __init__(self, engine: AsyncEngine, *, cache: bool = True, max_cached: int = 4096) -> None:
        super().__init__(engine)
        self._enabled = cache
        self._max = max_cached
        self._cache: OrderedDict[tuple[str, str], Task] = OrderedDict()

    def _key(self, task_id: str, context: ServerCallContext) -> tuple[str, str]:
        return (self.owner_resolver(context), task_id)

    def _remember(self, key: tuple[str, str], task: Task) -> None:
        copy = Task()
        copy.CopyFrom(task)
        self._cache[key] = copy
        self._cache.move_to_end(key)
        while len(self._cache) > self._max:
            self._cache.popitem(last=False)

    async def save(self, task: Task, context: ServerCallContext) -> None:
        await super().save(task, context)
        if self._enabled:
            self._remember(self._key(task.id, context), task)

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        key = self._key(task_id, context)
        if self._enabled and key in self._cache:
            copy = Task()
            copy.CopyFrom(self._cache[key])
            return copy
        task = await super().get(task_id, context)
        if task is not None and self._enabled:
            self._remember(key, task)
        return task

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        self._cache.pop(self._key(task_id, context), None)
        await super().delete(task_id, context)


__all__ = ["CachedTaskStore"]
