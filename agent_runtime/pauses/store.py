"""The durable table base of every kind of pause: one row per pause, and the only code that changes it.

Every change is a compare-and-swap (``UPDATE … WHERE id = ? AND version = ? AND <state> = ?``), committed before
anyone is told, so two changes racing for one pause (two clients, a client and a sweeper, two replicas) cannot both
win, and a replay after the pause ended changes nothing: the loser gets the kind's :class:`AlreadyMoved`, whose text
says what became of the row. A kind gives its table, its state column (and the value that means "done"), which
columns a move writes, and the translation between its record and a row; the rows stay exactly what the kind wrote
before the kernel existed (tests/infra/test_state_upgrade.py opens them).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, ClassVar, Generic, TypeVar

from sqlalchemy import Column, Connection, Float, Integer, MetaData, String, Table, bindparam, select, update

from agent_runtime.infra.database import Database
from agent_runtime.infra.fresh_ids import FreshIds
from agent_runtime.infra.prepared import Prepared, mappings

log = logging.getLogger(__name__)

R = TypeVar("R")


class AlreadyMoved(Exception):
    """A change to a pause that is no longer where the caller saw it. ``str(exc)`` is for the client; each kind's
    subclass names it ("Already answered", "Already decided") and says what an empty ``records`` means."""

    prefix = "Already decided"
    nothing = "nothing is open on this task"

    def __init__(self, records: Sequence[Any]) -> None:
        self.records = list(records)
        details = "; ".join(r.describe() for r in records) or self.nothing
        super().__init__(f"{self.prefix}: {details}. Nothing changed.")


Listener = Callable[[str, Any], Awaitable[None] | None]
"""Called after a commit with (event, record); must be quick, never raises out."""


def pause_table(name: str, metadata: MetaData, *columns: Column[Any], expires_index: bool = True) -> Table:
    """A kind's table: the columns every pause has around the kind's own (names, types and indexes exactly as each kind
    created them before the kernel existed, so a database written then opens unchanged)."""
    return Table(
        name, metadata,
        Column("id", String(64), primary_key=True),
        Column("task_id", String(128), nullable=False, index=True),
        Column("context_id", String(128), nullable=False, index=True),
        *columns,
        Column("created_at", Float, nullable=False),
        Column("expires_at", Float, nullable=False, index=expires_index),
        Column("updated_at", Float, nullable=False),
        Column("version", Integer, nullable=False, default=0),
    )


class PauseStore(Generic[R]):
    """A kind's table. Subclasses set the class attributes and :meth:`to_record` / :meth:`to_row`."""

    table: ClassVar[Table]
    metadata: ClassVar[MetaData]
    state: ClassVar[str]  # the column saying where the pause is ("stage", "status")
    done: ClassVar[str]  # its value once the pause ended
    expiring: ClassVar[str | None] = None  # the one state the sweeper expires (None: every open state)
    moved: ClassVar[tuple[str, ...]]  # the columns a move writes
    order: ClassVar[tuple[str, ...]] = ("created_at",)
    already: ClassVar[type[AlreadyMoved]] = AlreadyMoved

    _for_task: ClassVar[Prepared]
    _open_in_context: ClassVar[Any]
    _expired: ClassVar[Any]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "table" not in cls.__dict__:
            return
        t, state = cls.table, cls.table.c[cls.state]
        cls._for_task = Prepared(select(t).where(t.c.task_id == bindparam("task_id")).order_by(*(t.c[o] for o in cls.order)))
        cls._open_in_context = select(t).where(t.c.context_id == bindparam("context_id"), state != cls.done)
        due = state == cls.expiring if cls.expiring is not None else state != cls.done
        cls._expired = (select(t).where(due, t.c.expires_at <= bindparam("now")).order_by(t.c.expires_at)
                        .limit(bindparam("limit")))

    def __init__(self, db: Database, clock: Callable[[], float] = time.time, fresh: FreshIds | None = None) -> None:
        self._db = db
        self.clock = clock
        self._fresh = fresh  # contexts with nothing stored yet (agent_runtime/infra/fresh_ids.py)
        self._listeners: list[Listener] = []

    # --- the kind's translation ------------------------------------------------------------------

    @staticmethod
    def to_record(m: Mapping[str, Any]) -> R:
        raise NotImplementedError

    @staticmethod
    def to_row(r: R) -> dict[str, Any]:
        raise NotImplementedError

    # --- listeners (a Kubernetes mirror) ---------------------------------------------------------

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Add a listener; returns the function that removes it again."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    async def _publish(self, event: str, record: R) -> None:
        for listener in list(self._listeners):
            try:
                result = listener(event, record)
                if result is not None:
                    await result
            except Exception:  # a listener must never break a change
                log.exception("%s listener failed on %s", self.table.name, event)

    # --- reads and writes ------------------------------------------------------------------------

    async def create_tables(self) -> None:
        await self._db.create_tables(self.metadata)

    async def add(self, record: R) -> None:
        if self._fresh is not None:
            self._fresh.written(record.context_id)  # type: ignore[attr-defined]
        row = self.to_row(record)
        await self._db.run(lambda conn: conn.execute(self.table.insert(), [row]))
        await self._publish("requested", record)

    async def _select(self, stmt: Any, params: dict[str, Any] | None = None) -> list[R]:
        to_record = self.to_record
        return await self._db.run(lambda conn: [to_record(m) for m in mappings(conn, stmt, params)], write=False)

    async def for_task(self, task_id: str) -> list[R]:
        """Every pause of the task, oldest first."""
        return await self._select(self._for_task, {"task_id": task_id})

    async def open_in_context(self, context_id: str) -> list[R]:
        if self._fresh is not None and context_id in self._fresh:
            return []
        return await self._select(self._open_in_context, {"context_id": context_id})

    async def expired(self, limit: int = 100) -> list[R]:
        """Open pauses past ``expires_at``, soonest first (the sweeper's round)."""
        return await self._select(self._expired, {"now": self.clock(), "limit": limit})

    async def get(self, pause_id: str) -> list[R]:
        return await self._select(select(self.table).where(self.table.c.id == pause_id))

    async def _move(self, record: R, expected: str | None, *, also: R | None = None, **values: Any) -> R:
        """Change ``record`` to ``values`` if nobody changed it since it was read and it is in state ``expected``
        (None: in any open state); ``also``: a row added in the same transaction. Else the kind's AlreadyMoved."""
        now = self.clock()
        version: int = record.version  # type: ignore[attr-defined]
        updated = replace(record, **values, updated_at=now, version=version + 1)  # type: ignore[type-var]
        row = self.to_row(updated)
        t = self.table
        where_state = t.c[self.state] == expected if expected is not None else t.c[self.state] != self.done
        stmt = (update(t).where(t.c.id == record.id, t.c.version == version, where_state)  # type: ignore[attr-defined]
                .values({k: row[k] for k in self.moved}))
        extra = self.to_row(also) if also is not None else None

        def transaction(conn: Connection) -> int:
            count = int(conn.execute(stmt).rowcount)
            if count == 1 and extra is not None:
                conn.execute(t.insert(), [extra])
            return count

        if await self._db.run(transaction) != 1:
            raise self.already(await self.get(record.id))  # type: ignore[attr-defined]
        return updated


__all__ = ["AlreadyMoved", "Listener", "PauseStore", "pause_table"]
