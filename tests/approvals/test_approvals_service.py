"""The approvals table: decisions and executions happen exactly once, whatever the concurrency."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest
from sqlalchemy import text

from agent_runtime.approvals import AlreadyDecided, ApprovalRecord, ApprovalService, Resolution, args_hash
from agent_runtime.contract.authority import Vote
from agent_runtime.infra.database import Database, create_engine, default_database_url


def record(request_id: str, task_id: str = "t1", path: str = "a.txt", created: float = 100.0) -> ApprovalRecord:
    args = {"path": path}
    return ApprovalRecord(
        id=request_id, task_id=task_id, context_id="c1", confirmation_id=f"conf-{request_id}", call_id=f"call-{request_id}",
        tool="delete_file", server="files", args=args, args_hash=args_hash("delete_file", args), hint="gated",
        created_at=created, expires_at=created + 60,
    )


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[ApprovalService]:
    db = Database(default_database_url(tmp_path))
    svc = ApprovalService(db, clock=lambda: 130.0)
    await svc.create_tables()
    await svc.create_tables()  # idempotent
    yield svc
    await db.dispose()


async def test_sqlite_runs_in_wal_mode_with_a_busy_timeout(tmp_path: Path) -> None:
    engine = create_engine(default_database_url(tmp_path))
    async with engine.connect() as conn:
        assert (await conn.execute(text("PRAGMA journal_mode"))).scalar() == "wal"
        assert (await conn.execute(text("PRAGMA busy_timeout"))).scalar() >= 1000
    await engine.dispose()
    db = Database(default_database_url(tmp_path))
    assert await db.run(lambda c: c.execute(text("PRAGMA journal_mode")).scalar(), write=False) == "wal"
    assert await db.run(lambda c: c.execute(text("PRAGMA busy_timeout")).scalar()) >= 1000
    await db.dispose()


async def test_pending_requests_are_listed_in_order(service: ApprovalService) -> None:
    await service.add_pending([record("apr-2", path="b"), record("apr-1", path="a", created=99.0), record("apr-9", task_id="t2")])
    assert [r.id for r in await service.for_task("t1")] == ["apr-1", "apr-2"]
    assert [r.id for r in await service.pending_in_context("c1", "")] != []  # records here carry no requester
    assert await service.pending_in_context("c1", "mallory") == []  # another principal's context id shows nothing
    assert await service.pending_count() == 3
    got = (await service.for_task("t1"))[0]
    assert got.args == {"path": "a"} and got.status == "pending" and got.exec_state == "none"


async def test_decide_is_all_or_nothing_and_once(service: ApprovalService) -> None:
    await service.add_pending([record("apr-1"), record("apr-2", path="b")])
    decided = await service.decide("t1", {"apr-1": Resolution("approved"), "apr-2": Resolution("denied", "no")}, "a2a")
    assert [(r.id, r.status, r.source, r.reason) for r in decided] == [
        ("apr-1", "approved", "a2a", ""), ("apr-2", "denied", "a2a", "no")
    ]
    known = await service.for_task("t1")
    with pytest.raises(AlreadyDecided) as exc:
        await service.decide("t1", {"apr-1": Resolution("denied")}, "timeout", known=known)
    assert "apr-1 (delete_file) was approved by a2a" in str(exc.value) and "Nothing was run again" in str(exc.value)
    assert (await service.for_task("t1"))[0].status == "approved"


async def test_decide_returns_the_known_records_updated(service: ApprovalService) -> None:
    await service.add_pending([record("apr-1")])
    known = await service.for_task("t1")
    (decided,) = await service.decide("t1", {"apr-1": Resolution("approved", "", "session")}, "a2a", known=known)
    assert (decided.status, decided.scope, decided.source, decided.decided_at) == ("approved", "session", "a2a", 130.0)
    assert await service.for_task("t1") == [decided]


async def test_a_partly_decided_batch_changes_nothing(service: ApprovalService) -> None:
    await service.add_pending([record("apr-1"), record("apr-2", path="b")])
    await service.decide("t1", {"apr-2": Resolution("denied")}, "a2a")
    with pytest.raises(AlreadyDecided):
        await service.decide("t1", {"apr-1": Resolution("approved"), "apr-2": Resolution("approved")}, "a2a")
    assert {r.id: r.status for r in await service.for_task("t1")} == {"apr-1": "pending", "apr-2": "denied"}


async def test_a_request_of_another_task_cannot_be_decided_here(service: ApprovalService) -> None:
    await service.add_pending([record("apr-1", task_id="t2")])
    with pytest.raises(AlreadyDecided):
        await service.decide("t1", {"apr-1": Resolution("approved")}, "a2a")


async def test_concurrent_decisions_have_exactly_one_winner(service: ApprovalService) -> None:
    await service.add_pending([record("apr-1")])
    results = await asyncio.gather(
        *(service.decide("t1", {"apr-1": Resolution("approved")}, f"s{i}") for i in range(20)), return_exceptions=True
    )
    assert sum(not isinstance(r, BaseException) for r in results) == 1
    assert all(isinstance(r, AlreadyDecided) for r in results if isinstance(r, BaseException))


async def test_an_approved_call_is_claimed_once_with_its_arguments(service: ApprovalService) -> None:
    await service.add_pending([record("apr-1"), record("apr-2", path="b")])
    await service.decide("t1", {"apr-1": Resolution("approved"), "apr-2": Resolution("denied")}, "a2a")
    wrong = await service.claim_execution("call-apr-1", "delete_file", args_hash("delete_file", {"path": "other"}))
    assert not wrong.ok and "arguments differ" in wrong.problem
    claims = await asyncio.gather(
        *(service.claim_execution("call-apr-1", "delete_file", args_hash("delete_file", {"path": "a.txt"})) for _ in range(10))
    )
    assert sum(c.ok for c in claims) == 1
    # while the winner's tool has not returned, the others cannot know whether it took effect
    assert all("never reported back" in c.problem and "not run again" in c.problem for c in claims if not c.ok)
    denied = await service.claim_execution("call-apr-2", "delete_file", args_hash("delete_file", {"path": "b"}))
    assert not denied.ok and "denied" in denied.problem
    assert not (await service.claim_execution("call-unknown", "delete_file", "x")).ok
    assert (await service.for_task("t1"))[0].exec_state == "started"
    await service.finish_execution("call-apr-1", {"content": []})
    assert (await service.for_task("t1"))[0].exec_state == "done"
    again = await service.claim_execution("call-apr-1", "delete_file", args_hash("delete_file", {"path": "a.txt"}))
    assert not again.ok and "already executed; it was not run again" in again.problem


async def test_expired_requests_by_task(service: ApprovalService) -> None:
    await service.add_pending(
        [record("apr-1", created=0.0), record("apr-2", task_id="t2", created=0.0), record("apr-3", created=100.0)]
    )
    expired = await service.expired(now=61.0)
    assert {t: [r.id for r in rs] for t, rs in expired.items()} == {"t1": ["apr-1"], "t2": ["apr-2"]}
    assert await service.next_expiry() == 60.0
    await service.decide("t1", {"apr-1": Resolution("expired", "timeout")}, "timeout")
    assert list(await service.expired(now=61.0)) == ["t2"]


async def test_a_session_grant_covers_calls_after_a_restart_until_it_ends(tmp_path: Path) -> None:
    # On sqlite the service skips the grant lookup once every stored grant has ended: that horizon must be read back
    # at start-up and moved by each grant made, or a grant would silently stop covering calls.
    now = [130.0]
    args = {"path": "a.txt"}

    async def started() -> tuple[Database, ApprovalService]:
        db = Database(default_database_url(tmp_path))
        svc = ApprovalService(db, clock=lambda: now[0])
        await svc.create_tables()
        return db, svc

    db, svc = await started()
    assert await svc.grant_for("c1", "bob", "files", "delete_file", args, None) is None
    await svc.add_pending([replace(record("apr-1"), requested_by="bob")])  # bob's own task: he decides it
    await svc.vote("t1", {"apr-1": Vote("bob", frozenset(), "approve", "", "a2a")}, scope="session", grant_ttl=60)
    assert (await svc.grant_for("c1", "bob", "files", "delete_file", args, None)) is not None
    await db.dispose()

    db, svc = await started()  # a restart
    grant = await svc.grant_for("c1", "bob", "files", "delete_file", args, None)
    assert grant is not None and grant.request_id == "apr-1"
    assert await svc.grant_for("c1", "bob", "files", "delete_file", {"path": "b.txt"}, None) is None
    now[0] = 130.0 + 60
    assert await svc.grant_for("c1", "bob", "files", "delete_file", args, None) is None  # ended
    await db.dispose()
