"""What became of an approved call (agent_runtime/approvals/execution.py): one classification of a tool result, read
from the very texts the MCP transport writes (server/toolsets.py), and how the outlets put it in words."""

from __future__ import annotations

from typing import Any

import httpx2
from hypothesis import given
from hypothesis import strategies as st

from agent_runtime.approvals import execution
from agent_runtime.approvals.execution import Execution, classify
from agent_runtime.approvals.records import ApprovalRecord
from agent_runtime.clients.kubectl_inbox import card_of
from agent_runtime.kube import objects
from agent_runtime.server import toolsets
from agent_runtime.slack import messages

REQUEST = httpx2.Request("POST", "http://127.0.0.1:9/mcp")


def transport_error(sent: bool) -> dict[str, Any]:
    """A failed MCP call as the model gets it: the transport's JSON-RPC error, in ADK's words."""
    reply = toolsets._failed(REQUEST, {"id": 7}, httpx2.ConnectError("All connection attempts failed"), sent=sent)
    return {"error": f"MCP tool execution failed: {reply.json()['error']['message']}"}


def test_the_transports_own_texts_say_not_sent_and_unknown() -> None:
    assert classify(transport_error(sent=False)).outcome == "not_sent"
    assert classify(transport_error(sent=True)).outcome == "unknown"
    assert "could not be reached (ConnectError: All connection attempts failed)" in classify(transport_error(False)).error


def test_a_result_that_reports_an_error_failed_and_says_which() -> None:
    assert classify({"content": [{"type": "text", "text": "No such file: 'x'."}], "isError": True}) == Execution(
        "failed", "No such file: 'x'.")
    assert classify({"error": "boom"}) == Execution("failed", "boom")
    assert classify({"isError": True}) == Execution("failed", "the tool reported an error")
    assert len(classify({"error": "x" * 5000}).error) == execution.MAX_ERROR


@given(st.one_of(st.text(), st.integers(), st.none(), st.dictionaries(st.text().filter(lambda k: k not in (
    "error", "isError", "is_error")), st.text())))
def test_anything_that_reports_no_error_ran(result: Any) -> None:
    assert classify(result) == Execution("ran")


def record(outcome: execution.Outcome | None, error: str = "") -> ApprovalRecord:
    return ApprovalRecord(
        id="apr-1", task_id="t", context_id="c", confirmation_id="", call_id="call-1", tool="delete_file", server="files",
        args={"path": "a.txt"}, args_hash="h", hint="", created_at=0.0, expires_at=60.0, status="approved", source="rest",
        decided_at=1.0, exec_state="done" if outcome else "started", exec_outcome=outcome, exec_error=error,
        executed_at=2.0 if outcome else None,
    )


def test_the_toolapproval_the_inbox_and_slack_read_the_same_status() -> None:
    assert "execution" not in objects.status(record(None))
    obj = {"metadata": {"name": "fm-1", "namespace": "default"}, "spec": {"requestId": "apr-1", "tool": "delete_file"},
           "status": objects.status(record("not_sent", "the MCP server could not be reached; the request was not sent"))}
    assert obj["status"]["execution"] == {"outcome": "NotSent", "error": "the MCP server could not be reached; the "
                                          "request was not sent", "at": "1970-01-01T00:00:02Z"}
    card = card_of(obj)
    assert (card.execution, card.execution_label) == ("not_sent", "not sent")
    assert messages.execution_line(obj["status"]) == (
        ":warning: Then the call not sent: the MCP server could not be reached; the request was not sent")
    assert messages.execution_line({"execution": {"outcome": "Later"}}) == ""  # an outcome of a later release: none


def test_events_warn_unless_the_call_ran() -> None:
    agent = {"metadata": {"name": "fm", "namespace": "default", "uid": "u"}}
    ran = objects.execution_event(record("ran"), agent, "pod", "now")
    unknown = objects.execution_event(record("unknown", "reset"), agent, "pod", "now")
    assert ran is not None and (ran["type"], ran["reason"]) == ("Normal", "ToolCallRan")
    assert unknown is not None and (unknown["type"], unknown["reason"]) == ("Warning", "ToolCallOutcomeUnknown")
    assert "then outcome unknown (it may have reached the server): reset" in unknown["message"]
    assert objects.execution_event(record(None), agent, "pod", "now") is None
