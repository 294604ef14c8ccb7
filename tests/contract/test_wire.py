"""The decision parser: every malformed, partial or ambiguous decision changes nothing."""

from __future__ import annotations

from typing import Any

import pytest

from agent_runtime.contract import wire
from agent_runtime.contract.wire import DecisionError, Verdict, parse_decision

PENDING = ["apr-1", "apr-2"]


def _parse(data: Any = None, text: str = "", allow_session: bool = False) -> dict[str, Verdict]:
    return parse_decision([] if data is None else [data], text, PENDING, allow_session=allow_session)


def test_approve_and_deny_all() -> None:
    assert _parse({"decision_type": "approve"}) == {i: Verdict(True) for i in PENDING}
    assert _parse({"decision_type": "deny", "reason": "no"}) == {i: Verdict(False, "no") for i in PENDING}


def test_batch_each_id_once() -> None:
    got = _parse(wire.batch({"apr-1": True, "apr-2": False}, {"apr-2": "too risky"}))
    assert got == {"apr-1": Verdict(True), "apr-2": Verdict(False, "too risky")}
    listed = {"decision_type": "batch", "decisions": [{"id": "apr-2", "decision": "deny", "reason": "r"},
                                                      {"id": "apr-1", "decision": "approve"}]}
    assert _parse(listed) == {"apr-1": Verdict(True), "apr-2": Verdict(False, "r")}


@pytest.mark.parametrize("word", ["approve", "Approved.", " yes ", "proceed!"])
def test_text_fallback_approves(word: str) -> None:
    assert all(v.approved for v in _parse(text=word).values())


@pytest.mark.parametrize("word", ["deny", "Denied", "reject", "no", "cancel"])
def test_text_fallback_denies(word: str) -> None:
    assert not any(v.approved for v in _parse(text=word).values())


@pytest.mark.parametrize(
    ("data", "text", "needle"),
    [
        (None, "yes please, but not the second", "Could not read a decision"),
        (None, "", "empty"),
        (None, "approve deny", "Could not read"),
        ({"decision_type": "maybe"}, "", "Unknown decision_type 'maybe'"),
        ({"decision": "approve"}, "", "Unknown decision_type None"),
        ({"decision_type": "batch", "decisions": {"apr-1": "approve"}}, "", "missing ids: apr-2"),
        ({"decision_type": "batch", "decisions": {"apr-1": "approve", "apr-2": "approve", "apr-9": "deny"}}, "",
         "unknown ids: apr-9"),
        ({"decision_type": "batch", "decisions": [{"id": "apr-1", "decision": "approve"},
                                                  {"id": "apr-1", "decision": "approve"},
                                                  {"id": "apr-2", "decision": "approve"}]}, "", "Duplicate ids"),
        ({"decision_type": "batch", "decisions": {"apr-1": "approve", "apr-2": "yes"}}, "", "Malformed batch"),
        ({"decision_type": "batch", "decisions": {"apr-1": "approve", "apr-2": "deny"}, "reasons": {"apr-3": "x"}},
         "", "Reasons given for unknown ids"),
        ({"decision_type": "approve", "scope": "session"}, "", "Session grants are not allowed"),
        ({"decision_type": "approve", "scope": "forever"}, "", "Malformed approve"),
        ({"decision_type": "approve", "ids": ["apr-1"]}, "", "Malformed approve"),
        ({"decision_type": "answer", "answers": {"apr-1": "x"}}, "", "hitl_request"),
        ("approve", "", "not a JSON object"),
    ],
)
def test_malformed_decisions_change_nothing(data: Any, text: str, needle: str) -> None:
    with pytest.raises(DecisionError) as info:
        _parse(data, text)
    assert needle in str(info.value)
    assert "still pending" in str(info.value)


def test_two_data_parts_are_ambiguous() -> None:
    with pytest.raises(DecisionError, match="2 data parts"):
        parse_decision([{"decision_type": "approve"}, {"decision_type": "deny"}], "", PENDING, allow_session=False)


def test_data_part_wins_over_text() -> None:
    assert not any(v.approved for v in _parse({"decision_type": "deny"}, text="approve").values())


def test_session_scope_where_allowed() -> None:
    got = _parse({"decision_type": "approve", "scope": "session"}, allow_session=True)
    assert {v.scope for v in got.values()} == {"session"} and {v.grant for v in got.values()} == {None}


def test_a_grant_glob_goes_with_a_session_approval_only() -> None:
    glob = {"argument": "path", "glob": "/srv/reports/**"}
    got = _parse({"decision_type": "approve", "scope": "session", "grant": glob}, allow_session=True)
    assert {(v.grant.argument, v.grant.glob) for v in got.values() if v.grant} == {("path", "/srv/reports/**")}
    batch = {"decision_type": "batch", "decisions": {"apr-1": "approve", "apr-2": "deny"}, "scope": "session", "grant": glob}
    verdicts = _parse(batch, allow_session=True)
    assert verdicts["apr-1"].grant is not None and verdicts["apr-2"].grant is None
    for bad, needle in (
        ({"decision_type": "approve", "grant": glob}, '"scope": "session" only'),
        ({"decision_type": "approve", "scope": "session", "grant": {"argument": "path"}}, "Malformed approve"),
        ({"decision_type": "approve", "scope": "session", "grant": {"argument": "", "glob": "*"}}, "Malformed approve"),
    ):
        with pytest.raises(DecisionError, match=needle):
            _parse(bad, allow_session=True)


def test_nothing_pending() -> None:
    with pytest.raises(DecisionError, match="no pending request"):
        parse_decision([{"decision_type": "approve"}], "", [], allow_session=False)


def test_a_text_that_is_a_whole_json_decision_is_read_like_the_data_part() -> None:
    """google-adk's RemoteA2aAgent sends a function response as JSON text: the same parser, the same checks."""
    ids = ["apr-1", "apr-2"]
    verdicts = wire.parse_decision([], '{"decision_type": "deny", "reason": "not now"}', ids, allow_session=False)
    assert {i: (v.approved, v.reason) for i, v in verdicts.items()} == {"apr-1": (False, "not now"), "apr-2": (False, "not now")}
    with pytest.raises(wire.DecisionError, match="Malformed approve"):  # malformed is still refused
        wire.parse_decision([], '{"decision_type": "approve", "scope": "forever"}', ids, allow_session=False)
    with pytest.raises(wire.DecisionError, match="Session grants are not allowed"):  # and a session grant where none is allowed
        wire.parse_decision([], '{"decision_type": "approve", "scope": "session"}', ids, allow_session=False)
    with pytest.raises(wire.DecisionError, match="Could not read"):  # JSON without a decision_type is just text
        wire.parse_decision([], '{"approve": true}', ids, allow_session=False)
    with pytest.raises(wire.DecisionError, match="Could not read"):  # and so is an approve word inside other text
        wire.parse_decision([], '{"decision_type": "approve"} and more', ids, allow_session=False)
    # a data part, when there is one, is the decision; the text beside it is not read as a second one
    verdicts = wire.parse_decision([wire.approve_all()], '{"decision_type": "deny", "reason": "x"}', ids, allow_session=False)
    assert all(v.approved for v in verdicts.values())


def test_a_pause_read_through_a_struct_gives_integers_again() -> None:
    """An a2a-sdk client parses a data part into a protobuf Struct, whose numbers are doubles, whatever the wire
    said: reading the pause with the contract's models gives the integers back (``gatehouse chat`` does)."""
    from a2a.helpers import new_data_part
    from google.protobuf.json_format import MessageToDict

    request = wire.ActionRequest(id="apr-1", name="delete_file", args={"path": "a.txt"}, call_id="c", expires_at="x",
                                 approvers=wire.Approvers(required=2, users=["sre"]))
    data = MessageToDict(new_data_part(wire.ApprovalInterrupt(action_requests=[request]).model_dump(mode="json")))["data"]
    assert data["action_requests"][0]["approvers"]["required"] == 2.0  # what the Struct made of it
    read = wire.ApprovalInterrupt.model_validate(data).action_requests[0].approvers
    assert read is not None and read.required == 2 and type(read.required) is int
