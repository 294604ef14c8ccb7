"""Claude Code's question tool answered in Slack (issue 39, docs/gateway.md "Claude Code", docs/slack.md): a real
hooks-only ``gatehouse-runtime gateway`` mirroring its held calls as ToolApprovals in the emulated Kubernetes API (with
the chart's admission policy), ``gatehouse slack`` as a process, the Slack Web API stand-in, and the real ``gatehouse
hook claude-code`` command waiting on an ``AskUserQuestion``. The message shows the question's options as buttons; a
signed click by an approver answers it, and the hook gets a deny carrying the inbox's own answer text. A click by
someone who may not decide, a forged click and a replayed one decide nothing."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_runtime.kube.objects import approval_name
from agent_runtime.slack import messages
from agent_runtime.slack.decisions import NOT_THIS_REQUEST
from agent_runtime.slack.notifier import ANNOTATION
from agent_runtime.slack.signature import REPLAYED
from agent_runtime.ui import held_questions
from tests.hooks.test_hooks_e2e import Ran, command, decision, pre_tool_use
from tests.slack.gateway_bridge import SECRET, gateway_and_bridge
from tests.support import slack_api
from tests.support.kube_fixtures import wait_for

pytestmark = pytest.mark.e2e

GATEWAY = "laptops"
TA = "gatehouse.dev/v1alpha1/toolapprovals"
BRIDGE = "system:serviceaccount:gatehouse-system:gatehouse-slack"
CHANNEL, CHANNEL_ID = "#ops-approvals", "C0OPSAPPROV"
ALICE, BOB = "U0ALICE", "U0BOB"  # alice may answer dave's questions; bob is mapped, but no approver
USERS = {"users": {ALICE: {"principal": "alice@example.com"}, BOB: {"principal": "bob@example.com"}}}
ASKED = {"questions": [{"question": "Which database should the shop use?", "header": "Database",
                        "options": [{"label": "PostgreSQL", "description": "Relational"},
                                    {"label": "SQLite", "description": "One file"}], "multiSelect": False}]}


def _manifest() -> dict[str, Any]:
    # No upstream: the gateway serves only hooks; its requests are shown in Slack like any gateway's.
    return {"apiVersion": "gatehouse.dev/v1alpha1", "kind": "MCPGateway", "metadata": {"name": GATEWAY},
            "spec": {"approval": {"rules": [{"tool": "AskUserQuestion", "action": "require"}],
                                  "approvers": {"users": ["alice"]}, "timeout": "5m",
                                  "notify": {"slack": {"channel": CHANNEL}}},
                     "access": {"delegators": [{"principal": BRIDGE, "channel": "slack"}],
                                "identities": [{"principal": "alice", "aliases": ["alice@example.com"]},
                                               {"principal": "bob", "aliases": ["bob@example.com"]}]}}}


def _answer_buttons(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for b in blocks if b["type"] == "actions" for e in b["elements"]
            if e["action_id"].startswith(messages.ANSWER)]


def test_an_ask_user_question_is_answered_by_a_slack_option_and_the_hook_reads_the_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    ready = f"gateway {GATEWAY} ready: http://127.0.0.1:{{port}}/hooks/claude-code (hooks only: no upstream)"
    with gateway_and_bridge(tmp_path, monkeypatch, gateway=GATEWAY, docs=[_manifest()], tokens="dave:tok-dave\n",
                            users=USERS, channels={CHANNEL: CHANNEL_ID}, ready=ready) as stack:
        api, slack, port, bridge_url = stack.api, stack.slack, stack.port, stack.bridge_url
        log_path = stack.bridge_log
        box: dict[str, Ran] = {}
        hook = threading.Thread(target=lambda: box.update(ran=asyncio.run(command(
            f"http://127.0.0.1:{port}/hooks/claude-code", pre_tool_use("AskUserQuestion", ASKED),
            "tok-dave", 120))), daemon=True)
        hook.start()

        name = approval_name(GATEWAY, wait_for(lambda: stack.first_pending("tok-dave"), 30, "the held question"))

        def approval() -> dict[str, Any]:
            return api.emulator.get_object(TA, "default", name) or {}

        wait_for(lambda: ANNOTATION in (approval().get("metadata", {}).get("annotations") or {}), 30,
                 f"{name}'s message posted and noted\n{log_path.read_text()}")
        (post,) = [c for c in slack.of("chat.postMessage") if name in json.dumps(c.args.get("blocks"))]
        where = json.loads(approval()["metadata"]["annotations"][ANNOTATION])
        text = json.dumps(post.args["blocks"])
        assert "Which database should the shop use?" in text and "One file" in text, text

        # The options are buttons, each asking Slack's confirmation before it is sent.
        buttons = _answer_buttons(post.args["blocks"])
        assert [b["text"]["text"] for b in buttons] == ["PostgreSQL", "SQLite"]
        assert all(b["confirm"]["confirm"]["text"] == "Send this answer" for b in buttons)
        postgres = buttons[0]

        def click(user: str, value: str, secret: str = SECRET) -> httpx.Response:
            body = slack_api.block_action(user, where["channel"], where["ts"], postgres["action_id"], value)
            return httpx.post(f"{bridge_url}/slack/interactions", content=body,
                              headers=slack_api.signed(body, secret), timeout=10)

        def told(user: str, words: str) -> str:
            return str(wait_for(lambda: next((c.args["text"] for c in slack.of("chat.postEphemeral")
                                              if c.args.get("user") == user and words in c.args["text"]), None),
                                30, f"an ephemeral message to {user} containing {words!r}"))

        def votes() -> list[Any]:
            return list((approval().get("spec") or {}).get("votes") or [])

        # A forged click (not signed with the app's secret) is refused before anything is read.
        forged = click(ALICE, postgres["value"], secret="not-the-signing-secret")
        assert forged.status_code == 401, forged.text
        # A click whose button names an option the request never showed decides nothing.
        ref = messages.Ref.parse(json.loads(postgres["value"])["ref"])
        assert ref is not None
        assert click(ALICE, messages.answer_value(ref, 0, 7)).status_code == 200
        told(ALICE, NOT_THIS_REQUEST)
        # Bob is mapped but may not decide: his vote is recorded, not counted, and nothing is decided.
        assert click(BOB, postgres["value"]).status_code == 200
        bobs = wait_for(lambda: next((v for v in (approval().get("status") or {}).get("votes") or []
                                      if "bob" in str(v.get("by"))), None), 30, "bob's vote judged")
        assert not bobs.get("counted") and "bob may not decide this request" in bobs["note"], bobs
        told(BOB, "your vote does not count: bob may not decide this request")
        assert (approval().get("status") or {}).get("phase") == "Pending", approval().get("status")
        assert hook.is_alive(), box

        # Alice's click answers it: the hook gets a deny whose reason is the inbox's answer text.
        chosen = slack_api.block_action(ALICE, where["channel"], where["ts"], postgres["action_id"],
                                        postgres["value"])
        headers = slack_api.signed(chosen, SECRET)
        reply = httpx.post(f"{bridge_url}/slack/interactions", content=chosen, headers=headers, timeout=10)
        assert reply.status_code == 200, reply.text
        hook.join(60)
        assert not hook.is_alive(), log_path.read_text()
        ran = box["ran"]
        assert ran.code == 0, ran.err
        said = decision(ran.out)
        assert said["permissionDecision"] == "deny"
        inbox_text = held_questions.answer_reason("Which database should the shop use?", "PostgreSQL")
        assert inbox_text in said["permissionDecisionReason"], said
        status = wait_for(lambda: (s := approval().get("status") or {}).get("phase") == "Denied" and s, 30,
                          "the ToolApproval Denied")
        assert status["decidedBy"] == "alice" and status["source"] == "slack", status
        assert status["reason"] == inbox_text

        # The same signed click again is a replay: refused, and no vote is added.
        cast = len(votes())
        again = httpx.post(f"{bridge_url}/slack/interactions", content=chosen, headers=headers, timeout=10)
        assert (again.status_code, again.text) == (401, REPLAYED)
        assert len(votes()) == cast
        # Once decided, the message shows the outcome and no option buttons.
        wait_for(lambda: any(not _answer_buttons(c.args["blocks"]) and "Denied" in json.dumps(c.args["blocks"])
                             for c in slack.of("chat.update") if c.args.get("ts") == where["ts"]), 30,
                 "the message updated to Denied without options")


def _up(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False
