"""The audit log (approvals/audit.py): what each change of a request writes, the one ordered stream of events and
votes, paging, filters, retention and append-only.

The store runs on sqlite and on Postgres (the same statements: a union, row-value cursors, insert from select).
"""

from __future__ import annotations

import ast
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import inspect

from agent_runtime.approvals import ApprovalRecord, ApprovalService, Resolution, args_hash, schema
from agent_runtime.approvals.audit import (
    FIELDS,
    AuditEntry,
    AuditLog,
    AuditQuery,
    csv_row,
    iso_micro,
    parse_cursor,
    parse_time,
)
from agent_runtime.contract.agent_config import ApproversConfig
from agent_runtime.contract.authority import Vote
from agent_runtime.contract.principals import INTERNAL
from agent_runtime.infra.database import Database, default_database_url
from tests.support.configs import files_config

ROOT = Path(__file__).resolve().parents[2]
DAY = parse_time("2026-11-02", 0.0)


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def record(request_id: str, task_id: str, created: float, path: str = "a.txt", owner: str = "carol",
           approvers: ApproversConfig | None = None) -> ApprovalRecord:
    args = {"path": path}
    return ApprovalRecord(
        id=request_id, task_id=task_id, context_id=f"ctx-{task_id}", confirmation_id=f"conf-{request_id}",
        call_id=f"call-{request_id}", tool="delete_file", server="files", args=args,
        args_hash=args_hash("delete_file", args), hint="delete_file on files requires approval (requireApproval)",
        created_at=created, expires_at=created + 900, requested_by=owner, approvers=approvers,
    )


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """(Sync: the Postgres fixture starts its server with its own event loop.)"""
    return request.getfixturevalue("postgres_database_url") if request.param == "postgres" else default_database_url(tmp_path)


@pytest.fixture
async def db(db_url: str) -> AsyncIterator[Database]:
    database = Database(db_url)
    yield database
    await database.dispose()


async def scripted(db: Database, clock: Clock) -> ApprovalService:
    """Five requests of one morning: N-of-M approval and the run, a deny, a timeout, a cancel, a refused replay."""
    service = ApprovalService(db, clock=clock)
    await service.create_tables()
    two = ApproversConfig(users=["alice", "bob"], required=2)
    await service.add_pending(
        [record("apr-1", "t1", DAY + 10, approvers=two), record("apr-2", "t1", DAY + 10, "b.txt")],
        {"apr-1": "spec.tools[files].mcpServer.requireApproval", "apr-2": "spec.approval.rules[0]"},
    )
    clock.now = DAY + 20
    await service.vote("t1", {"apr-1": Vote("mallory", frozenset(), "approve", "me too", "rest", "mallory")})
    await service.vote("t1", {"apr-1": Vote("alice", frozenset(), "approve", "fine", "rest", "alice@example.com")})
    clock.now = DAY + 30
    await service.vote("t1", {"apr-1": Vote("bob", frozenset({"sre"}), "approve", "ok", "kubectl", "bob")})
    clock.now = DAY + 31
    assert (await service.claim_execution("call-apr-1", "delete_file", args_hash("delete_file", {"path": "a.txt"}))).ok
    clock.now = DAY + 32
    await service.finish_execution("call-apr-1", {"content": [], "isError": False})
    clock.now = DAY + 33
    assert not (await service.claim_execution("call-apr-1", "delete_file", args_hash("delete_file", {"path": "a.txt"}))).ok
    clock.now = DAY + 40
    await service.vote("t1", {"apr-2": Vote("carol", frozenset(), "deny", "not that one", "a2a", "carol")})
    await service.add_pending([record("apr-3", "t3", DAY + 50), record("apr-4", "t4", DAY + 50, owner="dave")])
    clock.now = DAY + 950
    await service.decide("t3", {"apr-3": Resolution("expired", "timeout: no decision within 900s")}, "timeout")
    clock.now = DAY + 960
    await service.decide("t4", {"apr-4": Resolution("denied", "task canceled")}, "cancel", by="dave")
    return service


def summary(entries: list[AuditEntry]) -> list[tuple[str, str, str, str, str]]:
    return [(e.request_id, e.event, e.principal, e.channel, e.outcome) for e in entries]


EXPECTED = [
    ("apr-1", "requested", "carol", "a2a", "pending"),
    ("apr-2", "requested", "carol", "a2a", "pending"),
    ("apr-1", "voted", "mallory", "rest", "approve"),
    ("apr-1", "voted", "alice", "rest", "approve"),
    ("apr-1", "voted", "bob", "kubectl", "approve"),
    ("apr-1", "decided", "alice, bob", "kubectl", "approved"),
    ("apr-1", "started", INTERNAL, "", "started"),
    ("apr-1", "executed", INTERNAL, "", "ran"),
    ("apr-1", "refused", INTERNAL, "", "not run"),
    ("apr-2", "voted", "carol", "a2a", "deny"),
    ("apr-2", "decided", "carol", "a2a", "denied"),
    ("apr-3", "requested", "carol", "a2a", "pending"),
    ("apr-4", "requested", "dave", "a2a", "pending"),
    ("apr-3", "timed_out", INTERNAL, "timeout", "expired"),
    ("apr-4", "canceled", "dave", "cancel", "denied"),
]


async def test_each_change_writes_its_event_and_votes_are_read_from_their_own_record(db: Database) -> None:
    await scripted(db, Clock(DAY))
    audit = AuditLog(db, "file-manager")
    entries = await audit.entries()
    assert summary(entries) == EXPECTED
    by = {(e.request_id, e.event, e.principal): e for e in entries}
    requested = by["apr-1", "requested", "carol"]
    assert requested.rule == "spec.tools[files].mcpServer.requireApproval" and "requireApproval" in requested.reason
    assert by["apr-2", "requested", "carol"].rule == "spec.approval.rules[0]"
    assert (requested.agent, requested.tool, requested.server) == ("file-manager", "delete_file", "files")
    assert requested.task_id == "t1"
    assert requested.args_hash == args_hash("delete_file", {"path": "a.txt"}) and requested.at == "2026-11-02T00:00:10.000000Z"
    refused_vote = by["apr-1", "voted", "mallory"]
    assert refused_vote.counted is False and "alice or bob" in refused_vote.note and refused_vote.reason == "me too"
    assert by["apr-1", "voted", "alice"].counted is True and by["apr-1", "voted", "alice"].seen_as == "alice@example.com"
    decided = by["apr-1", "decided", "alice, bob"]
    assert decided.wait_seconds == 20.0 and decided.counted is None and decided.requested_by == "carol"
    assert "already executed" in by["apr-1", "refused", INTERNAL].reason
    assert by["apr-3", "timed_out", INTERNAL].wait_seconds == 900.0
    # Votes live once, in the votes table: the audit events table has no row for them.
    assert not [e for e in entries if e.event == "voted" and e.id.startswith("e")]
    assert len({e.id for e in entries}) == len(entries)


async def test_pages_and_filters(db: Database) -> None:
    await scripted(db, Clock(DAY))
    audit = AuditLog(db, "file-manager")
    everything = await audit.entries()
    for size in (1, 2, 4, 100):
        assert await audit.entries(page_size=size) == everything
    first = await audit.page(limit=3)
    assert len(first.entries) == 3 and first.next_cursor is not None
    last = await audit.page(limit=len(everything))
    assert last.next_cursor is None
    with pytest.raises(ValueError, match="not a cursor"):
        await audit.page(cursor="bm90LWEtY3Vyc29y")
    alice = await audit.entries(AuditQuery(principal="alice"))
    assert summary(alice) == [("apr-1", "voted", "alice", "rest", "approve")]
    dave = await audit.entries(AuditQuery(requested_by="dave"))
    assert [e.event for e in dave] == ["requested", "canceled"]
    window = await audit.entries(AuditQuery(since=DAY + 30, until=DAY + 40))
    assert [e.event for e in window] == ["voted", "decided", "started", "executed", "refused"]
    assert [e.request_id for e in await audit.entries(AuditQuery(event="decided"))] == ["apr-1", "apr-2"]
    assert len(await audit.entries(AuditQuery(request_id="apr-3"))) == 2
    assert await audit.entries(AuditQuery(tool="write_file")) == []
    assert len(await audit.entries(AuditQuery(tool="delete_file"))) == len(everything)


async def test_retention_deletes_old_events_and_votes_but_nothing_of_a_pending_request(db: Database) -> None:
    clock = Clock(DAY)
    service = await scripted(db, clock)
    await service.add_pending([record("apr-5", "t5", DAY + 5, approvers=ApproversConfig(users=["eve", "frank"], required=2))])
    clock.now = DAY + 6
    await service.vote("t5", {"apr-5": Vote("eve", frozenset(), "approve", "my vote", "rest", "eve")})  # 1 of 2: pending
    audit = AuditLog(db, "a")
    before = await audit.entries()
    gone = await audit.prune(DAY + 45)
    after = await audit.entries()
    assert gone == len(before) - len(after) > 0
    assert all(e.at >= iso_micro(DAY + 45) or e.request_id == "apr-5" for e in after)
    assert [(e.request_id, e.event) for e in after if e.at < iso_micro(DAY + 45)] == [("apr-5", "requested"), ("apr-5", "voted")]
    assert await service.counted_votes(["apr-1"]) == {}  # old votes of decided requests went with the rest


async def test_the_audit_has_no_update_path() -> None:
    """Append-only in the code: only approvals/audit.py names the table, and it inserts and (retention) deletes."""
    users = []
    for path in (ROOT / "agent_runtime").rglob("*.py"):
        if "audit_events" in path.read_text() and path.name != "tables.py":
            users.append(path.relative_to(ROOT).as_posix())
    assert users == ["agent_runtime/approvals/audit.py"]
    tree = ast.parse((ROOT / "agent_runtime/approvals/audit.py").read_text())
    calls = {
        ast.unparse(node.func) for node in ast.walk(tree)
        if isinstance(node, ast.Call) and any(isinstance(a, ast.Name) and a.id == "audit_events" for a in [*node.args, node.func])
    }
    attributes = {ast.unparse(node) for node in ast.walk(tree) if isinstance(node, ast.Attribute)
                  and isinstance(node.value, ast.Name) and node.value.id in ("audit_events", "votes")}
    assert calls == {"delete"}
    assert not {a for a in attributes if a.endswith((".update", ".delete"))}
    for path in (ROOT / "agent_runtime").rglob("*.py"):
        text = path.read_text()
        assert "update(votes" not in text and "votes.update(" not in text, path


def test_times_cursors_outcomes_and_csv() -> None:
    assert parse_time("2026-11-01", 0) == parse_time("2026-11-01T00:00:00Z", 0) == parse_time("2026-11-01T01:00:00+01:00", 0)
    assert parse_time("2026-11-01T00:00:00", 0) == parse_time("2026-11-01", 0)  # no offset: UTC
    assert parse_time("24h", 100_000.0) == 100_000.0 - 86_400 and parse_time("7d", 1e6) == 1e6 - 7 * 86_400
    with pytest.raises(ValueError, match="a date"):
        parse_time("yesterday", 0)
    for bad in ("", "x", "WzEsMl0", "WzEuMCwgMSwgInoiLCAxXQ"):
        with pytest.raises(ValueError):
            parse_cursor(bad)
    entry = AuditEntry(id="v1", at="2026-11-02T00:00:00.000000Z", event="voted", agent="a", request_id="r", counted=False)
    row = dict(zip(FIELDS, csv_row(entry), strict=True))
    assert (row["counted"], row["wait_seconds"], row["event"]) == ("false", "", "voted")


def test_config_reaches_the_runtime() -> None:
    assert files_config().audit.auditors.users == [] and files_config().audit.retention_seconds == 90 * 86400


async def test_an_older_state_gets_the_table_with_no_version_step(tmp_path: Path) -> None:
    """The audit table is a plain ``create_all`` addition: a version-1 state (tests/testdata/state-v1) gets it at
    start-up, and so does a state of the current version written before it existed, whose version stays as it is."""
    shutil.copy(ROOT / "tests/testdata/state-v1/gatehouse.db", tmp_path / "gatehouse.db")
    db = Database(default_database_url(tmp_path))
    service = ApprovalService(db, clock=Clock(DAY))
    assert await service.create_tables() == 1
    (old,) = await service.by_status("pending")
    await service.decide(old.task_id, {old.id: Resolution("denied", "from before the upgrade")}, "cancel", by="carol")
    entries = await AuditLog(db).entries()
    assert summary(entries) == [(old.id, "canceled", "carol", "cancel", "denied")]  # its request predates the log
    await db.run(lambda conn: conn.exec_driver_sql("DROP TABLE gatehouse_audit_events"))
    version = await db.run(schema.stored_version, write=False)
    assert version == schema.SCHEMA_VERSION
    assert await service.create_tables() == version
    assert await db.run(lambda conn: inspect(conn).has_table("gatehouse_audit_events"), write=False)
    assert await db.run(schema.stored_version, write=False) == version
    await db.dispose()
