"""Edit and approve on the kubectl channel: ``kubectl gatehouse approve NAME --set k=v`` against the emulated API, with
the real kubectl and plugin path, the demo tools and a runtime as processes (the stack of tests/kube/test_e2e.py).

The Agent lets approvers edit ``write_file`` calls (``allowEdit``), refuses writes of ``.env`` files, and shows a call's
``content`` redacted to approvers (``spec.approval.redact.paths``): an approver who cannot see it cannot change it,
and an edit that leaves it as shown keeps its real value.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from agent_runtime.contract import wire
from agent_runtime.kube.objects import approval_name
from agent_runtime.kube.toolapproval_client import PluginError, edited_arguments
from tests.kube.test_e2e import Stack, stack
from tests.support.runtime import request_ids, state, status_text, wait_for

pytestmark = pytest.mark.e2e

RULES = [
    {"tool": "write_file", "when": {"arg": "path", "glob": "**/.env*"}, "action": "deny"},
    {"tool": "write_file", "action": "require", "allowEdit": True},
]


@pytest.fixture(scope="module")
def s(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with stack(tmp_path_factory.mktemp("kube-edit"), rules=RULES, redact={"paths": ["content"]}) as running:
        yield running


def paused(s: Stack, text: str) -> tuple[dict[str, Any], str, str]:
    task = s.rpc.send(text)["task"]
    assert state(task) == "TASK_STATE_INPUT_REQUIRED", status_text(task)
    (rid,) = request_ids(task)
    wait_for(lambda: s.phase(rid) == "Pending", timeout=30)
    return task, rid, approval_name("file-manager", rid)


def test_approve_with_set_runs_the_edited_call_once_and_keeps_the_redacted_value(s: Stack) -> None:
    task, rid, name = paused(s, "write top-secret-text to notes/a.txt")
    assert s.approval(rid)["spec"]["arguments"] == {"path": "notes/a.txt", "content": "«redacted»"}
    done = s.gatehouse("approve", name, "--set", "path=notes/b.txt")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f'toolapproval "{name}" approved (1 of 1)'
    finished = wait_for(lambda: s.completed(task["id"]), timeout=60)
    assert "path changed from 'notes/a.txt' to 'notes/b.txt'" in status_text(finished)
    # The real content (never shown to the approver) was written, at the edited path, once.
    assert (s.tools.sandbox / "notes/b.txt").read_text() == "top-secret-text"
    assert not (s.tools.sandbox / "notes/a.txt").exists()
    assert len(s.tools.executions("write_file", "notes/b.txt")) == 1
    wait_for(lambda: s.phase(rid) == "Approved", timeout=30)
    obj = s.approval(rid)
    # The request stays the call the model made; the status shows the edit, redacted alike.
    assert obj["spec"]["arguments"] == {"path": "notes/a.txt", "content": "«redacted»"}
    edited = obj["status"]["edited"]
    assert (edited["by"], edited["changed"], edited["arguments"]) == (
        "tester", ["path"], {"path": "notes/b.txt", "content": "«redacted»"})
    described = s.gatehouse("describe", name)
    assert described.returncode == 0 and "Edited by:   tester (changed: path)" in described.stdout


def test_an_edit_a_deny_rule_catches_is_refused_and_the_vote_does_not_count(s: Stack) -> None:
    task, rid, name = paused(s, "write hello to notes/c.txt")
    refused = s.gatehouse("approve", name, "--set", "path=notes/.env")
    assert refused.returncode == 1
    assert f"your vote does not count: the edit was refused: {rid} (write_file): The edited call would be refused by " \
           "policy (refused by policy: argument 'path' matches glob '**/.env*')" in refused.stderr, refused.stderr
    assert s.phase(rid) == "Pending" and "edited" not in s.approval(rid)["status"]
    assert not (s.tools.sandbox / "notes/.env").exists()
    # The request is still the model's and can be decided elsewhere: approved as asked for, it runs as asked for.
    done = s.rpc.send(data=wire.approve_all(), task=task)["task"]
    assert state(done) == "TASK_STATE_COMPLETED"
    assert (s.tools.sandbox / "notes/c.txt").read_text() == "hello"


def test_a_redacted_value_cannot_be_changed_by_whoever_cannot_see_it(s: Stack) -> None:
    task, rid, name = paused(s, "write abc to notes/d.txt")
    refused = s.gatehouse("approve", name, "--set", "content=xyz")
    assert refused.returncode == 1 and "redacted fields cannot be edited: $.content" in refused.stderr, refused.stderr
    assert s.phase(rid) == "Pending"
    assert s.rpc.send("deny", task=task)["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert s.tools.executions("write_file", "notes/d.txt") == []


def test_the_plugins_edit_options() -> None:
    obj = {"spec": {"arguments": {"path": "a", "content": "«redacted»"}}, "status": {}}
    assert edited_arguments(obj, [], None) is None
    assert edited_arguments(obj, ["path=b", "mode=0644", "count=3", "flags=[1, 2]"], None) == {
        "path": "b", "content": "«redacted»", "mode": "0644", "count": 3, "flags": [1, 2]}  # JSON where it parses
    after_edit = {**obj, "status": {"edited": {"arguments": {"path": "c", "content": "«redacted»"}}}}
    assert edited_arguments(after_edit, ["path=d"], None) == {"path": "d", "content": "«redacted»"}  # the edit as shown
    assert edited_arguments(obj, [], '{"path": "e"}') == {"path": "e"}
    for sets, arguments, problem in [(["path"], None, "use --set name=value"), ([], "[1]", "must be a JSON object"),
                                     ([], "{", "is not JSON"), (["a=b"], "{}", "not both")]:
        with pytest.raises(PluginError, match=problem):
            edited_arguments(obj, sets, arguments)
