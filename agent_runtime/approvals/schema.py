"""The version of the runtime's stored state, and the steps that bring an older state directory up to date.

Version 1 is what releases before principals wrote (no version row). Version 2 adds who asked for a call
and who may decide it (``requested_by``, ``approvers_json`` on the approvals table), the votes table and
the ToolApproval uids the runtime created. Each step is additive, so a runtime of version 1 reading the
upgraded file still finds its rows; :func:`upgrade` runs at start-up inside one transaction, before
anything else reads the tables.
"""

from __future__ import annotations

from sqlalchemy import Connection, inspect, select, text

from agent_runtime.approvals.tables import schema_versions

SCHEMA_VERSION = 2

# Columns added to existing tables since version 1: (table, column, DDL type and default).
_ADDED = [
    ("gatehouse_approvals", "requested_by", "VARCHAR(256) NOT NULL DEFAULT ''"),
    ("gatehouse_approvals", "approvers_json", "TEXT"),
]


def stored_version(conn: Connection) -> int:
    if not inspect(conn).has_table(schema_versions.name):
        return 1
    found = conn.execute(select(schema_versions.c.version).where(schema_versions.c.component == "runtime")).scalar()
    return int(found or 1)


def upgrade(conn: Connection) -> int:
    """Add what an older state lacks (tables are created by ``create_all`` before this); returns the version found."""
    found = stored_version(conn)
    if found > SCHEMA_VERSION:
        raise RuntimeError(
            f"the database was written by a newer Gatehouse (state version {found}, this runtime knows {SCHEMA_VERSION}); "
            "upgrade the runtime instead of downgrading it"
        )
    inspector = inspect(conn)
    for table, column, ddl in _ADDED:
        if column not in {c["name"] for c in inspector.get_columns(table)}:
            conn.execute(text(f"ALTER TABLE {table} ADD COLUMN {column} {ddl}"))
    if found < SCHEMA_VERSION:
        conn.execute(schema_versions.delete().where(schema_versions.c.component == "runtime"))
        conn.execute(schema_versions.insert().values(component="runtime", version=SCHEMA_VERSION))
    return found


__all__ = ["SCHEMA_VERSION", "schema_versions", "stored_version", "upgrade"]
