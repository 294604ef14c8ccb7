"""A gated call nobody decides: the runtime's timeout denies it, and the real model is told why the call did not
run. Its own runtime, as the Agent's ``approval.timeout`` is short here (3 s)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from tests.e2e_llm.conftest import start_runtime
from tests.e2e_llm.llama import LlamaServer
from tests.support.runtime import Rpc, RuntimeProcess, Tools, interrupt, state, status_text, wait_for

pytestmark = [pytest.mark.e2e_llm, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory, tools: Tools, llm: LlamaServer) -> Iterator[RuntimeProcess]:
    proc = start_runtime(tmp_path_factory.mktemp("runtime-timeout"), tools, llm, timeout="3s", onTimeout="deny")
    try:
        yield proc
    finally:
        proc.stop()


def test_undecided_call_times_out_and_the_reply_says_it_did_not_run(rpc: Rpc, tools: Tools) -> None:
    """Tolerates any wording about time (timed out, timeout, no decision in time); the file must stay, and the
    approval must be recorded as expired, not as a human's denial."""
    task = rpc.send("delete old.txt")["task"]
    assert state(task) == "TASK_STATE_INPUT_REQUIRED", status_text(task) or task
    (request,) = interrupt(task)["action_requests"]
    assert request["name"] == "delete_file"
    # the sweeper resolves it server-side and runs the model's next turn: allow for a slow model turn
    done = wait_for(lambda: (t := rpc.get_task(task["id"])) and state(t) == "TASK_STATE_COMPLETED" and t, timeout=600,
                    interval=0.5)
    reply = status_text(done)
    assert (tools.sandbox / "old.txt").exists() and not tools.executions("delete_file")
    assert re.search(r"time|no decision", reply, re.I), reply
    (approval,) = [a for a in rpc.client.get("/approvals", params={"state": "all"}).json()["approvals"]
                   if a["id"] == request["id"]]
    assert (approval["status"], approval["source"]) == ("expired", "timeout"), approval
