"""What became of an approved call, on every outlet (issue 36 item 1), over real HTTP with real processes.

The stack of tests/kube/test_e2e.py: the emulated API server, the demo MCP server and the runtime as subprocesses.
One delete is approved while the MCP server is up (it ran); another is approved after the server was stopped (as an
MCP server scaled to 0): its request never left. Each outlet must say so: REST ``/approvals/<id>``, the ToolApproval's
``status.execution`` and ``kubectl get toolapprovals``' EXECUTION column, the Event on the Agent, the inbox's history
and request page, the audit export, the Slack message (rendered from the ToolApproval as the bridge reads it) and
the metric.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from agent_runtime.clients import processes
from agent_runtime.clients.cli import app as cli_app
from agent_runtime.contract import wire
from agent_runtime.kube.objects import approval_name
from agent_runtime.rest.models import ApprovalView
from agent_runtime.slack import messages
from tests.kube.test_e2e import Stack, _gated, stack
from tests.support.kube_fixtures import table
from tests.support.runtime import wait_for

pytestmark = pytest.mark.e2e


def execution(s: Stack, request_id: str) -> dict[str, Any]:
    return ((s.approval(request_id) or {}).get("status") or {}).get("execution") or {}


def column(s: Stack, request_id: str) -> str:
    """The EXECUTION column of ``kubectl get toolapprovals`` for this request."""
    (row,) = table(s.kubectl("get", "toolapprovals", approval_name("file-manager", request_id)))
    return row["EXECUTION"]


def events(s: Stack, reason: str) -> list[str]:
    return [e["message"] for e in json.loads(s.kubectl("get", "events", "-o", "json"))["items"] if e["reason"] == reason]


def page(s: Stack, path: str) -> str:
    reply = s.rpc.client.get(path)  # as the A2A client (a ServiceAccount token)
    assert reply.status_code == 200, reply.text
    return reply.text


def test_an_approved_call_says_it_ran_or_that_it_was_not_sent_everywhere(tmp_path: Path) -> None:
    with stack(tmp_path) as s:
        task, ran = _gated(s, "ran.txt")
        s.rpc.send(data=wire.approve_all(), task=task)
        wait_for(lambda: execution(s, ran).get("outcome") == "Ran", timeout=30)

        task, down = _gated(s, "down.txt")
        assert s.tools.process is not None
        processes.stop(s.tools.process)  # the MCP server scaled to 0
        done = s.rpc.send(data=wire.approve_all(), task=task)["task"]
        assert "the request was not sent" in json.dumps(done)
        wait_for(lambda: execution(s, down).get("outcome") == "NotSent", timeout=30)
        assert (s.tools.sandbox / "down.txt").exists()

        # REST
        views = {rid: ApprovalView.model_validate_json(page(s, f"/approvals/{rid}")) for rid in (ran, down)}
        assert views[ran].execution is not None and (views[ran].execution.outcome, views[ran].execution.error) == ("ran", "")
        not_sent = views[down].execution
        assert not_sent is not None and not_sent.outcome == "not_sent"
        assert "the MCP server could not be reached" in not_sent.error and "the request was not sent" in not_sent.error
        # the ToolApproval: its status and kubectl's column
        assert execution(s, down)["error"] == not_sent.error and execution(s, ran).keys() == {"outcome", "at"}
        assert (column(s, ran), column(s, down)) == ("Ran", "NotSent")
        # the Agent's Events: the approval, then what became of the call
        wait_for(lambda: events(s, "ToolCallNotSent"), timeout=30)
        (warned,) = events(s, "ToolCallNotSent")
        assert warned.startswith("delete_file(path='down.txt') was approved, then not sent: ") and not_sent.error in warned
        assert any("ran.txt" in m for m in events(s, "ToolCallRan"))
        # the inbox: the history's column and the request's page
        history = page(s, "/ui/history")
        assert 'data-testid="execution"' in history and ">not sent</span>" in history and ">ran</span>" in history
        assert f"Then the call not sent: {not_sent.error}" in page(s, f"/ui/requests/{down}")
        # the Slack message, rendered from the ToolApproval as the bridge reads it
        slack = json.dumps(messages.blocks(s.approval(down) or {}))
        assert f":warning: Then the call not sent: {not_sent.error}" in slack
        assert ":white_check_mark: Then the call ran" in json.dumps(messages.blocks(s.approval(ran) or {}))
        # the metric
        counted = {o: s.rpc.metric("gatehouse_tool_executions_total", agent="file-manager", tool="delete_file", outcome=o)
                   for o in ("ran", "not_sent")}
        assert counted == {"ran": 1.0, "not_sent": 1.0}
    # the audit export, from the state the runtime left
    exported = CliRunner().invoke(cli_app, ["audit", "export", "--state-dir", str(tmp_path / "state"), "--event", "executed"])
    assert exported.exit_code == 0, exported.output
    executed = {e["request_id"]: (e["outcome"], e["reason"]) for e in map(json.loads, exported.stdout.splitlines())}
    assert executed == {ran: ("ran", ""), down: ("not_sent", not_sent.error)}
