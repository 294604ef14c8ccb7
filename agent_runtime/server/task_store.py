"""``CachedTaskStore``: a2a-sdk's ``DatabaseTaskStore`` (same ``tasks`` table), made cheap on sqlite.

With sqlite (one process owns the file) tasks are cached in memory, write-through, and reads are served
from the cache (a lookup that found nothing is remembered until the task is saved). The cache is small
(``max_cached``, least recently used first): a request reads its task several times, a task paused for long is
read back from the table when its decision comes. Only states a client may come back to are written: a new
pause (input-required, auth-required) or an end (completed, failed, ...). a2a-sdk also saves every step in
between (submitted, working, the decision appended to the history of a paused task); those stay in the cache
(never evicted before they are written) and go to the table with the next pause or end, or before a listing.
A crash in between loses no decision: approvals are durable in their own table and the task is still stored
at its last pause, from which the next message recovers (see ``executor._recover``).

Every task belongs to the principal who created it (a2a-sdk's owner column, filled from the call context's
user: :mod:`agent_runtime.server.owners`); reads and listings are filtered by it, so another principal gets
"task not found". :meth:`CachedTaskStore.owner_of` tells the runtime's own resumers whom to act for, and
:meth:`CachedTaskStore.adopt_unowned` gives tasks written before tasks had owners to a configured principal.

Saves run one prepared upsert (built once, with bind parameters; :mod:`agent_runtime.infra.prepared`; the row's values
from :mod:`agent_runtime.server.task_rows`, without an ORM instance) on
:class:`~agent_runtime.infra.database.Database`, and cache misses one select. Listing, and everything on Postgres
(where replicas may share the table and must see every step), use the parent class unchanged, without a
cache.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, cast

from a2a.server.context import ServerCallContext
from a2a.server.tasks import DatabaseTaskStore
from a2a.types import ListTasksRequest, ListTasksResponse, Task, TaskState
from sqlalchemy import Connection, Table, bindparam, delete, or_, select, update
from sqlalchemy import inspect as sa_inspect
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from agent_runtime.infra.database import Database
from agent_runtime.infra.fresh_ids import FreshIds
from agent_runtime.infra.prepared import Prepared
from agent_runtime.server.owners import owner_name
from agent_runtime.server.task_rows import ATTRIBUTES, Dicts, row_values

# States a client may come back to: a pause or an end. Written at once; anything else is written with them.
DURABLE_STATES = frozenset({
    TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED, TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_CANCELED, TaskState.TASK_STATE_REJECTED,
})


class CachedTaskStore(DatabaseTaskStore):
    def __init__(self, db: Database, *, max_cached: int = 64, packed_bytes: int = 8 << 20, fresh: FreshIds | None = None) -> None:
        super().__init__(db.async_engine, owner_resolver=owner_name)
        self._db = db
        self._lean = db.sqlite
        self._fresh = fresh if db.sqlite else None  # task ids with nothing stored yet (agent_runtime/infra/fresh_ids.py)
        self._max = max_cached
        self._cache: OrderedDict[tuple[str, str], Task] = OrderedDict()
        self._absent: OrderedDict[tuple[str, str], None] = OrderedDict()  # looked up, not stored (yet)
        self._unwritten: dict[tuple[str, str], Task] = {}  # saved by a2a-sdk between a pause and an end
        self._written_status: dict[tuple[str, str], bytes] = {}  # the status last written, per cached task
        # Written tasks that left the cache, kept serialised (~1.5 KB each, up to ``packed_bytes``): a decision on
        # a conversation paused for long reads its task back from here instead of the table (protobuf's JSON
        # parsing of a row cost ~1.5 ms; parsing these bytes, microseconds).
        self._packed: OrderedDict[tuple[str, str], bytes] = OrderedDict()
        self._packed_size = 0
        self._packed_budget = packed_bytes
        self._table = cast(Table, self.task_model.__table__)  # type: ignore[attr-defined]
        self._columns = [(a.key, a.columns[0].name) for a in sa_inspect(self.task_model).column_attrs]
        # a2a-sdk's own model and conversion: rows made without an ORM instance (task_rows); else through _to_orm.
        self._rows = Dicts() if {k for k, _ in self._columns} == ATTRIBUTES and self.core_to_model_conversion is None \
            else None
        table = self._table
        # Built once: constructing an upsert per save cost more than the transaction itself.
        upsert = sqlite_insert(table)  # its VALUES come from each save's parameters
        self._upsert = Prepared(upsert.on_conflict_do_update(
            index_elements=[table.c.id], set_={c: upsert.excluded[c] for _, c in self._columns if c != "id"},
        ))
        self._select = select(table).where(table.c.id == bindparam("task_id"), table.c.owner == bindparam("owner"))

    def _key(self, task_id: str, context: ServerCallContext) -> tuple[str, str]:
        return (self.owner_resolver(context), task_id)

    def _remember(self, key: tuple[str, str], task: Task) -> None:
        copy = Task()
        copy.CopyFrom(task)
        self._cache[key] = copy
        self._cache.move_to_end(key)
        if len(self._cache) > self._max:
            # Least recently used first, never what is not written yet.
            for old in [k for k in self._cache if k not in self._unwritten][: len(self._cache) - self._max]:
                self._pack(old, self._cache.pop(old))
                self._written_status.pop(old, None)

    def _pack(self, key: tuple[str, str], task: Task) -> None:
        data = task.SerializeToString()
        self._unpack(key)
        self._packed[key] = data
        self._packed_size += len(data)
        while self._packed_size > self._packed_budget and self._packed:
            self._packed_size -= len(self._packed.popitem(last=False)[1])

    def _unpack(self, key: tuple[str, str]) -> Task | None:
        data = self._packed.pop(key, None)
        if data is None:
            return None
        self._packed_size -= len(data)
        return Task.FromString(data)

    async def save(self, task: Task, context: ServerCallContext) -> None:
        if not self._lean:
            return await super().save(task, context)
        key = (self.owner_resolver(context), task.id)
        self._absent.pop(key, None)
        if self._fresh is not None:
            self._fresh.written(task.id)
        self._unpack(key)
        status = task.status.SerializeToString(deterministic=True)
        if task.status.state in DURABLE_STATES and self._news(key, task, status):
            self._remember(key, task)
            self._unwritten.pop(key, None)
            await self._write(key[0], task)
            self._written_status[key] = status
        else:  # a step in between, or only the history grew (a decision arriving): written with the next status
            self._unwritten[key] = task  # before _remember, which never evicts what is unwritten
            self._remember(key, task)
            self._unwritten[key] = self._cache[key]

    def _news(self, key: tuple[str, str], task: Task, status: bytes) -> bool:
        """Whether this save tells a client something new: another state, or another status message (a2a-sdk
        clears the message of a paused task when a reply arrives; that alone is not news)."""
        written = self._written_status.get(key)
        if written is None:
            return True
        before = type(task.status).FromString(written)
        return before.state != task.status.state or (task.status.HasField("message") and written != status)

    async def _write(self, owner: str, task: Task) -> None:
        if self._rows is not None:
            attributes = row_values(task, owner, self._rows)
            values: dict[str, Any] = {column: attributes[key] for key, column in self._columns}
        else:
            model = self._to_orm(task, owner)
            values = {column: getattr(model, key) for key, column in self._columns}
        await self._db.run(lambda conn: self._upsert(conn, values))

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
        packed = self._unpack(key)
        if packed is not None:
            self._remember(key, packed)
            self._written_status[key] = packed.status.SerializeToString(deterministic=True)
            result = Task()
            result.CopyFrom(packed)
            return result
        if self._fresh is not None and task_id in self._fresh:
            return None
        params = {"task_id": task_id, "owner": key[0]}
        row = await self._db.run(lambda conn: conn.execute(self._select, params).first(), write=False)
        if row is None:
            self._absent[key] = None
            while len(self._absent) > self._max:
                self._absent.popitem(last=False)
            return None
        task = self._from_orm(self.task_model(**{k: row._mapping[column] for k, column in self._columns}))
        self._remember(key, task)
        self._written_status[key] = task.status.SerializeToString(deterministic=True)
        return task

    async def owner_of(self, task_id: str) -> str | None:
        """Who owns ``task_id`` (for the runtime's own resumers, which act on the owner's behalf)."""
        for owner, cached_id in [*self._unwritten, *self._cache]:
            if cached_id == task_id:
                return owner
        table = self._table
        stmt = select(table.c.owner).where(table.c.id == task_id)
        return await self._db.run(lambda conn: conn.execute(stmt).scalar(), write=False)

    async def adopt_unowned(self, owner: str) -> int:
        """Give every task without an owner (written before tasks had owners) to ``owner``; how many."""
        table = self._table
        stmt = update(table).where(or_(table.c.owner.is_(None), table.c.owner == "")).values(owner=owner)
        return int(await self._db.run(lambda conn: conn.execute(stmt).rowcount))

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        await self.write_unwritten()  # a listing reads the table: tasks mid-run are in it too
        return await super().list(params, context)

    async def write_unwritten(self) -> None:
        """Write the tasks saved only to the cache so far (before a listing, and at shutdown)."""
        for key, task in list(self._unwritten.items()):
            await self._write(key[0], task)
            self._written_status[key] = task.status.SerializeToString(deterministic=True)
        self._unwritten.clear()

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        if not self._lean:
            return await super().delete(task_id, context)
        owner, table = self.owner_resolver(context), self._table
        self._cache.pop((owner, task_id), None)
        self._unpack((owner, task_id))
        self._unwritten.pop((owner, task_id), None)
        self._written_status.pop((owner, task_id), None)
        stmt = delete(table).where(table.c.id == task_id, table.c.owner == owner)

        def transaction(conn: Connection) -> None:
            conn.execute(stmt)

        await self._db.run(transaction)


__all__ = ["DURABLE_STATES", "CachedTaskStore"]
