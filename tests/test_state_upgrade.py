"""A state directory written by the previous release (tests/testdata/state-v1, see its README) under this runtime.

The old release paused one ``delete_file`` call over A2A in local mode; tasks had no owner then, requests no
requester and no approvers. This runtime upgrades the file to state version 2 at start-up and gives what was
pending to one principal: ``anonymous`` in local mode (the same caller as before), else the configured
``access.unowned_tasks_owner``, else a name nobody authenticates as (the task is readable by nobody, while its
request can still be decided over REST and the runtime resumes it for its owner).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import uuid
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_runtime import wire
from agent_runtime.agent_config import AgentConfig
from agent_runtime.manifests import select_agent_config
from agent_runtime.rest.models import ApprovalList, DecisionResult
from tests.support.runtime import (
    Rpc,
    RuntimeProcess,
    Tools,
    demo_tools,
    request_ids,
    state,
    status_text,
    wait_for,
    write_manifests,
)

pytestmark = pytest.mark.e2e

STATE_V1 = Path(__file__).parent / "testdata" / "state-v1" / "gatehouse.db"
TASK_ID = "54ab4ad6-5b92-45f6-9e0d-084777b91336"
CONTEXT_ID = "a577c84e-1b4a-41c5-a26b-ace6cb557a93"
REQUEST_ID = "apr-82231f7089514ac3"
PATH = "old-report.txt"


def query(db: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(db)) as conn:
        return conn.execute(sql, params).fetchall()


def test_the_fixture_is_a_version_1_state_with_one_pending_call() -> None:
    """What the other tests start from (guards against the fixture being rewritten by a run of the new runtime)."""
    assert STATE_V1.stat().st_size < 1 << 20
    tables = {name for (name,) in query(STATE_V1, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "gatehouse_schema" not in tables and "gatehouse_approval_votes" not in tables
    columns = {row[1] for row in query(STATE_V1, "PRAGMA table_info(gatehouse_approvals)")}
    assert "requested_by" not in columns and "approvers_json" not in columns
    assert query(STATE_V1, "SELECT id, task_id, tool, args_json, status FROM gatehouse_approvals") == [
        (REQUEST_ID, TASK_ID, "delete_file", json.dumps({"path": PATH}), "pending")]
    assert query(STATE_V1, "SELECT id, owner FROM tasks") == [(TASK_ID, "")]


@contextmanager
def upgraded_runtime(
    base: Path, serve_args: Sequence[str] = (), **access: Any
) -> Iterator[tuple[RuntimeProcess, Tools, Path]]:
    """This runtime on a copy of the old state directory, the demo tools' sandbox holding the file to delete; the
    example agent, with ``access`` fields when given (then as a config.json)."""
    state_dir = base / "state"
    state_dir.mkdir(parents=True)
    db = state_dir / "gatehouse.db"
    shutil.copyfile(STATE_V1, db)
    with demo_tools(base / "tools") as tools:
        (tools.sandbox / PATH).write_text("written before the upgrade\n")
        manifests = write_manifests(base / "manifests", tools.url)
        config_args: list[str] = []
        if access:
            config = select_agent_config(manifests).model_dump()
            config["access"].update(access)
            (base / "config.json").write_text(AgentConfig.model_validate(config).to_json())
            manifests, config_args = [], ["--config", str(base / "config.json")]
        proc = RuntimeProcess(manifests, state_dir, base / "runtime.log", config_args, serve_args)
        proc.start()
        try:
            yield proc, tools, db
        finally:
            proc.stop()


def assert_upgraded(db: Path, owner: str) -> None:
    assert query(db, "SELECT component, version FROM gatehouse_schema") == [("runtime", 2)]
    assert query(db, "SELECT owner FROM tasks WHERE id = ?", TASK_ID) == [(owner,)]
    assert query(db, "SELECT requested_by, approvers_json FROM gatehouse_approvals") == [(owner, None)]
    assert query(db, "SELECT DISTINCT user_id FROM gatehouse_sessions") == [(owner,)]


def test_local_mode_the_old_task_is_the_anonymous_callers_and_resumes_once(tmp_path: Path) -> None:
    with upgraded_runtime(tmp_path) as (proc, tools, db):
        rpc = Rpc(proc.url)
        task = rpc.get_task(TASK_ID)
        assert state(task) == "TASK_STATE_INPUT_REQUIRED" and task["contextId"] == CONTEXT_ID
        assert request_ids(task) == [REQUEST_ID] and f"delete_file(path='{PATH}')" in status_text(task)
        assert TASK_ID in [t["id"] for t in rpc.call("ListTasks", {})["result"]["tasks"]]
        (view,) = ApprovalList.model_validate_json(httpx.get(f"{proc.url}/approvals").content).approvals
        assert (view.id, view.status, view.requested_by, view.approvers) == (REQUEST_ID, "pending", "anonymous", None)
        assert not tools.executions("delete_file", PATH)
        done = rpc.send(data=wire.approve_all(), task=task)["task"]
        assert state(done) == "TASK_STATE_COMPLETED" and f"Delete of {PATH}" in status_text(done), done
        assert done["status"]["message"]["metadata"]["decisions"][REQUEST_ID]["outcome"] == "approved"
        again = rpc.call("SendMessage", {"message": {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "taskId": TASK_ID,
                                                    "contextId": CONTEXT_ID, "parts": [{"data": wire.approve_all()}]}})
        (text,) = [part["text"] for part in again["result"]["message"]["parts"]]
        assert text.startswith(f"Already decided: {REQUEST_ID} (delete_file) was approved by a2a")
        assert text.endswith("Nothing was run again.")
        assert len(tools.executions("delete_file", PATH)) == 1 and not (tools.sandbox / PATH).exists()
        assert_upgraded(db, "anonymous")


def test_with_tokens_the_old_task_is_nobodys_but_its_request_can_still_be_decided(tmp_path: Path) -> None:
    (tmp_path / "tokens").write_text("alice:groups=sre:tok-alice\n")
    with upgraded_runtime(tmp_path, ["--api-token-file", str(tmp_path / "tokens")]) as (proc, tools, db):
        alice = Rpc(proc.url, "tok-alice")
        # The task has no owner anybody authenticates as: not alice's to read or to list, and anonymous gets 401.
        missing = alice.call("GetTask", {"id": TASK_ID})
        assert missing.get("error", {}).get("message") == "Task not found", missing
        assert TASK_ID not in json.dumps(alice.call("ListTasks", {}))
        assert httpx.post(f"{proc.url}/", json={"jsonrpc": "2.0", "id": "1", "method": "GetTask",
                                                "params": {"id": TASK_ID}}).status_code == 401
        into = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "taskId": TASK_ID, "contextId": CONTEXT_ID,
                "parts": [{"data": wire.approve_all()}]}
        assert "TASK_NOT_FOUND" in json.dumps(alice.call("SendMessage", {"message": into})["error"])
        # Its request has no approvers block, so any authenticated user sees it on REST and may decide it.
        rest = httpx.Client(base_url=proc.url, headers={"Authorization": "Bearer tok-alice"}, timeout=60)
        (view,) = ApprovalList.model_validate_json(rest.get("/approvals").content).approvals
        assert (view.id, view.task_id, view.tool, view.args, view.status) == (REQUEST_ID, TASK_ID, "delete_file",
                                                                               {"path": PATH}, "pending")
        assert view.approvers is None and view.requested_by == "gatehouse:unowned"
        assert not tools.executions("delete_file", PATH)
        reply = rest.post(f"/approvals/{REQUEST_ID}/decision", json={"decision": "approve", "reason": "old but fine"},
                          headers={"Idempotency-Key": str(uuid.uuid4())})
        assert reply.status_code == 200, reply.text
        decided = DecisionResult.model_validate_json(reply.content).approval
        assert (decided.status, decided.decided_by, decided.reason) == ("approved", "alice", "old but fine")
        # The runtime resumes the task for its owner: the call runs, once.
        wait_for(lambda: tools.executions("delete_file", PATH), 60)
        wait_for(lambda: "COMPLETED" in str(query(db, "SELECT status FROM tasks WHERE id = ?", TASK_ID)), 30)
        assert len(tools.executions("delete_file", PATH)) == 1 and not (tools.sandbox / PATH).exists()
        assert TASK_ID not in json.dumps(alice.call("ListTasks", {}))  # still nobody's to read
    (status,) = query(db, "SELECT status FROM tasks WHERE id = ?", TASK_ID)[0]
    assert json.loads(status)["state"] == "TASK_STATE_COMPLETED" and f"Delete of {PATH}" in status
    assert_upgraded(db, "gatehouse:unowned")
    votes = query(db, "SELECT principal, ballot, channel, counted FROM gatehouse_approval_votes")
    assert votes == [("alice", "approve", "rest", 1)]


def test_with_tokens_and_an_owner_for_old_tasks_the_old_task_is_that_principals(tmp_path: Path) -> None:
    """``access.unowned_tasks_owner`` names the principal (an alias counts: it is resolved through the identities)."""
    (tmp_path / "tokens").write_text("alice:tok-alice\nbob:tok-bob\n")
    with upgraded_runtime(tmp_path, ["--api-token-file", str(tmp_path / "tokens")], unowned_tasks_owner="al",
                          identities=[{"principal": "alice", "aliases": ["al"]}]) as (proc, tools, db):
        alice, bob = Rpc(proc.url, "tok-alice"), Rpc(proc.url, "tok-bob")
        assert bob.call("GetTask", {"id": TASK_ID}).get("error", {}).get("message") == "Task not found"
        task = alice.get_task(TASK_ID)
        assert state(task) == "TASK_STATE_INPUT_REQUIRED" and request_ids(task) == [REQUEST_ID]
        assert [t["id"] for t in alice.call("ListTasks", {})["result"]["tasks"]] == [TASK_ID]
        done = alice.send(data=wire.approve_all(), task=task)["task"]
        assert state(done) == "TASK_STATE_COMPLETED" and f"Delete of {PATH}" in status_text(done), done
        assert len(tools.executions("delete_file", PATH)) == 1 and not (tools.sandbox / PATH).exists()
    assert_upgraded(db, "alice")
