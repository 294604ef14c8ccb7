"""Concurrent duplicate decisions for one request, over A2A: exactly one is applied, the tool runs once, every
other sender is told "Already decided" (in the error for a finished task, -32004). On one runtime (sqlite) and
across two replicas on one Postgres."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest

from agent_runtime.contract import wire
from tests.reliability.soak import pause, reply_text
from tests.support.runtime import Rpc, RuntimeProcess, Tools, state, status_text

pytestmark = pytest.mark.e2e

COPIES = 10


def _race(sends: list[tuple[str, Any, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Send every ``(url, data, task)`` at the same moment (one thread each, released by a barrier)."""
    barrier = threading.Barrier(len(sends))
    results: list[Any] = [None] * len(sends)

    def one(i: int, url: str, data: Any, task: dict[str, Any]) -> None:
        rpc = Rpc(url)
        rpc.client.get("/healthz")  # connect before the barrier, so the sends really overlap
        message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "taskId": task["id"],
                   "contextId": task["contextId"], "parts": [{"data": data}]}
        barrier.wait()
        try:
            results[i] = rpc.call("SendMessage", {"message": message})
        except Exception as exc:  # reported below, with the others
            results[i] = exc

    threads = [threading.Thread(target=one, args=(i, *s)) for i, s in enumerate(sends)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert all(isinstance(r, dict) for r in results), results
    return results


def _split(results: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """(the replies that applied a decision: a finished task, the texts of all the others: "Already decided", told in a
    message while the task was being resumed, or in the error for a finished task)."""
    applied = [r["result"] for r in results if "task" in r.get("result", {})
               and state(r["result"]["task"]) == "TASK_STATE_COMPLETED" and not reply_text(r).startswith("Already decided")]
    others = [reply_text(r) for r in results if not any(r.get("result") is a for a in applied)]
    return applied, others


def _check_one_winner(tools: Tools, rpc: Rpc, path: str, task: dict[str, Any], results: list[dict[str, Any]]) -> str:
    applied, others = _split(results)
    assert len(applied) == 1, [reply_text(r) for r in results]
    assert all(text.startswith("Already decided:") for text in others), [t for t in others if not t.startswith("Already")]
    runs = [x for x in tools.executions("delete_file", path) if x["ok"]]
    won = status_text(applied[0]["task"])
    done = rpc.get_task(task["id"])
    assert state(done) == "TASK_STATE_COMPLETED" and status_text(done) == won  # the losers changed nothing
    if "rejected by the user" in won:
        assert runs == [] and (tools.sandbox / path).exists()
    else:
        assert len(runs) == 1 and not (tools.sandbox / path).exists(), won
    return won


def test_ten_identical_approvals_at_once(served: tuple[Tools, RuntimeProcess]) -> None:
    tools, proc = served
    rpc = Rpc(proc.url)
    for round_ in range(3):
        conv = pause(rpc, tools, f"dup-{round_}.txt")
        results = _race([(proc.url, wire.approve_all(), conv.task)] * COPIES)
        won = _check_one_winner(tools, rpc, conv.path, conv.task, results)
        assert f"Delete of {conv.path}" in won


def test_a_deny_racing_an_approve(served: tuple[Tools, RuntimeProcess]) -> None:
    tools, proc = served
    rpc = Rpc(proc.url)
    winners = []
    for round_ in range(4):
        conv = pause(rpc, tools, f"race-{round_}.txt")
        sends = [(proc.url, wire.approve_all(), conv.task), (proc.url, wire.deny_all("no"), conv.task)]
        winners.append(_check_one_winner(tools, rpc, conv.path, conv.task, _race(sends if round_ % 2 else sends[::-1])))
    print("deny-vs-approve winners:", winners)




def test_duplicate_approvals_across_two_replicas(replicas: tuple[Tools, RuntimeProcess, RuntimeProcess]) -> None:
    tools, a, b = replicas
    rpc = Rpc(a.url)
    for round_ in range(3):
        conv = pause(rpc, tools, f"replicas-{round_}.txt")
        sends = [(url, wire.approve_all(), conv.task) for url in (a.url, b.url) for _ in range(COPIES // 2)]
        _check_one_winner(tools, rpc, conv.path, conv.task, _race(sends))
