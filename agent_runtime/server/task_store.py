"""``CachedTaskStore``: a2a-sdk's ``DatabaseTaskStore`` (same ``tasks`` table), made cheap on sqlite.

With sqlite (one process owns the file) tasks are cached in memory, write-through, and reads are served
from the cache (a lookup that found nothing is remembered until the task is saved). The cache is small
(``max_cached``, least recently used first): a request reads its task several times, a task paused for long is
read back from the table when its decision comes. Saves and cache misses
run as one transaction each on :class:`~agent_runtime.database.Database` (one upsert statement) instead of
the ORM's merge. Listing, and everything on Postgres (where replicas may share the
table), use the parent class unchanged, without a cache.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.tasks import DatabaseTaskStore
from a2a.types import Task
from sqlalchemy import Connection, Table, delete, select
from sqlalchemy import inspect as sa_inspect
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from agent_runtime.database import Database


class CachedTaskStore(DatabaseTaskStore):
    def __init__(self, db: Database, *, max_cached: int = 64) -> None:
        super().__init__(db.async_engine)
        self._db = db
        self._lean = db.sqlite
        self._max = max_cached
        self._cache: OrderedDict[tuple[str, str], Task] = OrderedDict()
        self._absent: OrderedDict[tuple[str, str], None] = OrderedDict()  # looked up, not stored (yet)
        self._table: Table = self.task_model.__table__  # type: ignore[attr-defined]
        self._columns = [(a.key, a.columns[0].name) for a in sa_inspect(self.task_model).column_attrs]

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
        if not self._lean:
            return await super().save(task, context)
        owner = self.owner_resolver(context)
        model = self._to_orm(task, owner)
        values: dict[str, Any] = {column: getattr(model, key) for key, column in self._columns}
        table = self._table

        # One statement: insert, or update the row that is there (sqlite's upsert), instead of UPDATE then INSERT.
        stmt = sqlite_insert(table).values(**values)
        stmt = stmt.on_conflict_do_update(index_elements=[table.c.id], set_={c: stmt.excluded[c] for c in values if c != "id"})

        def transaction(conn: Connection) -> None:
            conn.execute(stmt)

        await self._db.run(transaction)
        self._absent.pop((owner, task.id), None)
        self._remember((owner, task.id), task)

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        if not self._lean:
            return await super().get(task_id, context)
        key = self._key(task_id, context)
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            copy = Task()
            copy.CopyFrom(cached)
            return copy
        if key in self._absent:
            return None
        table = self._table
        stmt = select(table).where(table.c.id == task_id, table.c.owner == key[0])
        row = await self._db.run(lambda conn: conn.execute(stmt).first(), write=False)
        if row is None:
            self._absent[key] = None
            while len(self._absent) > self._max:
                self._absent.popitem(last=False)
            return None
        task = self._from_orm(self.task_model(**{k: row._mapping[column] for k, column in self._columns}))
        self._remember(key, task)
        return task

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        if not self._lean:
            return await super().delete(task_id, context)
        owner, table = self.owner_resolver(context), self._table
        self._cache.pop((owner, task_id), None)
        stmt = delete(table).where(table.c.id == task_id, table.c.owner == owner)
        await self._db.run(lambda conn: conn.execute(stmt))


__all__ = ["CachedTaskStore"]
