"""Claude Code's question tool answered in Slack (issue 39, docs/gateway.md "Claude Code", docs/slack.md): a real
hooks-only ``gatehouse-runtime gateway`` mirroring its held calls as ToolApprovals in the emulated Kubernetes API (with
the chart's admission policy), ``gatehouse slack`` as a process, the Slack Web API stand-in, and the real ``gatehouse
hook claude-code`` command waiting on an ``AskUserQuestion``. The message shows the question's options as buttons; a
signed click by an approver answers it, and the hook gets a deny carrying the inbox's own answer text. A click by
someone who may not decide, a forged click and a replayed one decide nothing."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from agent_runtime.kube.objects import approval_name
from agent_runtime.slack import messages
from agent_runtime.slack.decisions import NOT_THIS_REQUEST
from agent_runtime.slack.notifier import ANNOTATION
from agent_runtime.slack.signature import REPLAYED
from agent_runtime.ui import held_questions
from tests.hooks.test_hooks_e2e import Ran, command, decision, pre_tool_use
from tests.support import helm as helm_support
from tests.support import slack_api
from tests.support.kube_fixtures import Kubectl, kubectl_and_plugin, wait_for
from tests.support.kube_server import serve
from tests.support.processes import GATEHOUSE_CMD, free_port, running

pytestmark = pytest.mark.e2e

GATEWAY = "laptops"
TA = "gatehouse.dev/v1alpha1/toolapprovals"
BRIDGE = "system:serviceaccount:gatehouse-system:gatehouse-slack"
SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
TOKEN = "xoxb-test-token"
CHANNEL, CHANNEL_ID = "#ops-approvals", "C0OPSAPPROV"
ALICE, BOB = "U0ALICE", "U0BOB"  # alice may answer dave's questions; bob is mapped, but no approver
USERS = {"users": {ALICE: {"principal": "alice@example.com"}, BOB: {"principal": "bob@example.com"}}}
RUNTIME_CMD = [sys.executable, "-c", "from agent_runtime.clients.cli import runtime_main; runtime_main()"]
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
    kubectl_bin, _ = kubectl_and_plugin()
    (tmp_path / "tokens").write_text("dave:tok-dave\n")  # dave runs Claude Code
    (tmp_path / "users.yaml").write_text(yaml.safe_dump(USERS))
    (tmp_path / "gateway.yaml").write_text(yaml.safe_dump(_manifest()))
    port, bridge_port = free_port(), free_port()
    with serve() as api, slack_api.serve(channels={CHANNEL: CHANNEL_ID}) as slack:
        admin_config = api.kubeconfig_for(tmp_path / "kubeconfig-admin",
                                          api.emulator.add_user("cluster-admin", ["system:masters"]))
        monkeypatch.setenv("KUBECONFIG", str(admin_config))
        Kubectl(kubectl_bin, admin_config)("apply", "--validate=false", "-f", str(tmp_path / "gateway.yaml"))
        assert api.emulator.add_admission_documents(helm_support.admission_policy_documents()) == 1
        gateway_config = api.kubeconfig_for(tmp_path / "kubeconfig-gateway",
                                            api.emulator.add_service_account("default", GATEWAY))
        bridge_config = api.kubeconfig_for(tmp_path / "kubeconfig-bridge",
                                           api.emulator.add_service_account("gatehouse-system", "gatehouse-slack"))
        gateway = [*RUNTIME_CMD, "gateway", "-f", str(tmp_path / "gateway.yaml"), "--port", str(port),
                   "--api-token-file", str(tmp_path / "tokens"), "--state-dir", str(tmp_path / "state"),
                   "--kubeconfig", str(gateway_config), "--kube-namespace", "default",
                   "--trust-kubectl-without-admission-policy"]  # the emulator enforces the chart's policy anyway
        bridge = [*GATEHOUSE_CMD, "slack", "-n", "default", "--host", "127.0.0.1", "--port", str(bridge_port),
                  "--kubeconfig", str(bridge_config), "--users-file", str(tmp_path / "users.yaml"),
                  "--slack-api-url", slack.url, "--replay-namespace", "gatehouse-system"]
        env = {**os.environ, "SLACK_BOT_TOKEN": TOKEN, "SLACK_SIGNING_SECRET": SECRET, "KUBECONFIG": str(bridge_config)}
        log_path = tmp_path / "bridge.log"
        ready = f"gateway {GATEWAY} ready: http://127.0.0.1:{port}/hooks/claude-code (hooks only: no upstream)"
        with running(gateway, ready=ready, timeout=60), log_path.open("ab") as log:
            proc = subprocess.Popen(bridge, env=env, stdout=log, stderr=subprocess.STDOUT)
            try:
                bridge_url = f"http://127.0.0.1:{bridge_port}"
                wait_for(lambda: _up(bridge_url), 60, "the bridge's /healthz")
                box: dict[str, Ran] = {}
                hook = threading.Thread(target=lambda: box.update(ran=asyncio.run(command(
                    f"http://127.0.0.1:{port}/hooks/claude-code", pre_tool_use("AskUserQuestion", ASKED),
                    "tok-dave", 120))), daemon=True)
                hook.start()

                def held() -> str | None:  # the requester sees his own request over REST
                    listed = httpx.get(f"http://127.0.0.1:{port}/approvals", params={"state": "pending"},
                                       headers={"Authorization": "Bearer tok-dave"}, timeout=10).json()["approvals"]
                    return str(listed[0]["id"]) if listed else None

                name = approval_name(GATEWAY, wait_for(held, 30, "the held question"))

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
            finally:
                proc.terminate()
                proc.wait(10)


def _up(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False
