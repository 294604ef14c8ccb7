"""Shared pieces of the reliability suite: counts that ``make soak`` raises, and the exactly-once ledger.

``make test`` runs every test here with small counts; ``make soak`` sets ``GATEHOUSE_SOAK_CYCLES`` (kill -9
cycles), ``GATEHOUSE_SOAK_CONVERSATIONS`` (concurrent conversations) and ``GATEHOUSE_SOAK_RACES`` (a cancel racing
an approval) to large ones. ``GATEHOUSE_SOAK_SEED``
replays a run's random choices (each test prints the seed it used).
"""

from __future__ import annotations

import os
import random
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import httpx

from agent_runtime.contract import wire
from tests.support.runtime import Rpc, Tools, finished_explanation, state, status_text

__all__ = ["Conversation", "Ledger", "count", "reply_text", "rng", "send_decision"]

COMPLETED = "TASK_STATE_COMPLETED"
PAUSED = "TASK_STATE_INPUT_REQUIRED"


def count(name: str, small: int) -> int:
    """``small`` under ``make test``; the value of the environment variable ``name`` when it is set."""
    return max(1, int(os.environ.get(name, small)))


def rng(test: str) -> random.Random:
    seed = int(os.environ.get("GATEHOUSE_SOAK_SEED", time.time_ns() % 1_000_000))
    print(f"{test}: GATEHOUSE_SOAK_SEED={seed}")
    return random.Random(seed)


@dataclass
class Conversation:
    """One paused ``delete <path>`` task and what the test decided for it."""

    path: str
    task: dict[str, Any]
    decision: str | None = None  # "approve" | "deny"
    replies: list[str] = field(default_factory=list)

    @property
    def data(self) -> dict[str, Any]:
        return wire.approve_all() if self.decision == "approve" else wire.deny_all(f"keep {self.path}")


def send_decision(rpc_url: str, conv: Conversation, timeout: float = 60.0) -> dict[str, Any] | None:
    """Send ``conv``'s decision; the JSON-RPC result (``{"error": …}`` when the task was finished already: -32004), or
    None when the runtime died under the request."""
    rpc = Rpc(rpc_url)
    rpc.client.timeout = httpx.Timeout(timeout)
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "taskId": conv.task["id"],
               "contextId": conv.task["contextId"], "parts": [{"data": conv.data}]}
    try:
        reply = rpc.call("SendMessage", {"message": message})
    except (httpx.TransportError, httpx.HTTPStatusError):
        return None
    finally:
        rpc.client.close()
    conv.replies.append(reply_text(reply))
    return reply.get("result", reply)


def reply_text(reply: dict[str, Any]) -> str:
    """What a decision's JSON-RPC reply says: the task's status text, a message's text, or a refusal's explanation."""
    if "error" in reply:
        assert reply["error"]["code"] == -32004, reply  # the task was finished: "Already decided: …"
        return finished_explanation(reply["error"])
    result = reply["result"]
    return status_text(result["task"]) if "task" in result else result["message"]["parts"][0]["text"]


def send_all(rpc_url: str, convs: list[Conversation], workers: int = 16) -> list[dict[str, Any] | None]:
    """Every decision at once, from ``workers`` threads; results in order."""
    if not convs:
        return []
    with ThreadPoolExecutor(max_workers=min(workers, len(convs))) as pool:
        return list(pool.map(lambda c: send_decision(rpc_url, c), convs))


class Ledger:
    """Checks against the demo-tools journal (``ok: true`` lines per path): an approved call ran once (or, cut
    short by a kill between its claim and the tool, not at all and the reply says so), a denied one never."""

    def __init__(self, tools: Tools) -> None:
        self.tools = tools

    def ok_runs(self) -> Counter[str]:
        return Counter(x["args"].get("path") for x in self.tools.executions("delete_file") if x.get("ok"))

    def check(self, rpc: Rpc, convs: list[Conversation]) -> None:
        runs = self.ok_runs()
        problems = []
        assert len({c.path for c in convs}) == len(convs), "each conversation must delete its own file"
        for conv in convs:
            task = rpc.get_task(conv.task["id"])  # no task lost: each one is still there
            text = status_text(task)
            if state(task) != COMPLETED:
                problems.append(f"{conv.path}: task {conv.task['id']} is {state(task)}: {text!r}")
            exists = (self.tools.sandbox / conv.path).exists()
            if conv.decision == "approve" and not _ran_once_or_said_unknown(runs[conv.path], exists, text):
                problems.append(f"{conv.path}: approved, ran {runs[conv.path]} times, file exists={exists}; {conv.replies}")
            if conv.decision == "deny" and (runs[conv.path] != 0 or not exists):
                problems.append(f"{conv.path}: denied, ran {runs[conv.path]} times, file exists={exists}; {conv.replies}")
            if conv.decision is None:
                problems.append(f"{conv.path}: never decided")
        assert not problems, "\n".join(problems)


def _ran_once_or_said_unknown(runs: int, exists: bool, final_reply: str) -> bool:
    """An approved call ran exactly once, or -- killed between its durable claim and the tool call -- it never ran
    and the final reply says its outcome is unknown (at most once, never silently). Never twice, never a lie."""
    if runs == 1:
        return not exists
    return runs == 0 and exists and "whether it took effect is unknown" in final_reply


def pause(rpc: Rpc, tools: Tools, path: str) -> Conversation:
    """A new conversation paused on ``delete <path>`` (the file is created first)."""
    (tools.sandbox / path).write_text(path)
    task = rpc.send(f"delete {path}")["task"]
    assert state(task) == PAUSED, status_text(task)
    return Conversation(path, task)
