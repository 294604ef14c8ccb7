"""A pause with no A2A task (issue 34, item 2): a small test kind whose approval requests are decided by DecideOne and
by the timeout sweeper, and resumed through the kind's own callback, never through the A2A resumer."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agent_runtime.approvals import AlreadyDecided, ApprovalRecord, ApprovalService, Resolution, args_hash
from agent_runtime.contract.authority import Vote
from agent_runtime.infra.database import Database
from agent_runtime.pauses.registry import PauseKinds
from agent_runtime.pauses.resumptions import Resumptions
from agent_runtime.server.decide_one import DecideOne
from agent_runtime.server.sweeper import TimeoutSweeper
from agent_runtime.server.task_store import CachedTaskStore
from agent_runtime.telemetry.metrics import Metrics


@dataclass
class HeldCalls:
    """The test kind: a held call (think of an MCP gateway's) that waits on approval and goes on by callback."""

    name: str = "held_call"
    prefix: str = "held-"
    resumed: list[tuple[list[tuple[str, str]], str]] = field(default_factory=list)
    restated: list[list[str]] = field(default_factory=list)

    async def resume(self, decided: Sequence[ApprovalRecord], source: str, note: str) -> None:
        self.resumed.append(([(r.id, r.status) for r in decided], source))

    async def restate(self, pending: Sequence[ApprovalRecord], source: str, note: str) -> None:
        self.restated.append([r.id for r in pending])


@dataclass
class NoA2A:
    """Where a task-bound pause would go (the A2A request handler); a taskless pause must never reach it."""

    calls: list[str] = field(default_factory=list)

    async def resume(self, task_id: str, context_id: str, resolutions: dict[str, Resolution], source: str, note: str) -> Any:
        self.calls.append(task_id)


def _held(rid: str, task_id: str, created: float, position: int = 0, ttl: float = 600) -> ApprovalRecord:
    args = {"path": "/etc/passwd"}
    return ApprovalRecord(
        id=rid, task_id=task_id, context_id=f"ctx-{task_id}", confirmation_id=f"conf-{rid}", call_id=f"call-{rid}",
        tool="read_file", server="files", args=args, args_hash=args_hash("read_file", args), hint="held",
        created_at=created, expires_at=created + ttl, position=position, requested_by="alice",  # alice may decide
    )


@pytest.fixture
async def kernel(tmp_path: Path) -> Any:
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'held.db'}")
    approvals = ApprovalService(db)
    await approvals.create_tables()
    kinds, held, a2a = PauseKinds(), HeldCalls(), NoA2A()
    kinds.add_taskless(held)
    metrics = Metrics()
    resumptions = Resumptions(approvals, a2a, kinds, metrics)
    tasks = CachedTaskStore(db)
    decide = DecideOne(approvals, metrics, resumptions, tasks)
    yield approvals, decide, resumptions, held, a2a, metrics
    await db.dispose()


async def test_decide_one_resumes_a_taskless_pause_through_its_kind(kernel: Any) -> None:
    approvals, decide, _, held, a2a, _ = kernel
    now = time.time()
    await approvals.add_pending([_held("apr-1", "held-1", now), _held("apr-2", "held-1", now, position=1)])
    alice = Vote("alice", frozenset(), "approve", channel="rest")

    first = await decide("apr-1", alice, wait=True)
    assert first.resume is None and held.restated == [["apr-2"]] and held.resumed == []

    second = await decide("apr-2", Vote("alice", frozenset(), "deny", channel="rest"), wait=True)
    assert second.resume is not None
    assert held.resumed == [([("apr-1", "approved"), ("apr-2", "denied")], "rest")]
    assert a2a.calls == []
    with pytest.raises(AlreadyDecided):  # a replayed vote decides nothing and resumes nothing again
        await decide("apr-2", alice, wait=True)
    assert len(held.resumed) == 1


async def test_the_timeout_sweeper_resumes_a_taskless_pause_through_its_kind(kernel: Any) -> None:
    approvals, _, resumptions, held, a2a, metrics = kernel
    await approvals.add_pending([_held("apr-9", "held-9", time.time() - 10, ttl=1)])
    sweeper = TimeoutSweeper(approvals, resumptions, "deny", interval=60)
    assert await sweeper.sweep() == 1
    assert held.resumed == [([("apr-9", "expired")], "timeout")]
    assert a2a.calls == [] and await sweeper.sweep() == 0
    timeouts = metrics.registry.get_sample_value("gatehouse_decisions_total", {"outcome": "timeout", "source": "timeout"})
    assert timeouts == 1  # counted once, as a timeout on the A2A path is


async def test_a_task_bound_pause_still_goes_to_the_a2a_resumer(kernel: Any) -> None:
    approvals, decide, _, held, a2a, _ = kernel
    await approvals.add_pending([_held("apr-5", "task-5", time.time())])
    await decide("apr-5", Vote("alice", frozenset(), "approve", channel="rest"), wait=True)
    assert a2a.calls == ["task-5"] and held.resumed == []


def test_taskless_prefixes_may_not_overlap() -> None:
    kinds = PauseKinds()
    kinds.add_taskless(HeldCalls())
    with pytest.raises(ValueError, match="overlaps"):
        kinds.add_taskless(HeldCalls(name="hook", prefix="held-hook-"))
