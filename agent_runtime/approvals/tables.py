"""The runtime's approval tables, on one metadata (created together at start-up, upgraded by approvals/schema.py).

Only :mod:`agent_runtime.approvals` code reads and writes them: the service (requests and their outcome),
deciders (who decided), votes (every vote cast), audit (the other events of the audit log) and schema (the
state's version).
"""

from __future__ import annotations

from sqlalchemy import Boolean, Column, Float, Index, Integer, MetaData, String, Table, Text

metadata = MetaData()

approvals = Table(
    "gatehouse_approvals",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("task_id", String(128), nullable=False, index=True),
    Column("context_id", String(128), nullable=False, index=True),
    Column("confirmation_id", String(128), nullable=False),
    Column("call_id", String(128), nullable=False, unique=True),
    Column("tool", String(256), nullable=False),
    Column("server", String(256)),
    Column("args_json", Text, nullable=False),
    Column("args_hash", String(64), nullable=False),
    Column("hint", Text, nullable=False, default=""),
    Column("created_at", Float, nullable=False),
    Column("expires_at", Float, nullable=False, index=True),
    Column("position", Integer, nullable=False, default=0),
    Column("status", String(16), nullable=False, index=True),
    Column("scope", String(16), nullable=False, default="once"),
    Column("reason", Text, nullable=False, default=""),
    Column("source", String(64), nullable=False, default=""),
    Column("decided_at", Float),
    Column("exec_state", String(16), nullable=False, default="none"),
    Column("requested_by", String(256), nullable=False, default=""),  # since state version 2 (approvals/schema.py)
    Column("approvers_json", Text),
    Column("redact_json", Text),  # spec.approval.redact when the call paused (NULL: the built-in secret shapes)
    # Since state version 4 (edit and approve, agent_runtime/contract/edits.py): the arguments the model asked for, once an
    # approver replaced ``args_json`` (NULL: never edited), and who did.
    Column("original_args_json", Text),
    Column("edited_by", String(256), nullable=False, default=""),
    # Since state version 5: what became of an approved call once it ran (approvals/execution.py; '' not yet, or never),
    # the error it reported (redacted) and when its result came back.
    Column("exec_outcome", String(16), nullable=False, default=""),
    Column("exec_error", Text, nullable=False, default=""),
    Column("executed_at", Float),
)
# The listing order (REST GET /approvals, the inbox): one state's requests newest first, read in index order instead of
# sorting every row of that state for each page (approvals/schema.py adds it to a state written before it existed).
listing_index = Index("ix_gatehouse_approvals_listing", approvals.c.status, approvals.c.created_at.desc(),
                      approvals.c.position, approvals.c.id)

# Who decided a request, where a channel knew the person (written and read by approvals/deciders.py).
deciders = Table(
    "gatehouse_approval_deciders",
    metadata,
    Column("request_id", String(64), primary_key=True),
    Column("decided_by", String(256), nullable=False),
    Column("decided_at", Float, nullable=False),
)

votes = Table(
    "gatehouse_approval_votes",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("request_id", String(64), nullable=False, index=True),
    Column("principal", String(256), nullable=False),
    Column("seen_as", String(256), nullable=False, default=""),
    Column("groups_json", Text, nullable=False, default="[]"),
    Column("ballot", String(8), nullable=False),
    Column("reason", Text, nullable=False, default=""),
    Column("channel", String(32), nullable=False),
    Column("cast_at", Float, nullable=False),
    Column("counted", Boolean, nullable=False),
    Column("note", Text, nullable=False, default=""),
    Column("args_hash", String(64), nullable=False, default=""),  # the arguments voted on (state version 4; "" before)
)

schema_versions = Table(
    "gatehouse_schema",
    metadata,
    Column("component", String(64), primary_key=True),
    Column("version", Integer, nullable=False),
)


# The Kubernetes objects (ToolApprovals) the runtime itself created, by request: only votes on these count
# (a ToolApproval anyone else created, or one recreated under the same name, has another uid).
mirrored_objects = Table(
    "gatehouse_mirrored_objects",
    metadata,
    Column("request_id", String(64), primary_key=True),
    Column("uid", String(64), nullable=False),
)


# Session grants (approvals/grants.py): an approval "for this session" lets later calls of one tool in one
# conversation run without a new pause, for the approved arguments only (or a glob over one path argument).
grants = Table(
    "gatehouse_grants",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("context_id", String(128), nullable=False, index=True),
    Column("owner", String(256), nullable=False),
    Column("server", String(256), nullable=False, default=""),
    Column("tool", String(256), nullable=False),
    Column("args_hash", String(64)),  # exact arguments (None when a glob over ``argument`` says what is covered)
    Column("argument", String(256)),
    Column("glob", Text),
    Column("approvers_json", Text, nullable=False, default=""),  # who could decide the granting request ("" anyone)
    Column("granted_by", String(512), nullable=False),
    Column("request_id", String(64), nullable=False),  # the approved request that made the grant
    Column("created_at", Float, nullable=False),
    Column("expires_at", Float, nullable=False),
)

# The audit log's own events (approvals/audit.py): requested, decided, timed out, canceled, granted, started,
# executed, refused. Votes are not repeated here: the audit reads them from ``votes`` (one store, not two).
# Append-only: rows are inserted in the transaction of the change they record and deleted only by retention.
# A table of its own, created by ``create_all`` on any state version: it needs no upgrade step.
audit_events = Table(
    "gatehouse_audit_events",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("at", Float, nullable=False, index=True),
    Column("event", String(16), nullable=False),
    Column("request_id", String(64), nullable=False, index=True),
    Column("principal", String(256), nullable=False, default=""),  # who acted (gatehouse:internal: the runtime)
    Column("channel", String(32), nullable=False, default=""),
    Column("outcome", String(32), nullable=False, default=""),
    Column("reason", Text, nullable=False, default=""),
    Column("rule", String(256), nullable=False, default=""),  # the policy rule that gated the call (policy.Decision.rule)
)


__all__ = ["approvals", "audit_events", "deciders", "grants", "metadata", "mirrored_objects", "schema_versions", "votes"]
