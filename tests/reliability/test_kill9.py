"""``kill -9`` soak: the runtime (sqlite state dir) is killed over and over with approvals pending and in
flight; at the end every conversation is completed, every approved file was deleted exactly once, every denied
file is still there, and no task was lost.

Each cycle pauses a few new conversations, then either kills an idle runtime and decides some pending ones
after the restart (several at once), or fires decisions without waiting and kills the runtime under them, then
restarts and re-sends the same decisions. ``make test``: 3 cycles; ``make soak``: ``GATEHOUSE_SOAK_CYCLES``.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tests.reliability.soak import Conversation, Ledger, count, pause, rng, send_all, send_decision
from tests.support.runtime import Rpc, RuntimeProcess, demo_tools, state, write_manifests

pytestmark = [pytest.mark.e2e, pytest.mark.soak]

CYCLES = count("GATEHOUSE_SOAK_CYCLES", 3)


def _fire_and_kill(proc: RuntimeProcess, convs: list[Conversation], delay: float) -> None:
    """Send every decision of ``convs`` without waiting, then ``kill -9`` the runtime ``delay`` s later."""
    threads = [threading.Thread(target=send_decision, args=(proc.url, c, 30.0), daemon=True) for c in convs]
    for t in threads:
        t.start()
    time.sleep(delay)
    proc.kill9()
    for t in threads:
        t.join(35)


def _settle(proc: RuntimeProcess, convs: list[Conversation]) -> None:
    """After a restart: re-send the decisions whose fate is unknown until each task has finished."""
    rpc = Rpc(proc.url)
    for conv in convs:
        for _ in range(3):
            if state(rpc.get_task(conv.task["id"])) == "TASK_STATE_COMPLETED":
                break
            send_decision(proc.url, conv)
        else:
            pytest.fail(f"{conv.path} did not complete after re-sending its decision: {conv.replies}")


def test_kill_9_cycles_lose_nothing_and_run_nothing_twice(tmp_path: Path) -> None:
    random = rng("kill9-cycles")
    with demo_tools(tmp_path / "tools") as tools:
        proc = RuntimeProcess(write_manifests(tmp_path / "m", tools.url), tmp_path / "state", tmp_path / "runtime.log")
        proc.start()
        try:
            rpc = Rpc(proc.url)
            convs = [pause(rpc, tools, f"f{i}.txt") for i in range(4)]
            pending = list(convs)
            for cycle in range(CYCLES):
                for _ in range(random.randint(1, 2)):
                    convs.append(pause(rpc, tools, f"f{len(convs)}.txt"))
                pending = [c for c in convs if c.decision is None]
                chosen = random.sample(pending, k=min(len(pending), random.randint(1, 3)))
                for conv in chosen:
                    conv.decision = "approve" if random.random() < 0.65 else "deny"
                if cycle % 2 == 0:  # killed while idle, decided (concurrently) after the restart
                    proc.kill9()
                    proc.start()
                    send_all(proc.url, chosen)
                else:  # killed under the decisions, then the same decisions again
                    _fire_and_kill(proc, chosen, delay=random.uniform(0.0, 0.4))
                    proc.start()
                _settle(proc, chosen)
                rpc = Rpc(proc.url)  # a fresh connection pool for the new process
            rest = [c for c in convs if c.decision is None]
            for conv in rest:
                conv.decision = random.choice(["approve", "deny"])
            proc.kill9()
            proc.start()
            send_all(proc.url, rest)
            _settle(proc, rest)
            proc.kill9()  # one more: what finished stays finished
            proc.start()
            Ledger(tools).check(Rpc(proc.url), convs)
            print(f"kill9-cycles: {CYCLES} cycles, {len(convs)} conversations, "
                  f"{sum(c.decision == 'approve' for c in convs)} approved")
        finally:
            proc.stop()


def test_kill_9_during_resumes_then_resend_runs_nothing_twice(tmp_path: Path) -> None:
    """Every pending approval sent at once and the runtime killed right away, at varying moments."""
    random = rng("kill9-resumes")
    rounds = max(1, CYCLES // 5)
    with demo_tools(tmp_path / "tools") as tools:
        proc = RuntimeProcess(write_manifests(tmp_path / "m", tools.url), tmp_path / "state", tmp_path / "runtime.log")
        proc.start()
        try:
            convs: list[Conversation] = []
            for r in range(rounds):
                rpc = Rpc(proc.url)
                batch = [pause(rpc, tools, f"r{r}-{i}.txt") for i in range(6)]
                for conv in batch:
                    conv.decision = "approve" if random.random() < 0.8 else "deny"
                _fire_and_kill(proc, batch, delay=random.choice([0.0, 0.05, 0.15, 0.3]))
                proc.start()
                _settle(proc, batch)
                # Replays after the fact: each is told "Already decided" and runs nothing.
                for conv in batch:
                    result = send_decision(proc.url, conv)
                    assert result is not None and "error" in result, result  # the task is finished: -32004
                    assert conv.replies[-1].startswith("Already decided:"), conv.replies
                convs += batch
            Ledger(tools).check(Rpc(proc.url), convs)
        finally:
            proc.stop()
