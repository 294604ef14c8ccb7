"""Edit and approve over real HTTP: one runtime and the demo tools as processes, decisions over A2A and REST.

The Agent (manifests, through the translator): ``write_file`` calls are gated by a rule with ``allowEdit``; a deny
rule refuses writes of ``.env`` files; writes under ``prod/`` need a member of sre (bob); ``delete_file`` is in
``editableTools``; reading a ``.env`` file is gated but not editable. Alice (no group) asks for every call.
"""

from __future__ import annotations

import secrets
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_runtime.approvals import args_hash
from agent_runtime.contract import wire
from agent_runtime.contract.redaction import REDACTED
from agent_runtime.rest.models import ApprovalView, DecisionResult, ProblemDetails
from tests.support.runtime import (
    Rpc,
    RuntimeProcess,
    Tools,
    demo_tools,
    interrupt,
    request_ids,
    state,
    status_text,
    wait_for,
    write_manifests,
)

pytestmark = pytest.mark.e2e

TOKENS = "alice:tok-alice\nbob:groups=sre:tok-bob\n"
RULES = [
    {"tool": "read_file", "when": {"arg": "path", "glob": "**/.env*"}, "action": "require"},
    {"tool": "write_file", "when": {"arg": "path", "glob": "**/.env*"}, "action": "deny"},
    {"tool": "write_file", "when": {"arg": "path", "glob": "prod/**"}, "action": "require",
     "approvers": {"groups": ["sre"]}},
    {"tool": "write_file", "action": "require", "allowEdit": True},
]


@dataclass
class Env:
    tools: Tools
    proc: RuntimeProcess
    state_dir: Path

    def rpc(self, who: str) -> Rpc:
        return Rpc(self.proc.url, f"tok-{who}")

    def rest(self, who: str) -> httpx.Client:
        return httpx.Client(base_url=self.proc.url, headers={"Authorization": f"Bearer tok-{who}"}, timeout=60)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    base = tmp_path_factory.mktemp("edit-e2e")
    (base / "tokens").write_text(TOKENS)
    with demo_tools(base / "tools") as tools:
        files = write_manifests(base / "manifests", tools.url, rules=RULES, editableTools=["delete_file"])
        proc = RuntimeProcess(files, base / "state", base / "runtime.log", serve_args=["--api-token-file", str(base / "tokens")])
        proc.start()
        try:
            yield Env(tools, proc, base / "state")
        finally:
            proc.stop()


def pause(env: Env, text: str) -> tuple[dict[str, Any], wire.ActionRequest]:
    task = env.rpc("alice").send(text)["task"]
    assert state(task) == "TASK_STATE_INPUT_REQUIRED", status_text(task)
    (request,) = wire.ApprovalInterrupt.model_validate(interrupt(task)).action_requests
    return task, request


def decide_rest(env: Env, who: str, request_id: str, body: dict[str, Any]) -> httpx.Response:
    with env.rest(who) as client:
        return client.post(f"/approvals/{request_id}/decision", json=body, headers={"Idempotency-Key": str(uuid.uuid4())})


def sandbox(env: Env, name: str) -> Path:
    return env.tools.sandbox / name


def test_an_approver_edits_the_arguments_over_a2a_and_the_edited_call_runs_once(env: Env) -> None:
    task, request = pause(env, "write draft to notes/a.txt")
    assert request.editable and request.edited is None
    edited = {"path": "notes/b.txt", "content": "final"}
    done = env.rpc("alice").send(data=wire.approve_edited({request.id: edited}), task=task)["task"]
    assert state(done) == "TASK_STATE_COMPLETED", status_text(done)
    text = status_text(done)
    # The model is told what ran: the tool's own answer for the edited path, and which fields an approver changed.
    assert "notes/b.txt" in text
    assert "An approver (alice) edited this call before approving it" in text
    assert "path changed from 'notes/a.txt' to 'notes/b.txt'" in text and "content changed from 'draft' to 'final'" in text
    assert sandbox(env, "notes/b.txt").read_text() == "final"
    assert not sandbox(env, "notes/a.txt").exists()
    assert [e["args"] for e in env.tools.executions("write_file", "notes/b.txt")] == [edited]
    assert env.tools.executions("write_file", "notes/a.txt") == []
    # A replay of the same decision decides nothing and runs nothing again.
    assert "Already decided" in env.rpc("alice").send_finished(data=wire.approve_edited({request.id: edited}), task=task)
    assert len(env.tools.executions("write_file", "notes/b.txt")) == 1
    # REST and the audit keep both versions and who edited.
    with env.rest("alice") as client:
        view = ApprovalView.model_validate(client.get(f"/approvals/{request.id}").json())
    assert view.args == edited and view.status == "approved"
    assert view.edited == wire.Edited(by="alice", original_args={"path": "notes/a.txt", "content": "draft"},
                                      changed=["content", "path"])
    with closing(sqlite3.connect(env.state_dir / "gatehouse.db")) as db:
        (reason, principal), = db.execute(
            "SELECT reason, principal FROM gatehouse_audit_events WHERE request_id = ? AND event = 'edited'", (request.id,)
        ).fetchall()
    assert principal == "alice" and reason.startswith("changed content, path; arguments sha256 ")


def test_an_edit_that_a_deny_rule_catches_is_refused_and_decides_nothing(env: Env) -> None:
    task, request = pause(env, "write x to notes/c.txt")
    to_env = wire.approve_edited({request.id: {"path": "notes/.env", "content": "x"}})
    after = env.rpc("alice").send(data=to_env, task=task)["task"]
    assert state(after) == "TASK_STATE_INPUT_REQUIRED"
    refusal = "The edited call would be refused by policy (refused by policy: argument 'path' matches glob '**/.env*')"
    assert refusal in status_text(after)
    assert "Nothing was decided" in status_text(after)
    assert request_ids(after) == [request.id]
    assert wire.ApprovalInterrupt.model_validate(interrupt(after)).action_requests[0].args == request.args
    # Over REST the same edit is refused alike (422), and the request is still pending, unchanged.
    body = {"decision": "approve", "arguments": {"path": "x/.env.local", "content": "x"}}
    refused = decide_rest(env, "alice", request.id, body)
    assert refused.status_code == 422 and "would be refused by policy" in refused.json()["error"]
    # The call as asked for can still be approved, and runs with its own arguments.
    done = env.rpc("alice").send("approve", task=task)["task"]
    assert state(done) == "TASK_STATE_COMPLETED"
    assert not sandbox(env, "notes/.env").exists() and sandbox(env, "notes/c.txt").read_text() == "x"


def test_an_edit_the_policy_does_not_allow_is_refused(env: Env) -> None:
    sandbox(env, "conf/.env").parent.mkdir(parents=True, exist_ok=True)
    sandbox(env, "conf/.env").write_text("SECRET=1")
    task, request = pause(env, "read conf/.env")
    assert not request.editable
    after = env.rpc("alice").send(data=wire.approve_edited({request.id: {"path": "conf/other"}}), task=task)["task"]
    assert state(after) == "TASK_STATE_INPUT_REQUIRED"
    assert "does not let approvers change the arguments of read_file calls" in status_text(after)
    assert env.rpc("alice").send("deny", task=task)["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert env.tools.executions("read_file", "conf/other") == []


def test_an_edit_that_needs_other_approvers_waits_for_them_over_rest(env: Env) -> None:
    task, request = pause(env, "write v2 to notes/d.txt")
    edited = {"path": "prod/d.txt", "content": "v2"}
    answer = decide_rest(env, "alice", request.id, {"decision": "approve", "arguments": edited})
    # The edit is applied, but alice is not in sre, whom a write under prod/ needs: her vote does not count.
    assert answer.status_code == 403, answer.text
    view = ProblemDetails.model_validate(answer.json()).approval
    assert view is not None and view.status == "pending" and view.args == edited
    assert view.approvers is not None and view.approvers.groups == ["sre"]
    paused = env.rpc("alice").get_task(task["id"])
    (shown,) = wire.ApprovalInterrupt.model_validate(interrupt(paused)).action_requests
    assert shown.args == edited and shown.edited is not None and shown.edited.by == "alice"
    assert shown.approvers is not None and shown.approvers.groups == ["sre"]
    assert not sandbox(env, "prod/d.txt").exists()
    # bob looked before the edit: an approval bound to what he saw (args_hash) is refused, nothing decided.
    stale = decide_rest(env, "bob", request.id, {"decision": "approve", "args_hash": args_hash("write_file", request.args)})
    assert stale.status_code == 409, stale.text
    assert f"The arguments of {request.id} (write_file) were edited by alice since you saw them" in stale.json()["error"]
    assert not sandbox(env, "prod/d.txt").exists() and not sandbox(env, "notes/d.txt").exists()
    # bob (sre) approves the edited call as it stands; it runs once, with the edited arguments.
    decided = decide_rest(env, "bob", request.id, {"decision": "approve", "args_hash": view.args_hash})
    assert decided.status_code == 200, decided.text
    assert DecisionResult.model_validate(decided.json()).approval.args == edited
    wait_for(lambda: state(env.rpc("alice").get_task(task["id"])) == "TASK_STATE_COMPLETED")
    assert sandbox(env, "prod/d.txt").read_text() == "v2" and not sandbox(env, "notes/d.txt").exists()
    assert len(env.tools.executions("write_file", "prod/d.txt")) == 1


def test_a_batch_item_carries_edited_arguments_for_a_tool_in_editable_tools(env: Env) -> None:
    """``delete_file`` is editable (editableTools) though no rule names it. (Votes cast before an edit stop counting:
    tests/contract/test_edits.py, on the approvals table.)"""
    for name in ("old1.txt", "old2.txt"):
        sandbox(env, name).write_text("x")
    task, request = pause(env, "delete old1.txt")
    assert request.editable
    # No approvers block here (whoever reaches the request decides alone): an edit then approves at once.
    done = env.rpc("alice").send(data={"decision_type": "batch", "decisions": [
        {"id": request.id, "decision": "approve", "args": {"path": "old2.txt"}}]}, task=task)["task"]
    assert state(done) == "TASK_STATE_COMPLETED", status_text(done)
    assert sandbox(env, "old1.txt").exists() and not sandbox(env, "old2.txt").exists()
    assert "path changed from 'old1.txt' to 'old2.txt'" in status_text(done)


def test_malformed_edits_are_refused_on_both_channels(env: Env) -> None:
    task, request = pause(env, "write y to notes/e.txt")
    for data, problem in [
        ({"decision_type": "approve", "edits": {"apr-nope": {"path": "a"}}}, "Edits given for unknown ids: apr-nope"),
        ({"decision_type": "approve", "edits": {request.id: "notes/f.txt"}}, "Malformed approve decision"),
        ({"decision_type": "approve", "scope": "session", "edits": {request.id: {"path": "a", "content": "y"}}},
         "An edited approval covers that one call"),
        ({"decision_type": "batch", "decisions": {request.id: "deny"}, "edits": {request.id: {"path": "a"}}},
         "Edits given for denied ids"),
    ]:
        after = env.rpc("alice").send(data=data, task=task)["task"]
        assert state(after) == "TASK_STATE_INPUT_REQUIRED" and problem in status_text(after), status_text(after)
    for body, problem in [
        ({"decision": "deny", "arguments": {"path": "a"}}, "arguments (an edit) go with decision approve only"),
        ({"decision": "approve", "arguments": "notes/f.txt"}, "arguments"),
    ]:
        answer = decide_rest(env, "alice", request.id, body)
        assert answer.status_code == 422 and problem in answer.json()["error"], answer.text
    assert env.rpc("alice").send("deny", task=task)["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert env.tools.executions("write_file", "notes/e.txt") == [] and env.tools.executions("write_file", "a") == []


def test_a_rest_edit_that_leaves_a_redacted_field_as_shown_runs_with_its_real_value(env: Env) -> None:
    """REST shows a secret as «redacted»; an approval that copies it back as shown must run with the real value, and
    one that changes it is refused (issue 31: the tool used to run with the literal text «redacted»)."""
    secret = "sk-" + secrets.token_hex(16)  # the shape of an API key: redacted by the built-in patterns
    task, request = pause(env, f"write {secret} to notes/rest-s.txt")
    with env.rest("alice") as client:
        shown = ApprovalView.model_validate(client.get(f"/approvals/{request.id}").json())
    assert shown.args == {"path": "notes/rest-s.txt", "content": REDACTED} and shown.redacted == ["$.content"]
    changed = decide_rest(env, "alice", request.id,
                          {"decision": "approve", "arguments": {**shown.args, "content": "guessed"}})
    assert changed.status_code == 422, changed.text
    assert "redacted fields cannot be edited: $.content" in ProblemDetails.model_validate(changed.json()).error
    answer = decide_rest(env, "alice", request.id,
                         {"decision": "approve", "arguments": {**shown.args, "path": "notes/rest-s2.txt"}})
    assert answer.status_code == 200, answer.text
    assert wait_for(lambda: env.tools.executions("write_file", "notes/rest-s2.txt"), 30)[0]["args"] == {
        "path": "notes/rest-s2.txt", "content": secret}
    assert sandbox(env, "notes/rest-s2.txt").read_text() == secret
    view = ApprovalView.model_validate(env.rest("alice").get(f"/approvals/{request.id}").json())
    assert view.args["content"] == REDACTED and view.edited is not None and view.edited.changed == ["path"]
    wait_for(lambda: state(env.rpc("alice").get_task(task["id"])) == "TASK_STATE_COMPLETED", 30)


def test_an_a2a_owner_edits_with_real_values_which_run_as_sent(env: Env) -> None:
    """The A2A pause shows its owner the real arguments, so an A2A edit is taken as sent (the executor's path,
    batches.plan_edits), never un-redacted: a new secret in place of the old one is the owner's to write."""
    old, new = "sk-" + secrets.token_hex(16), "sk-" + secrets.token_hex(16)
    task, request = pause(env, f"write {old} to notes/a2a-s.txt")
    assert request.args == {"path": "notes/a2a-s.txt", "content": old}  # the owner sees the real value
    edited = {"path": "notes/a2a-s.txt", "content": new}
    done = env.rpc("alice").send(data=wire.approve_edited({request.id: edited}), task=task)["task"]
    assert state(done) == "TASK_STATE_COMPLETED", status_text(done)
    assert [e["args"] for e in env.tools.executions("write_file", "notes/a2a-s.txt")] == [edited]
    assert sandbox(env, "notes/a2a-s.txt").read_text() == new
