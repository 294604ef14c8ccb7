"""State directories written by older releases (tests/testdata/state-v1 to state-v4 and state-v4-executions, see their
READMEs) under this runtime, which upgrades them to the current state version at start-up.

Requests stored with no approvers (every version, and version 4's release meant "any authenticated caller decides" by
it) follow this release's rule: the requester decides alone; nobody else sees them on REST or decides them.

Version 1: the old release paused one ``delete_file`` call over A2A in local mode; tasks had no owner then, requests no
requester and no approvers. This runtime gives what was pending to one principal: ``anonymous`` in local mode (the
same caller as before), else the configured ``access.unowned_tasks_owner``, else a name nobody authenticates as (the
task is readable by nobody, and its request, which has no approvers, is decided by nobody: it waits for its timeout).

Version 2: alice decided one call over REST with an ``Idempotency-Key`` (then keys had no owner) and left another
pending. Keys are now the principal's own: the old one answers nobody (not bob, who re-sends it with alice's body,
nor alice: a retry across the upgrade is handled afresh, "Already decided"), and a key bob and alice both use is two
keys.
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
from typer.testing import CliRunner

from agent_runtime.approvals.schema import SCHEMA_VERSION
from agent_runtime.clients import a2a_client
from agent_runtime.clients.cli import app as cli_app
from agent_runtime.contract import wire
from agent_runtime.contract.agent_config import AgentConfig
from agent_runtime.contract.manifests import select_agent_config
from agent_runtime.rest.models import ApprovalList, DecisionResult
from tests.support.runtime import (
    Rpc,
    RuntimeProcess,
    Tools,
    demo_tools,
    finished_explanation,
    request_ids,
    state,
    status_text,
    wait_for,
    write_manifests,
)

pytestmark = pytest.mark.e2e

STATE_V1 = Path(__file__).parents[1] / "testdata" / "state-v1" / "gatehouse.db"
TASK_ID = "54ab4ad6-5b92-45f6-9e0d-084777b91336"
CONTEXT_ID = "a577c84e-1b4a-41c5-a26b-ace6cb557a93"
REQUEST_ID = "apr-82231f7089514ac3"
PATH = "old-report.txt"
STATE_V2 = Path(__file__).parents[1] / "testdata" / "state-v2" / "gatehouse.db"
V2_DECIDED, V2_DECIDED_TASK = "apr-4ddfae9eced84625", "b00644a7-ffd7-4681-ac20-f6bb54ec5892"
V2_PENDING, V2_PENDING_TASK = "apr-6de9226d2ed94d2a", "60e4ee63-d034-41d1-8279-c3d007071bfd"
V2_KEY, V2_BODY = "retry-me", {"decision": "approve", "reason": "fine"}


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
    base: Path, serve_args: Sequence[str] = (), state: Path = STATE_V1, path: str = PATH,
    approvers: dict[str, Any] | None = None, **access: Any,
) -> Iterator[tuple[RuntimeProcess, Tools, Path]]:
    """This runtime on a copy of an old state directory (``state``), the demo tools' sandbox holding the file to
    delete (``path``); the example agent, with ``approvers`` and ``access`` fields when given (then as a config.json)."""
    state_dir = base / "state"
    state_dir.mkdir(parents=True)
    db = state_dir / "gatehouse.db"
    shutil.copyfile(state, db)
    with demo_tools(base / "tools") as tools:
        (tools.sandbox / path).write_text("written before the upgrade\n")
        manifests = write_manifests(base / "manifests", tools.url, **({"approvers": approvers} if approvers else {}))
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
    assert query(db, "SELECT component, version FROM gatehouse_schema") == [("runtime", SCHEMA_VERSION)]
    assert query(db, "SELECT owner FROM tasks WHERE id = ?", TASK_ID) == [(owner,)]
    assert "principal" in {row[1] for row in query(db, "PRAGMA table_info(gatehouse_idempotency_keys)")}
    # redact_json NULL: an old request's arguments are shown with the built-in secret shapes redacted
    assert query(db, "SELECT requested_by, approvers_json, redact_json FROM gatehouse_approvals") == [(owner, None, None)]
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
        assert again["error"]["code"] == -32004, again  # a message to a finished task
        text = finished_explanation(again["error"])
        assert text.startswith(f"Already decided: {REQUEST_ID} (delete_file) was approved by a2a")
        assert text.endswith("Nothing was run again.")
        assert len(tools.executions("delete_file", PATH)) == 1 and not (tools.sandbox / PATH).exists()
        assert_upgraded(db, "anonymous")


def test_with_tokens_the_old_task_is_nobodys_and_so_is_its_request(tmp_path: Path) -> None:
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
        # Its request has no approvers block, so only its requester decides it, and nobody authenticates as that: alice
        # neither sees it on REST nor decides it (her vote is recorded, refused); it waits for its timeout.
        rest = httpx.Client(base_url=proc.url, headers={"Authorization": "Bearer tok-alice"}, timeout=60)
        assert ApprovalList.model_validate_json(rest.get("/approvals").content).approvals == []
        reply = rest.post(f"/approvals/{REQUEST_ID}/decision", json={"decision": "approve", "reason": "old but fine"},
                          headers={"Idempotency-Key": str(uuid.uuid4())})
        assert reply.status_code == 404, reply.text
        assert not tools.executions("delete_file", PATH)
    (status,) = query(db, "SELECT status FROM tasks WHERE id = ?", TASK_ID)[0]
    assert json.loads(status)["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert query(db, "SELECT status FROM gatehouse_approvals") == [("pending",)]
    assert_upgraded(db, "gatehouse:unowned")
    votes = query(db, "SELECT principal, ballot, channel, counted, note FROM gatehouse_approval_votes")
    assert votes == [("alice", "approve", "rest", 0, "alice may not decide this request: it has no approvers, so only its "
                                                       "requester gatehouse:unowned decides it")]


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


def test_the_v2_fixture_has_a_key_without_a_principal_and_one_pending_call() -> None:
    assert query(STATE_V2, "SELECT component, version FROM gatehouse_schema") == [("runtime", 2)]
    assert "principal" not in {row[1] for row in query(STATE_V2, "PRAGMA table_info(gatehouse_idempotency_keys)")}
    assert query(STATE_V2, "SELECT key, request_id, status_code FROM gatehouse_idempotency_keys") == [(V2_KEY, V2_DECIDED, 200)]
    assert query(STATE_V2, "SELECT id, task_id, status, requested_by FROM gatehouse_approvals ORDER BY created_at") == [
        (V2_DECIDED, V2_DECIDED_TASK, "approved", "alice"), (V2_PENDING, V2_PENDING_TASK, "pending", "alice")]


def test_v2_keys_become_their_principals_and_the_old_one_answers_nobody(tmp_path: Path) -> None:
    (tmp_path / "tokens").write_text("alice:tok-alice\nbob:tok-bob\n")
    serve = ["--api-token-file", str(tmp_path / "tokens")]
    with upgraded_runtime(tmp_path, serve, state=STATE_V2, path="pending.txt") as (proc, tools, db):
        alice, bob = (httpx.Client(base_url=proc.url, headers={"Authorization": f"Bearer tok-{who}"}, timeout=60)
                      for who in ("alice", "bob"))

        def decide(client: httpx.Client, request_id: str, key: str, body: dict[str, str] = V2_BODY) -> httpx.Response:
            return client.post(f"/approvals/{request_id}/decision", json=body, headers={"Idempotency-Key": key})

        assert query(db, "SELECT component, version FROM gatehouse_schema") == [("runtime", SCHEMA_VERSION)]
        assert query(db, "SELECT principal FROM gatehouse_idempotency_keys WHERE key = ?", V2_KEY) in ([("",)], [])
        # Bob re-sends alice's key and body: his own first use of the key, not alice's 200 (and alice's request, with no
        # approvers, is not his to see).
        replayed = decide(bob, V2_DECIDED, V2_KEY)
        assert replayed.status_code == 404, replayed.text
        # Nor does the key written before the upgrade answer alice: handled afresh, the request is decided already.
        assert decide(alice, V2_DECIDED, V2_KEY).status_code == 409
        # A key bob and alice both use on the pending request: two keys, two answers. The request has no approvers: it
        # is alice's alone to see and decide.
        assert ApprovalList.model_validate_json(bob.get("/approvals").content).approvals == []
        assert decide(bob, V2_PENDING, "shared-key").status_code == 404
        (view,) = ApprovalList.model_validate_json(alice.get("/approvals").content).approvals
        assert (view.id, view.status, view.requested_by) == (V2_PENDING, "pending", "alice")
        first = decide(alice, V2_PENDING, "shared-key")
        assert first.status_code == 200 and DecisionResult.model_validate_json(first.content).approval.decided_by == "alice"
        again = decide(alice, V2_PENDING, "shared-key")
        assert (again.status_code, again.text) == (200, first.text)
        late = decide(bob, V2_PENDING, "shared-key")
        assert late.status_code == 404, late.text
        wait_for(lambda: tools.executions("delete_file", "pending.txt"), 60)
        wait_for(lambda: "COMPLETED" in str(query(db, "SELECT status FROM tasks WHERE id = ?", V2_PENDING_TASK)), 30)
        assert len(tools.executions("delete_file", "pending.txt")) == 1
    keys = query(db, "SELECT principal, request_id, status_code FROM gatehouse_idempotency_keys WHERE principal != '' "
                     "ORDER BY created_at")
    assert keys == [("alice", V2_DECIDED, 409), ("alice", V2_PENDING, 200)]  # a 404 stores no key


# Version 3 (tests/testdata/state-v3, written by the release at b0756a4): alice decided a delete over REST (one vote, one
# decider) and left a write_file call pending; what later versions add must not lose it.
STATE_V3 = Path(__file__).parents[1] / "testdata" / "state-v3" / "gatehouse.db"
V3_DECIDED, V3_DECIDED_TASK = "apr-435ebfc95a3b417f", "baed4493-a818-4f68-9880-f86e326faace"
V3_PENDING, V3_PENDING_TASK = "apr-913c63857d474e47", "020a4826-5c3e-4915-9a4b-81e61e9367ee"
V3_PENDING_CONTEXT = "bb6c4ef1-7070-4103-840b-aa49640ad3d9"
V3_PATH, V3_CONTENT = "draft.txt", "hello"


def test_the_v3_fixture_is_a_version_3_state_with_one_pending_write() -> None:
    assert query(STATE_V3, "SELECT component, version FROM gatehouse_schema") == [("runtime", 3)]
    columns = {row[1] for row in query(STATE_V3, "PRAGMA table_info(gatehouse_approvals)")}
    assert "original_args_json" not in columns and "edited_by" not in columns
    assert {"requested_by", "approvers_json", "redact_json"} <= columns
    assert query(STATE_V3, "SELECT id, task_id, tool, args_json, status, requested_by FROM gatehouse_approvals "
                           "ORDER BY created_at") == [
        (V3_DECIDED, V3_DECIDED_TASK, "delete_file", json.dumps({"path": "decided.txt"}), "approved", "alice"),
        (V3_PENDING, V3_PENDING_TASK, "write_file", json.dumps({"content": V3_CONTENT, "path": V3_PATH}), "pending",
         "alice")]
    assert query(STATE_V3, "SELECT context_id FROM gatehouse_approvals WHERE id = ?", V3_PENDING) == [(V3_PENDING_CONTEXT,)]
    assert query(STATE_V3, "SELECT request_id, principal, ballot, channel, counted FROM gatehouse_approval_votes") == [
        (V3_DECIDED, "alice", "approve", "rest", 1)]
    assert query(STATE_V3, "SELECT request_id, decided_by FROM gatehouse_approval_deciders") == [(V3_DECIDED, "alice")]
    assert query(STATE_V3, "SELECT principal, request_id, status_code FROM gatehouse_idempotency_keys") == [
        ("alice", V3_DECIDED, 200)]
    tasks = dict(query(STATE_V3, "SELECT id, status FROM tasks WHERE owner = 'alice'"))
    assert json.loads(tasks[V3_DECIDED_TASK])["state"] == "TASK_STATE_COMPLETED"
    assert json.loads(tasks[V3_PENDING_TASK])["state"] == "TASK_STATE_INPUT_REQUIRED" and len(tasks) == 2


def test_v3_the_pending_write_is_still_listed_and_alices_approval_runs_it_once(tmp_path: Path) -> None:
    (tmp_path / "tokens").write_text("alice:tok-alice\nbob:tok-bob\n")
    serve = ["--api-token-file", str(tmp_path / "tokens")]
    # The sandbox holds an older draft.txt: the approved call overwrites it with "hello".
    with upgraded_runtime(tmp_path, serve, state=STATE_V3, path=V3_PATH) as (proc, tools, db):
        assert query(db, "SELECT component, version FROM gatehouse_schema") == [("runtime", SCHEMA_VERSION)]
        # tables added whole since (no state-version step) are created on opening: tools' questions, sub-agents' pauses
        assert query(db, "SELECT count(*) FROM gatehouse_elicitations") == [(0,)]
        assert query(db, "SELECT count(*) FROM gatehouse_delegations") == [(0,)]
        # and the listing index (REST pages newest first without sorting every pending request), added to the old table
        assert query(db, "SELECT name FROM sqlite_master WHERE type = 'index' AND name = 'ix_gatehouse_approvals_listing'") \
            == [("ix_gatehouse_approvals_listing",)]
        rest = httpx.Client(base_url=proc.url, headers={"Authorization": "Bearer tok-alice"}, timeout=60)
        alice = Rpc(proc.url, "tok-alice")
        (view,) = ApprovalList.model_validate_json(rest.get("/approvals").content).approvals
        assert (view.id, view.task_id, view.context_id, view.tool, view.args, view.status, view.requested_by) == (
            V3_PENDING, V3_PENDING_TASK, V3_PENDING_CONTEXT, "write_file", {"content": V3_CONTENT, "path": V3_PATH},
            "pending", "alice")
        task = alice.get_task(V3_PENDING_TASK)
        assert state(task) == "TASK_STATE_INPUT_REQUIRED" and request_ids(task) == [V3_PENDING]
        assert not tools.executions("write_file")
        assert (tools.sandbox / V3_PATH).read_text() == "written before the upgrade\n"
        reply = rest.post(f"/approvals/{V3_PENDING}/decision", json={"decision": "approve", "reason": "after the upgrade"},
                          headers={"Idempotency-Key": str(uuid.uuid4())})
        assert reply.status_code == 200, reply.text
        decided = DecisionResult.model_validate_json(reply.content).approval
        assert (decided.id, decided.status, decided.decided_by) == (V3_PENDING, "approved", "alice")
        wait_for(lambda: state(alice.get_task(V3_PENDING_TASK)) == "TASK_STATE_COMPLETED", 60)
        done = alice.get_task(V3_PENDING_TASK)
        assert f"Write of {V3_PATH}: wrote {len(V3_CONTENT)} bytes" in status_text(done), done
        again = rest.post(f"/approvals/{V3_PENDING}/decision", json={"decision": "approve"},
                          headers={"Idempotency-Key": str(uuid.uuid4())})
        assert again.status_code == 409 and "Already decided" in again.json()["error"], again.text
        (ran,) = tools.executions("write_file")
        assert ran["args"] == {"path": V3_PATH, "content": V3_CONTENT} and ran["ok"], ran
        assert (tools.sandbox / V3_PATH).read_text() == V3_CONTENT
        assert not tools.executions("delete_file")  # the request decided before the upgrade is not run again
    assert query(db, "SELECT component, version FROM gatehouse_schema") == [("runtime", SCHEMA_VERSION)]
    assert query(db, "SELECT id, status FROM gatehouse_approvals ORDER BY created_at") == [
        (V3_DECIDED, "approved"), (V3_PENDING, "approved")]
    votes = query(db, "SELECT request_id, principal, ballot, channel, counted FROM gatehouse_approval_votes ORDER BY id")
    assert votes == [(V3_DECIDED, "alice", "approve", "rest", 1), (V3_PENDING, "alice", "approve", "rest", 1)]


# Version 4 (tests/testdata/state-v4, written by the release at 2e84f81, before issue 31): alice paused a delete; the
# request is stored with no approvers, which then meant "any authenticated caller may decide" on REST and kubectl (bob
# saw it in GET /approvals). The rule of this release applies to it: no approvers, the requester decides alone.
STATE_V4 = Path(__file__).parents[1] / "testdata" / "state-v4" / "gatehouse.db"
V4_PENDING, V4_TASK, V4_PATH = "apr-27d51f54aaf34d87", "c6b537b9-1f38-4096-88ff-c69a181172df", "kept.txt"


async def test_v3_a_reply_stored_in_the_status_message_still_reads_next_to_one_returned_as_the_artifact(
    tmp_path: Path,
) -> None:
    """Releases before issue 37 stored a completed turn's reply in the final status message, with no artifact; this
    one returns it as the task's artifact. A client reads either as the reply (a2a_client, so gatehouse chat)."""
    (tmp_path / "tokens").write_text("alice:tok-alice\n")
    with upgraded_runtime(tmp_path, ["--api-token-file", str(tmp_path / "tokens")], state=STATE_V3, path=V3_PATH) \
            as (proc, _tools, _db):
        old = Rpc(proc.url, "tok-alice").get_task(V3_DECIDED_TASK)
        assert not old.get("artifacts") and status_text(old) == "Delete of decided.txt: deleted /decided.txt"
        async with a2a_client.connect(proc.url, token="tok-alice") as client:
            read = await a2a_client.get_task(client, V3_DECIDED_TASK)
            paused = await a2a_client.get_task(client, V3_PENDING_TASK)
            assert paused.pending and paused.interrupt is not None and paused.context_id
            done = await a2a_client.send_decision(client, wire.approve_all(), task_id=V3_PENDING_TASK,
                                                  context_id=paused.context_id)
        assert read.state == "completed" and read.text == "Delete of decided.txt: deleted /decided.txt"
        assert done.state == "completed" and done.text.startswith(f"Write of {V3_PATH}: wrote") and done.status_text == ""
        assert [a["name"] for a in Rpc(proc.url, "tok-alice").get_task(V3_PENDING_TASK)["artifacts"]] == ["reply"]


def test_the_v4_fixture_holds_alices_pending_call_with_no_approvers() -> None:
    assert query(STATE_V4, "SELECT component, version FROM gatehouse_schema") == [("runtime", 4)]
    assert query(STATE_V4, "SELECT id, task_id, status, requested_by, approvers_json FROM gatehouse_approvals") == [
        (V4_PENDING, V4_TASK, "pending", "alice", None)]


def test_a_request_paused_before_issue_31_with_no_approvers_is_decided_by_its_requester_alone(tmp_path: Path) -> None:
    (tmp_path / "tokens").write_text("alice:tok-alice\nbob:groups=sre:tok-bob\n")
    serve = ["--api-token-file", str(tmp_path / "tokens")]
    with upgraded_runtime(tmp_path, serve, state=STATE_V4, path=V4_PATH, approvers={"groups": ["sre"]}) as (proc, tools, db):
        alice, bob = (httpx.Client(base_url=proc.url, headers={"Authorization": f"Bearer tok-{who}"}, timeout=60)
                      for who in ("alice", "bob"))

        def decide(client: httpx.Client) -> httpx.Response:
            return client.post(f"/approvals/{V4_PENDING}/decision", json={"decision": "approve"},
                               headers={"Idempotency-Key": str(uuid.uuid4())})

        # bob is in sre, whom the Agent names now, but the request keeps the approvers it paused with (none).
        assert ApprovalList.model_validate_json(bob.get("/approvals").content).approvals == []
        assert bob.get(f"/approvals/{V4_PENDING}").status_code == 404
        assert decide(bob).status_code == 404
        assert not tools.executions("delete_file", V4_PATH)
        reply = decide(alice)
        assert reply.status_code == 200, reply.text
        assert DecisionResult.model_validate_json(reply.content).approval.decided_by == "alice"
        wait_for(lambda: tools.executions("delete_file", V4_PATH), 60)
        assert len(tools.executions("delete_file", V4_PATH)) == 1
    votes = query(db, "SELECT principal, counted FROM gatehouse_approval_votes WHERE request_id = ? ORDER BY id", V4_PENDING)
    assert votes == [("bob", 0), ("alice", 1)]


# Version 4 again (tests/testdata/state-v4-executions, written by the release at 0cb125c): three approved delete_file
# calls; one ran, one failed (no such file), one was claimed and never finished (the runtime stopped while it ran).
# Version 5 says what became of each.
STATE_V4_EXEC = Path(__file__).parents[1] / "testdata" / "state-v4-executions" / "gatehouse.db"
V4_RAN, V4_FAILED, V4_CUT = "apr-ee4728cadc264916", "apr-99764e462acd4034", "apr-d3f027820c174b37"


def test_the_v4_executions_fixture_has_a_call_that_ran_one_that_failed_and_one_cut_short() -> None:
    assert query(STATE_V4_EXEC, "SELECT component, version FROM gatehouse_schema") == [("runtime", 4)]
    assert "exec_outcome" not in {row[1] for row in query(STATE_V4_EXEC, "PRAGMA table_info(gatehouse_approvals)")}
    assert query(STATE_V4_EXEC, "SELECT id, status, exec_state FROM gatehouse_approvals ORDER BY created_at") == [
        (V4_RAN, "approved", "done"), (V4_FAILED, "approved", "done"), (V4_CUT, "approved", "started")]
    executed = "SELECT request_id, outcome FROM gatehouse_audit_events WHERE event = 'executed' ORDER BY id"
    assert query(STATE_V4_EXEC, executed) == [(V4_RAN, "ok"), (V4_FAILED, "error")]


def test_v4_executions_calls_say_what_became_of_them_after_the_upgrade(tmp_path: Path) -> None:
    with upgraded_runtime(tmp_path, state=STATE_V4_EXEC, path="unused.txt") as (proc, _, db):
        listed = ApprovalList.model_validate_json(httpx.get(f"{proc.url}/approvals?state=approved").content).approvals
        said = {v.id: (v.execution.outcome, v.execution.error) if v.execution else None for v in listed}
    exported = CliRunner().invoke(cli_app, ["audit", "export", "--state-dir", str(db.parent), "--event", "executed"])
    assert exported.exit_code == 0, exported.output
    executed = {e["request_id"]: e["outcome"] for e in map(json.loads, exported.stdout.splitlines())}
    assert query(db, "SELECT component, version FROM gatehouse_schema") == [("runtime", SCHEMA_VERSION)]
    # the release before kept no error text: a failed call of then says failed, without why
    assert said == {V4_RAN: ("ran", ""), V4_FAILED: ("failed", ""), V4_CUT: ("unknown", "")}
    assert executed == {V4_RAN: "ran", V4_FAILED: "failed"}  # its audit events, ok and error then, in today's words
    assert query(db, "SELECT exec_state FROM gatehouse_approvals WHERE id = ?", V4_CUT) == [("started",)]  # never run again


# A gateway's state written by the release before the ``abandoned`` state (tests/testdata/gateway-state-v5, commit
# 92a9332): bob's client gave up on each of three held calls. The status column is a string: no migration is needed,
# and the current gateway abandons what that release left approved or pending with nobody waiting (docs/gateway.md).
GATEWAY_V5 = Path(__file__).parents[1] / "testdata" / "gateway-state-v5"
V5_APPROVED, V5_PENDING, V5_DENIED = "apr-382d7d39ae104cc6", "apr-b3a84008721b4868", "apr-135275c5cd6444dd"


def test_a_gateways_held_calls_nobody_waits_for_are_abandoned_after_the_upgrade(tmp_path: Path) -> None:
    import sys
    import time

    from tests.support.processes import GATEHOUSE_CMD, free_port, running

    (tmp_path / "state").mkdir()
    shutil.copy(GATEWAY_V5 / "gatehouse.db", tmp_path / "state" / "gatehouse.db")
    (tmp_path / "sandbox").mkdir()
    for name in ("old.txt", "pending.txt", "denied.txt"):
        (tmp_path / "sandbox" / name).write_text("x")
    (tmp_path / "tokens").write_text("alice:groups=sre:tok-alice\nbob:tok-bob\n")
    tools_port, port = free_port(), free_port()
    manifest = (GATEWAY_V5 / "gateway.yaml").read_text().replace("18766", str(tools_port))
    (tmp_path / "gateway.yaml").write_text(manifest)
    journal = tmp_path / "journal.jsonl"
    tools = [*GATEHOUSE_CMD, "demo-tools", "--sandbox", str(tmp_path / "sandbox"), "--port", str(tools_port),
             "--journal", str(journal)]
    gateway = [sys.executable, "-c", "from agent_runtime.clients.cli import runtime_main; runtime_main()", "gateway",
               "-f", str(tmp_path / "gateway.yaml"), "--port", str(port), "--api-token-file", str(tmp_path / "tokens"),
               "--state-dir", str(tmp_path / "state")]
    base = f"http://127.0.0.1:{port}"
    alice = {"Authorization": "Bearer tok-alice"}
    with running(tools, ready="demo-tools ready"), running(gateway, ready="gateway files-gate ready", timeout=60):
        def statuses() -> dict[str, str] | None:
            listed = httpx.get(f"{base}/approvals", params={"state": "all"}, headers=alice, timeout=10).json()
            found = {a["id"]: a["status"] for a in listed["approvals"]}
            return found if found.get(V5_APPROVED) == "abandoned" and found.get(V5_PENDING) == "abandoned" else None

        found = wait_for(statuses, 30)
        assert found == {V5_APPROVED: "abandoned", V5_PENDING: "abandoned", V5_DENIED: "denied"}
        shown = httpx.get(f"{base}/approvals/{V5_APPROVED}", headers=alice, timeout=10).json()
        assert "nobody waited" in shown["reason"] and shown["execution"] is None
        vote = httpx.post(f"{base}/approvals/{V5_PENDING}/decision", json={"decision": "approve"},
                          headers={**alice, "Idempotency-Key": f"k-{time.time()}"}, timeout=10)
        assert vote.status_code == 409 and "abandoned" in vote.text, vote.text
    assert not journal.exists() or journal.read_text() == ""  # nothing ran
    assert all((tmp_path / "sandbox" / n).exists() for n in ("old.txt", "pending.txt", "denied.txt"))
