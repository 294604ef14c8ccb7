"""Two runtime replicas sharing one Postgres database: a pause made on one is decided on the other, a
replay on either runs nothing, and a replica killed with an approval pending loses nothing.

The Postgres server is started by the test set-up (:mod:`tests.support.postgres`: a throwaway server from
Debian's ``postgresql`` binaries, one fresh database per test); ``GATEHOUSE_TEST_POSTGRES_URL``, e.g.
``postgresql+asyncpg://user@127.0.0.1:5432/gatehouse``, points the tests at an existing one instead.
"""

from __future__ import annotations

import pytest

from agent_runtime.contract import wire
from tests.support.runtime import Rpc, RuntimeProcess, Tools, state, status_text

pytestmark = pytest.mark.e2e




def test_paused_on_one_replica_decided_on_the_other(replicas: tuple[Tools, RuntimeProcess, RuntimeProcess]) -> None:
    tools, a, b = replicas
    (tools.sandbox / "shared.txt").write_text("x")
    task = Rpc(a.url).send("delete shared.txt")["task"]
    assert state(task) == "TASK_STATE_INPUT_REQUIRED"
    done = Rpc(b.url).send(data=wire.approve_all(), task=task)["task"]
    assert state(done) == "TASK_STATE_COMPLETED" and "Delete of shared.txt" in status_text(done)
    replay = Rpc(a.url).send_finished("approve", task=task)
    assert replay.startswith("Already decided:")
    assert status_text(Rpc(a.url).get_task(task["id"])) == status_text(done)  # the finished task is untouched
    assert len(tools.executions("delete_file", "shared.txt")) == 1


def test_a_replica_killed_with_a_pending_approval(replicas: tuple[Tools, RuntimeProcess, RuntimeProcess]) -> None:
    tools, a, b = replicas
    (tools.sandbox / "orphan.txt").write_text("x")
    task = Rpc(a.url).send("delete orphan.txt")["task"]
    a.kill9()
    assert state(Rpc(b.url).get_task(task["id"])) == "TASK_STATE_INPUT_REQUIRED"
    done = Rpc(b.url).send(data=wire.deny_all("not today"), task=task)["task"]
    assert "rejected by the user: not today" in status_text(done)
    assert (tools.sandbox / "orphan.txt").exists() and tools.executions("delete_file", "orphan.txt") == []
