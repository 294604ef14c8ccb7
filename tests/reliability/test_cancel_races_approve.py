"""``CancelTask`` racing an approval of the same paused call: whichever wins, the task's final state tells what ran.

- the approval wins: the call runs once, the task is ``COMPLETED`` with the model's reply, and the cancel is
  refused (``TaskNotCancelableError``, -32002);
- the cancel wins: the request is denied by the cancel, nothing runs, the task is ``CANCELED``, and the approval is
  answered -32004 (the task is finished) with "Already decided: … denied by cancel" in the error's data.

Never ``CANCELED`` after the call ran, never a reply lost. The cancel is sent from 20 ms before to 40 ms after the
approval (random, seeded: ``GATEHOUSE_SOAK_SEED``), so it lands before the decision, while the approved turn runs, or
after it ended.
``make test``: 30 rounds; ``make soak``: ``GATEHOUSE_SOAK_RACES`` (500).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

import pytest

from agent_runtime.contract import wire
from tests.reliability.soak import count, pause, rng
from tests.support.runtime import Rpc, RuntimeProcess, Tools, finished_explanation, state, status_text

pytestmark = [pytest.mark.e2e, pytest.mark.soak]

ROUNDS = count("GATEHOUSE_SOAK_RACES", 30)
TASK_NOT_CANCELABLE = -32002
UNSUPPORTED_OPERATION = -32004


def _approve_and_cancel(url: str, task: dict[str, Any], delay: float) -> tuple[dict[str, Any], dict[str, Any]]:
    """The approval and the cancel, ``delay`` seconds later (before, when negative); both raw JSON-RPC replies."""
    barrier = threading.Barrier(2)
    replies: dict[str, Any] = {}

    def approve() -> None:
        rpc = Rpc(url)
        rpc.client.get("/healthz")  # connected before the barrier: the sends really overlap
        barrier.wait()
        time.sleep(max(0.0, -delay))
        message = {"messageId": f"approve-{task['id']}", "role": "ROLE_USER", "taskId": task["id"],
                   "contextId": task["contextId"], "parts": [{"data": wire.approve_all()}]}
        replies["approve"] = rpc.call("SendMessage", {"message": message})

    def cancel() -> None:
        rpc = Rpc(url)
        rpc.client.get("/healthz")
        barrier.wait()
        time.sleep(max(0.0, delay))
        replies["cancel"] = rpc.call("CancelTask", {"id": task["id"]})

    threads = [threading.Thread(target=approve), threading.Thread(target=cancel)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return replies["approve"], replies["cancel"]


def test_cancel_racing_an_approval_ends_in_the_state_of_what_ran(served: tuple[Tools, RuntimeProcess]) -> None:
    tools, proc = served
    rpc = Rpc(proc.url)
    random = rng("test_cancel_racing_an_approval_ends_in_the_state_of_what_ran")
    winners: Counter[str] = Counter()
    problems = []
    for round_ in range(ROUNDS):
        conv = pause(rpc, tools, f"cancel-race-{round_}.txt")
        delay = random.uniform(-0.02, 0.04)
        approved, canceled = _approve_and_cancel(proc.url, conv.task, delay)
        runs = [x for x in tools.executions("delete_file", conv.path) if x["ok"]]
        final = rpc.get_task(conv.task["id"])
        exists = (tools.sandbox / conv.path).exists()
        seen = (f"round {round_} (cancel +{delay * 1000:.0f} ms): approve → {_outcome(approved)}; "
                f"cancel → {_outcome(canceled)}; final {state(final)}")
        if state(final) == "TASK_STATE_COMPLETED":
            winners["approve"] += 1
            ok = (len(runs) == 1 and not exists and "result" in approved
                  and status_text(approved["result"]["task"]) == status_text(final)
                  and f"Delete of {conv.path}: deleted" in status_text(final)
                  and canceled.get("error", {}).get("code") == TASK_NOT_CANCELABLE)
        elif state(final) == "TASK_STATE_CANCELED":
            winners["cancel"] += 1
            error = approved.get("error", {})
            ok = (runs == [] and exists and error.get("code") == UNSUPPORTED_OPERATION
                  and "denied by cancel" in finished_explanation(error)
                  and canceled.get("result", {}).get("status", {}).get("state") == "TASK_STATE_CANCELED"
                  and [r["status"] for r in _approvals(proc.url, conv.task["id"])] == ["denied"])
        else:
            ok = False
        if not ok:
            problems.append(f"{seen}; ran {len(runs)} time(s), file exists: {exists}")
    print(f"cancel racing approve, {ROUNDS} rounds: {dict(winners)}")
    assert not problems, "\n".join(problems)


def _outcome(reply: dict[str, Any]) -> str:
    if "error" in reply:
        return f"error {reply['error']['code']} {finished_explanation(reply['error']) or reply['error']['message']!r}"
    task = reply["result"].get("task", reply["result"])
    return f"{state(task)} {status_text(task)!r}"


def _approvals(url: str, task_id: str) -> list[dict[str, Any]]:
    listed = Rpc(url).client.get("/approvals", params={"state": "all"}).json()["approvals"]
    return [a for a in listed if a["task_id"] == task_id]
