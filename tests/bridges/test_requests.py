"""What the bridge reads off a ToolApproval (agent_runtime/bridges/requests.py), pure: the message's place in its
annotation opens as today's Slack bridge wrote it and is written back byte for byte, and a click names its request."""

from __future__ import annotations

from typing import Any

import pytest

from agent_runtime.bridges.requests import Ref, already_decided, is_question, place_annotation, posted, same_place
from agent_runtime.slack.notifier import ANNOTATION, SlackNotifier

KEYS = SlackNotifier.place_keys
# the annotation as the Slack bridge of the release before agent_runtime/bridges wrote it (compact, sorted keys)
WRITTEN_BEFORE = '{"channel":"C0OPSAPPROV","fp":"0123456789abcdef","ts":"1712345678.000100"}'


def _obj(annotations: dict[str, str] | None = None, **status: Any) -> dict[str, Any]:
    return {"metadata": {"namespace": "default", "name": "fm-1", "annotations": annotations or {}},
            "spec": {"requestId": "apr-1", "tool": "delete_file"}, "status": status}


def test_an_annotation_written_by_the_slack_bridge_before_opens_and_is_written_back_the_same() -> None:
    where = posted(_obj({ANNOTATION: WRITTEN_BEFORE}), ANNOTATION, KEYS)
    assert where == {"channel": "C0OPSAPPROV", "ts": "1712345678.000100", "fp": "0123456789abcdef"}
    assert place_annotation({k: where[k] for k in KEYS}, where["fp"]) == WRITTEN_BEFORE
    assert ANNOTATION == "gatehouse.dev/slack-message"


@pytest.mark.parametrize("value", ["", "not json", "[]", '{"channel":"C0"}', '{"ts":"1.2","fp":"x"}',
                                   '{"channel":"","ts":"1.2"}'])
def test_an_annotation_without_a_whole_place_is_never_posted(value: str) -> None:
    assert posted(_obj({ANNOTATION: value}), ANNOTATION, KEYS) is None


def test_another_channels_annotation_is_not_slacks() -> None:
    assert posted(_obj({"gatehouse.dev/recorder-message": WRITTEN_BEFORE}), ANNOTATION, KEYS) is None


def test_a_click_from_another_message_is_not_the_same_place() -> None:
    written = {"channel": "C0", "ts": "1.2", "fp": "f"}
    assert same_place(written, {"channel": "C0", "ts": "1.2"}, KEYS)
    assert not same_place(written, {"channel": "C0", "ts": "1.3"}, KEYS)
    assert not same_place(written, {"channel": "C0"}, KEYS)


def test_a_buttons_value_names_exactly_one_request() -> None:
    ref = Ref("default", "fm-1", "apr-1")
    assert Ref.parse(ref.value()) == ref
    for bad in ("", "{}", '{"ns":"default","name":"fm-1"}', '{"ns":1,"name":"fm-1","rid":"apr-1"}', "[1]"):
        assert Ref.parse(bad) is None


def test_questions_are_never_a_bridges_and_a_decided_request_says_by_whom() -> None:
    question = _obj()
    question["metadata"]["labels"] = {"gatehouse.dev/kind": "hitl_request"}
    assert is_question(question) and not is_question(_obj())
    assert already_decided(_obj(phase="Denied", decidedBy="bob")) == \
        "This request is already denied by bob; nothing changed."
