"""Server-side resumption, end to end: approval timeouts (onTimeout deny and approve) resolved by the
sweeper with no client connected, and a ``kill -9`` with an approval pending followed by a restart."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_runtime.contract import wire
from tests.support.runtime import Rpc, demo_tools, runtime, state, status_text, wait_for

pytestmark = pytest.mark.e2e


def _history_texts(task: dict) -> str:
    return "\n".join(p.get("text", "") for m in task.get("history", []) for p in m["parts"])


@pytest.mark.parametrize("on_timeout", ["deny", "approve"])
def test_timeout_is_resolved_server_side(tmp_path: Path, on_timeout: str) -> None:
    with demo_tools(tmp_path / "tools") as tools, runtime(tmp_path / "rt", tools, timeout="1s", onTimeout=on_timeout) as proc:
        rpc = Rpc(proc.url)
        target = tools.sandbox / "slow.txt"
        target.write_text("x")
        task = rpc.send("delete slow.txt")["task"]
        assert state(task) == "TASK_STATE_INPUT_REQUIRED"
        # No client request from here on: the sweeper decides.
        done = wait_for(lambda: (t := rpc.get_task(task["id"])) and state(t) == "TASK_STATE_COMPLETED" and t, timeout=15)
        text = status_text(done)
        assert "timeout" in text and "denied by the user" not in text and "rejected by the user" not in text
        assert "Timeout: no decision on" in _history_texts(done)  # the sweeper's decision, in the audit trail
        if on_timeout == "deny":
            assert "timeout: no decision within 1s; the call was not run" in text
            assert target.exists() and tools.executions("delete_file", "slow.txt") == []
        else:
            assert "the call ran" in text
            assert not target.exists() and len(tools.executions("delete_file", "slow.txt")) == 1
        assert rpc.metric("gatehouse_decisions_total", outcome="timeout" if on_timeout == "deny" else "approved",
                          source="timeout") == 1
        # A late decision changes nothing.
        late = rpc.send_finished("approve", task=task)
        assert late.startswith("Already decided:")
        assert len(tools.executions("delete_file", "slow.txt")) == (0 if on_timeout == "deny" else 1)


def test_kill_9_with_a_pending_approval_then_approve_runs_once(tmp_path: Path) -> None:
    with demo_tools(tmp_path / "tools") as tools, runtime(tmp_path / "rt", tools) as proc:
        rpc = Rpc(proc.url)
        target = tools.sandbox / "survivor.txt"
        target.write_text("x")
        task = rpc.send("delete survivor.txt")["task"]
        assert state(task) == "TASK_STATE_INPUT_REQUIRED"
        proc.kill9()
        proc.start()
        again = rpc.get_task(task["id"])
        assert state(again) == "TASK_STATE_INPUT_REQUIRED"
        assert again["status"]["message"]["parts"][1]["data"] == task["status"]["message"]["parts"][1]["data"]
        assert rpc.metric("gatehouse_pending_approvals") == 1
        done = rpc.send(data=wire.approve_all(), task=task)["task"]
        assert state(done) == "TASK_STATE_COMPLETED" and "Delete of survivor.txt" in status_text(done)
        assert not target.exists()
        assert len(tools.executions("delete_file", "survivor.txt")) == 1
        # A replay of the decision: still exactly once.
        assert rpc.send_finished("approve", task=task).startswith("Already decided:")
        assert len(tools.executions("delete_file", "survivor.txt")) == 1
