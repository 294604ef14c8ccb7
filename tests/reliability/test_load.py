"""Loss under load: many concurrent conversations against one runtime on sqlite, each paused on a gated delete
and then approved, all at once. Nothing fails or goes missing, and every tool runs exactly once.

``make test``: 20 conversations; ``make soak``: ``GATEHOUSE_SOAK_CONVERSATIONS`` (60).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.reliability.soak import Conversation, Ledger, count, pause, send_decision
from tests.support.runtime import Rpc, RuntimeProcess, Tools, state, status_text

pytestmark = [pytest.mark.e2e, pytest.mark.soak]

CONVERSATIONS = count("GATEHOUSE_SOAK_CONVERSATIONS", 20)


def test_concurrent_conversations_none_lost_each_tool_once(served: tuple[Tools, RuntimeProcess]) -> None:
    tools, proc = served

    def start(i: int) -> Conversation:
        rpc = Rpc(proc.url)
        try:
            return pause(rpc, tools, f"load-{i}.txt")
        finally:
            rpc.client.close()

    with ThreadPoolExecutor(max_workers=CONVERSATIONS) as pool:
        convs = list(pool.map(start, range(CONVERSATIONS)))
        for conv in convs:
            conv.decision = "approve"
        results = list(pool.map(lambda c: send_decision(proc.url, c, timeout=300), convs))
    failed = [(c.path, r and status_text(r["task"])) for c, r in zip(convs, results, strict=True)
              if r is None or "task" not in r or state(r["task"]) != "TASK_STATE_COMPLETED"]
    assert failed == [], failed
    assert all(f"Delete of {c.path}: deleted" in c.replies[-1] for c in convs), [c.replies for c in convs]
    Ledger(tools).check(Rpc(proc.url), convs)
    print(f"load: {CONVERSATIONS} concurrent conversations, 0 failed or lost")
