"""Statements of the request path, compiled once by SQLAlchemy and, on sqlite, run straight on the driver.

A pause writes ~5 rows and a resume ~10 (session, approval, vote, audit). Through SQLAlchemy's execution path each
statement cost ~25 µs on sqlite; handing the compiled SQL to the driver, ~4 µs (measured: an audit insert, 3,000 in
one transaction). So :class:`Prepared` keeps what SQLAlchemy is for — building and compiling the statement, and each
bound value's conversion (``TypeEngine.bind_processor``) — and skips only the per-call execution machinery: the SQL
and the order of its parameters are compiled once per dialect and set of keys, then each call is one driver call
inside the transaction :meth:`agent_runtime.infra.database.Database.run` opened. A select's rows come back as plain
mappings of column name to value, each converted by its type's ``result_processor``, as SQLAlchemy's would.

A driver error is raised as SQLAlchemy's (``sqlalchemy.exc.IntegrityError`` for a duplicate key, …), as ``conn.execute``
would, so callers catch the same exceptions whichever path ran.

Anywhere else (Postgres, or a statement whose compiled parameters are not all named by the caller, such as a column
default SQLAlchemy would fill in) it is an ordinary ``conn.execute``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Connection
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql.base import Executable
from sqlalchemy.sql.compiler import SQLCompiler

__all__ = ["Prepared", "mappings"]

Params = Mapping[str, Any]


@dataclass(frozen=True)
class _Compiled:
    sql: str
    names: tuple[str, ...]
    processors: tuple[Callable[[Any], Any] | None, ...]
    fixed: Mapping[str, Any]  # the statement's own literals (``exec_state="done"``), bound like the caller's values

    def values(self, params: Params) -> tuple[Any, ...]:
        given = {**self.fixed, **params} if self.fixed else params
        return tuple(
            value if process is None else process(value)
            for value, process in zip((given[n] for n in self.names), self.processors, strict=True)
        )


class Prepared:
    """``Prepared(stmt)(conn, params)`` runs ``stmt`` with ``params`` (one mapping, or a list for many rows) and
    returns the number of rows it changed; ``Prepared(select).mappings(conn, params)`` returns the rows."""

    def __init__(self, stmt: Executable) -> None:
        self.stmt = stmt
        self._compiled: dict[tuple[str, frozenset[str]], _Compiled | None] = {}
        self._result: list[tuple[str, Callable[[Any], Any] | None]] | None = None  # a select's columns (sqlite)

    def __call__(self, conn: Connection, params: Params | Sequence[Params]) -> int:
        rows = [params] if isinstance(params, Mapping) else list(params)
        if conn.dialect.name != "sqlite" or not rows:
            return int(conn.execute(self.stmt, params).rowcount)  # type: ignore[arg-type]
        compiled = self._compile(conn.dialect, rows[0])
        if compiled is None:
            return int(conn.execute(self.stmt, params).rowcount)  # type: ignore[arg-type]
        driver = conn.connection.driver_connection
        assert driver is not None
        try:
            if len(rows) == 1:
                return int(driver.execute(compiled.sql, compiled.values(rows[0])).rowcount)
            return int(driver.executemany(compiled.sql, [compiled.values(row) for row in rows]).rowcount)
        except conn.dialect.loaded_dbapi.Error as exc:
            raise _wrapped(conn, compiled.sql, rows, exc) from exc

    def mappings(self, conn: Connection, params: Params) -> list[Mapping[str, Any]]:
        compiled = self._compile(conn.dialect, params) if conn.dialect.name == "sqlite" else None
        if compiled is None:
            return [cast(Mapping[str, Any], row._mapping) for row in conn.execute(self.stmt, params)]
        driver = conn.connection.driver_connection
        assert driver is not None
        columns = self._columns(conn.dialect)
        try:
            found = driver.execute(compiled.sql, compiled.values(params)).fetchall()
        except conn.dialect.loaded_dbapi.Error as exc:
            raise _wrapped(conn, compiled.sql, [params], exc) from exc
        return [
            {name: value if process is None else process(value) for (name, process), value in zip(columns, row, strict=True)}
            for row in found
        ]

    def first(self, conn: Connection, params: Params) -> Mapping[str, Any] | None:
        rows = self.mappings(conn, params)
        return rows[0] if rows else None

    def _columns(self, dialect: Dialect) -> list[tuple[str, Callable[[Any], Any] | None]]:
        if self._result is None:
            selected = self.stmt.selected_columns  # type: ignore[attr-defined]
            self._result = [(c.key, c.type.result_processor(dialect, None)) for c in selected]
        return self._result

    def _compile(self, dialect: Dialect, params: Params) -> _Compiled | None:
        key = (dialect.name, frozenset(params))
        if key not in self._compiled:
            compiled = self.stmt.compile(dialect=dialect, column_keys=sorted(params))  # type: ignore[attr-defined]
            assert isinstance(compiled, SQLCompiler)
            names = tuple(compiled.positiontup or ())
            fixed = _literals(compiled, [n for n in names if n not in params])
            usable = dialect.paramstyle == "qmark" and fixed is not None
            self._compiled[key] = _Compiled(
                compiled.string, names, tuple(compiled.binds[n].type.bind_processor(dialect) for n in names), fixed or {},
            ) if usable else None
        return self._compiled[key]


def _wrapped(conn: Connection, sql: str, rows: Sequence[Params], exc: Exception) -> BaseException:
    """The SQLAlchemy exception ``conn.execute`` would have raised for the driver's ``exc``."""
    return DBAPIError.instance(sql, list(rows) if len(rows) > 1 else rows[0], exc, conn.dialect.loaded_dbapi.Error,
                               dialect=conn.dialect, ismulti=len(rows) > 1)


def _literals(compiled: SQLCompiler, missing: list[str]) -> dict[str, Any] | None:
    """The values of the parameters the caller does not give, when each is a literal written in the statement; None
    when one is not (a column default SQLAlchemy computes at execution, or a value the caller must give)."""
    computed = {c.key for c in (*compiled.insert_prefetch, *compiled.update_prefetch)}
    fixed = {}
    for name in missing:
        bind = compiled.binds.get(name)
        if bind is None or name in computed or bind.required or bind.callable is not None:
            return None
        fixed[name] = bind.value
    return fixed


def mappings(conn: Connection, stmt: Prepared | Executable, params: Params | None = None) -> list[Mapping[str, Any]]:
    """The rows of a select, prepared or not, as mappings of column name to value."""
    if isinstance(stmt, Prepared):
        return stmt.mappings(conn, params or {})
    return [cast(Mapping[str, Any], row._mapping) for row in conn.execute(stmt, params)]
