"""The version of the runtime's stored state, and the steps that bring an older state directory up to date.

Version 1 is what releases before principals wrote (no version row). Version 2 adds who asked for a call
and who may decide it (``requested_by``, ``approvers_json`` on the approvals table), the votes table and
the ToolApproval uids the runtime created. Version 3 scopes the REST idempotency keys to their principal
(``principal`` on ``gatehouse_idempotency_keys``, defined in :mod:`agent_runtime.rest.idempotency` and upgraded
here by name, since the version is one number for the whole state): keys written before answer nobody and expire
with the others. Version 4 keeps edited approvals (``original_args_json``, ``edited_by`` on the approvals table; a
request written before was never edited: NULL and '') and says what each vote was cast on (``args_hash`` on the votes
table; '' for votes written before: on the model's arguments). Version 5 says what became of an approved call
(``exec_outcome``, ``exec_error``, ``executed_at`` on the approvals table, approvals/execution.py); the step also fills
them in for the calls an older release ran: one it left ``started`` was cut short by the restart that brings this
release (``unknown``), one it finished takes ran or failed from its ``executed`` audit event (ok or error then; none
left by the retention: left empty). Each step is additive, so the rows of an older runtime are
all still there; :func:`upgrade` runs at start-up inside one transaction, before anything else reads the tables. A
table that does not exist yet is created whole by its owner (``create_all``), so its step is skipped.
"""

from __future__ import annotations

from sqlalchemy import Connection, case, inspect, select, text, update

from agent_runtime.approvals import audit
from agent_runtime.approvals.execution import LEGACY
from agent_runtime.approvals.tables import approvals, listing_index, schema_versions

SCHEMA_VERSION = 5

# Columns added to existing tables since version 1: (table, column, DDL type and default).
_ADDED = [
    ("gatehouse_approvals", "requested_by", "VARCHAR(256) NOT NULL DEFAULT ''"),
    ("gatehouse_approvals", "approvers_json", "TEXT"),
    # Additive within version 2: added to any state that lacks it (NULL: redact the built-in secret shapes only).
    ("gatehouse_approvals", "redact_json", "TEXT"),
    # Version 3: whose key it is ('' for keys written before: they match no principal).
    ("gatehouse_idempotency_keys", "principal", "VARCHAR(256) NOT NULL DEFAULT ''"),
    # Version 4: edit and approve.
    ("gatehouse_approvals", "original_args_json", "TEXT"),
    ("gatehouse_approvals", "edited_by", "VARCHAR(256) NOT NULL DEFAULT ''"),
    ("gatehouse_approval_votes", "args_hash", "VARCHAR(64) NOT NULL DEFAULT ''"),
    # Version 5: what became of an approved call (filled in for older rows by _outcomes_of_older_calls).
    ("gatehouse_approvals", "exec_outcome", "VARCHAR(16) NOT NULL DEFAULT ''"),
    ("gatehouse_approvals", "exec_error", "TEXT NOT NULL DEFAULT ''"),
    ("gatehouse_approvals", "executed_at", "FLOAT"),
]
EXECUTION_VERSION = 5  # the version whose step fills in the outcomes of the calls older releases ran


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
        if not inspector.has_table(table):
            continue  # created whole, later, by the module that owns it
        if column not in {c["name"] for c in inspector.get_columns(table)}:
            conn.execute(text(f"ALTER TABLE {table} ADD COLUMN {column} {ddl}"))
    # Indexes added to existing tables (create_all makes them only with a new table); additive, no version step.
    listing_index.create(conn, checkfirst=True)
    if found < EXECUTION_VERSION:
        _outcomes_of_older_calls(conn)
    if found < SCHEMA_VERSION:
        conn.execute(schema_versions.delete().where(schema_versions.c.component == "runtime"))
        conn.execute(schema_versions.insert().values(component="runtime", version=SCHEMA_VERSION))
    return found


def _outcomes_of_older_calls(conn: Connection) -> None:
    """The execution outcome of the calls an older release claimed: ``started`` ones were cut short (whether they took
    effect is unknown), ``done`` ones say ran or failed as their last ``executed`` audit event did."""
    a = approvals
    conn.execute(update(a).where(a.c.exec_state == "started", a.c.exec_outcome == "").values(exec_outcome="unknown"))
    said, when = audit.last_executed()
    legacy = case(*((said == old, new) for old, new in LEGACY.items()), else_="")
    conn.execute(update(a).where(a.c.exec_state == "done", a.c.exec_outcome == "").values(exec_outcome=legacy,
                                                                                          executed_at=when))


__all__ = ["SCHEMA_VERSION", "schema_versions", "stored_version", "upgrade"]
