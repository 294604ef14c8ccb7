"""The bridge's pure parts: the message (golden files), the user mapping, the signature check (the replay memory:
test_replays.py)."""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Any

import pytest

from agent_runtime.slack import messages
from agent_runtime.slack.signature import Refused, Signed, verify
from agent_runtime.slack.users import Person, UserMap
from agent_runtime.ui import held_questions
from tests.support import slack_api
from tests.support.golden import assert_golden

GOLDEN = Path(__file__).parents[1] / "testdata" / "slack"
PENDING: dict[str, Any] = {
    "metadata": {"name": "file-manager-0123", "namespace": "team-a"},
    "spec": {"agentRef": "file-manager", "requestId": "apr-0123", "tool": "write_file", "requestedBy": "carol",
             "arguments": {"path": "creds.txt", "content": "«redacted»"}, "redacted": ["content"],
             "hint": "write_file on file-tools requires approval (requireApproval)", "expiresAt": "2026-11-24T10:15:00Z"},
    "status": {"phase": "Pending", "approvals": "1/2", "required": 2, "waitingFor": "a member of sre; 1 more approval",
               "votes": [{"by": "alice", "action": "Approve", "counted": True},
                         {"by": "mallory", "action": "Approve", "counted": False}]},
}
DENIED = {**PENDING, "status": {"phase": "Denied", "decidedBy": "bob@example.com", "decidedAt": "2026-11-24T10:01:00Z",
                                "source": "kubectl", "reason": "<!channel> not now & never", "approvals": "1/2"}}


GATEWAY_PENDING = {**PENDING, "spec": {**{k: v for k, v in PENDING["spec"].items() if k != "agentRef"},
                                      "gatewayRef": "files-gate"}}  # an MCPGateway's held call (docs/gateway.md)
QUESTION_PENDING = {**PENDING, "spec": {  # a hook's held AskUserQuestion (docs/gateway.md "Claude Code")
    "gatewayRef": "laptops", "requestId": "apr-0456", "tool": "AskUserQuestion", "requestedBy": "dave",
    "arguments": {"questions": [{"question": "Which database?", "header": "Database", "multiSelect": False,
                                 "options": [{"label": "PostgreSQL", "description": "Relational"},
                                             {"label": "<!here> SQLite"}]}]},
    "hint": "AskUserQuestion requires approval"}, "status": {"phase": "Pending"}}


@pytest.mark.parametrize(("case", "obj"), [("pending", PENDING), ("denied", DENIED), ("gateway", GATEWAY_PENDING),
                                          ("question", QUESTION_PENDING)])
def test_the_message_golden(case: str, obj: dict[str, Any], update_golden: bool) -> None:
    assert_golden({"text": messages.summary(obj), "blocks": messages.blocks(obj)}, GOLDEN / f"{case}.json", update_golden)


def test_a_decided_message_has_no_buttons_and_escapes_what_people_wrote() -> None:
    text = str(messages.blocks(DENIED))
    assert "actions" not in text and "&lt;!channel&gt; not now &amp; never" in text and "<!channel>" not in text
    assert messages.fingerprint(PENDING) != messages.fingerprint(DENIED)
    assert messages.fingerprint(copy.deepcopy(PENDING)) == messages.fingerprint(PENDING)


def test_a_button_names_its_request_and_a_garbled_value_names_none() -> None:
    ref = messages.ref_of(PENDING)
    assert messages.Ref.parse(ref.value()) == messages.Ref("team-a", "file-manager-0123", "apr-0123")
    for bad in ["", "x", "[]", '{"ns": "a", "name": "b"}', '{"ns": "a", "name": "b", "rid": 3}']:
        assert messages.Ref.parse(bad) is None
    assert messages.parse_dialog_metadata(messages.dialog_metadata(ref, "C1", "1.2")) == (ref, "C1", "1.2")
    assert messages.parse_dialog_metadata('{"ref": "x"}') is None


def test_a_questions_options_are_buttons_whose_answer_is_the_inboxs_made_from_the_request() -> None:
    ref = messages.ref_of(QUESTION_PENDING)
    buttons = [e for b in messages.blocks(QUESTION_PENDING) if b["type"] == "actions" for e in b["elements"]
               if e["action_id"].startswith(messages.ANSWER)]
    assert [b["text"]["text"] for b in buttons] == ["PostgreSQL", "<!here> SQLite"]  # plain_text: Slack never parses it
    assert len({b["action_id"] for b in buttons}) == 2  # Slack wants action ids unique in a message
    assert [messages.parse_answer(b["value"]) for b in buttons] == [(ref, 0, 0), (ref, 0, 1)]
    assert messages.answer_reason(QUESTION_PENDING, 0, 0) == held_questions.answer_reason("Which database?",
                                                                                         "PostgreSQL")
    for q, o in [(0, 2), (1, 0)]:  # an option or a question the request does not show
        assert messages.answer_reason(QUESTION_PENDING, q, o) is None
    for bad in ["", "{}", '{"ref": "x", "q": 0, "o": 0}', json.dumps({"ref": ref.value(), "q": -1, "o": 0}),
                json.dumps({"ref": ref.value(), "q": "0", "o": 0}), json.dumps({"ref": ref.value(), "q": True, "o": 0})]:
        assert messages.parse_answer(bad) is None, bad
    # Any other call, or an AskUserQuestion of another shape, has no option buttons and no answer.
    for other in (PENDING, {**QUESTION_PENDING, "spec": {**QUESTION_PENDING["spec"], "arguments": {"q": 1}}}):
        assert messages.ANSWER not in json.dumps(messages.blocks(other))
        assert messages.answer_reason(other, 0, 0) is None
    decided = {**QUESTION_PENDING, "status": {"phase": "Denied", "decidedBy": "alice"}}
    assert messages.ANSWER not in json.dumps(messages.blocks(decided))


def test_users_by_id_by_email_domain_and_nobody() -> None:
    users = UserMap.load("users:\n  U1: {principal: alice@example.com, groups: [sre]}\n  U2: carol\n"
                         "groups:\n  oncall: [alice@example.com, bob@example.com]\n", ["Example.com"])
    assert users.resolve("U1") == Person("alice@example.com", ("oncall", "sre"))
    assert users.resolve("U2") == Person("carol")
    assert users.needs_email("U3") and not users.needs_email("U1")
    assert users.resolve("U3", "Bob@EXAMPLE.com") == Person("bob@example.com", ("oncall",))
    assert users.resolve("U3", "bob@example.com.evil.org") is None
    assert users.resolve("U3", "mallory@elsewhere.org") is None and users.resolve("U3") is None
    assert UserMap.load("").resolve("U1", "a@example.com") is None  # no mapping: nobody
    with pytest.raises(ValueError):
        UserMap.load("users:\n  U1: {groups: [sre]}\n")


def test_the_signature_and_its_age() -> None:
    now = time.time()
    body = slack_api.block_action("U1", "C1", "1.1", messages.APPROVE, "{}").encode()

    def headers(**kw: Any) -> dict[str, str]:
        return {k.lower(): v for k, v in slack_api.signed(body.decode(), **kw).items()}

    def refused(content: bytes, sent: dict[str, str]) -> str:
        with pytest.raises(Refused) as caught:
            verify("secret", content, sent, now)
        return str(caught.value)

    assert refused(body, headers(secret="other")) == "bad signature"
    assert refused(body, {}) == "unsigned request"
    assert refused(body, {**headers(secret="secret"), "x-slack-request-timestamp": "soon"}) == "malformed timestamp"
    assert refused(body, headers(secret="secret", timestamp=int(now) - 301)).startswith("stale")
    assert refused(body, headers(secret="secret", timestamp=int(now) + 301)).startswith("stale")
    good = headers(secret="secret", timestamp=int(now))
    assert refused(body + b"&x=1", good) == "bad signature"  # the body is signed
    assert verify("secret", body, good, now) == Signed(good["x-slack-signature"], int(now) + 300)
    # a timestamp five minutes ahead is valid for ten: the replay memory keeps it that long (from its timestamp)
    ahead = headers(secret="secret", timestamp=int(now) + 299)
    assert verify("secret", body, ahead, now).expires == int(now) + 599
    assert verify("secret", body, ahead, now + 590).signature == ahead["x-slack-signature"]  # still valid 590 s on


def test_the_bridge_server_believes_no_forwarded_headers(monkeypatch: pytest.MonkeyPatch) -> None:
    """``gatehouse slack`` runs uvicorn with its proxy-header handling off, whatever ``$FORWARDED_ALLOW_IPS`` says: a
    request from 127.0.0.1 (a sidecar, a port-forward) cannot choose the client address or scheme the app sees. The
    command's own server options, served for real with an app that says what it saw."""
    import threading

    import httpx
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route
    from typer.testing import CliRunner

    import agent_runtime.slack
    from agent_runtime.clients.cli import app
    from tests.support.processes import free_port

    async def seen(request: Request) -> JSONResponse:
        return JSONResponse({"client": request.client.host if request.client else None, "scheme": request.url.scheme})

    echo = Starlette(routes=[Route("/", seen)])
    given: dict[str, Any] = {}
    monkeypatch.setattr(agent_runtime.slack, "build_app", lambda settings: echo)
    monkeypatch.setattr(uvicorn, "run", lambda served, **options: given.update(options, app=served))
    monkeypatch.setenv("FORWARDED_ALLOW_IPS", "*")
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-test")
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "s" * 32)
    port = free_port()
    result = CliRunner().invoke(app, ["slack", "-n", "default", "--host", "127.0.0.1", "--port", str(port)])
    assert result.exit_code == 0, result.output
    assert given.pop("app") is echo
    server = uvicorn.Server(uvicorn.Config(echo, **given))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            assert time.monotonic() < deadline and thread.is_alive()
            time.sleep(0.02)
        reply = httpx.get(f"http://127.0.0.1:{port}/", headers={"X-Forwarded-For": "10.1.2.3", "X-Forwarded-Proto": "https"})
        assert reply.json() == {"client": "127.0.0.1", "scheme": "http"}
    finally:
        server.should_exit = True
        thread.join(10)
