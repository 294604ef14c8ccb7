"""The Slack bridge end to end: ``gatehouse slack`` as a process, against the emulated Kubernetes API (with the chart's
admission policy enforcing), a real ``gatehouse-runtime serve`` mirroring its requests as ToolApprovals, and a local
stand-in of the Slack Web API (tests/support/slack_api.py) that slack_sdk's WebClient is pointed at. Interactions are
posted to the bridge's endpoint shaped and signed as Slack documents them.

People: carol asks over A2A (a token). ``delete_file`` needs two approvals from group sre, not from the requester. In
Slack, U0ALICE is mapped by id (alice@example.com, sre; the Agent folds it into alice), U0BOB by the e-mail domain
(bob@example.com; sre from the mapping's groups table), U0MALLORY is nobody (her e-mail is elsewhere). On kubectl,
bob is bob@example.com in sre.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from agent_runtime.kube.objects import approval_name
from agent_runtime.slack import messages
from agent_runtime.slack.decisions import NOT_THIS_REQUEST, UNMAPPED
from agent_runtime.slack.endpoint import UNCHECKED
from agent_runtime.slack.notifier import ANNOTATION
from tests.support import helm as helm_support
from tests.support import slack_api
from tests.support.kube_fixtures import Kubectl, kubectl_and_plugin, wait_for
from tests.support.kube_server import RunningEmulator, serve
from tests.support.processes import free_port
from tests.support.runtime import Rpc, RuntimeProcess, Tools, demo_tools, request_ids, state, status_text, write_manifests

pytestmark = pytest.mark.e2e

AGENT = "file-manager"
TA = "gatehouse.dev/v1alpha1/toolapprovals"
BRIDGE = "system:serviceaccount:gatehouse-system:gatehouse-slack"
SECRET = "8f742231b10e8888abcd99yyyzzz85a5"  # the Slack app's signing secret (Slack's documentation example shape)
TOKEN = "xoxb-test-token"
CHANNEL, CHANNEL_ID = "#ops-approvals", "C0OPSAPPROV"
ALICE, BOB, MALLORY = "U0ALICE", "U0BOB", "U0MALLORY"
USERS = {"users": {ALICE: {"principal": "alice@example.com", "groups": ["sre"]}},
         "groups": {"sre": ["bob@example.com"]}}
POLICY = "gh-gatehouse-toolapproval-decision"


@dataclass
class Stack:
    api: RunningEmulator
    admin: Kubectl
    tools: Tools
    runtime: RuntimeProcess
    slack: slack_api.SlackStandIn
    bob: Kubectl
    plugin_path: str
    base: Path
    bridge_args: list[str]
    bridge_env: dict[str, str]
    bridge_url: str = ""
    bridge: subprocess.Popen[bytes] | None = None

    # -- the bridge process ---------------------------------------------------------------------------------------
    def start_bridge(self) -> None:
        self.bridge, self.bridge_url = self.spawn_bridge()

    def spawn_bridge(self) -> tuple[subprocess.Popen[bytes], str]:
        """One more ``gatehouse slack`` process (its own port), once its /healthz answers."""
        port = free_port()
        log = (self.base / "bridge.log").open("ab")
        proc = subprocess.Popen([*self.bridge_args, "--port", str(port)], env=self.bridge_env, stdout=log,
                                stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"

        def up() -> bool:
            assert proc.poll() is None, self.log()
            try:
                return httpx.get(f"{url}/healthz", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(up, 60, "the bridge's /healthz")
        return proc, url

    def stop_bridge(self) -> None:
        if self.bridge is not None:
            self.bridge.terminate()
            try:
                self.bridge.wait(10)
            except subprocess.TimeoutExpired:
                self.bridge.kill()
                self.bridge.wait(5)
            self.bridge = None

    def log(self) -> str:
        path = self.base / "bridge.log"
        return path.read_text(errors="replace") if path.exists() else ""

    # -- Kubernetes and the agent ---------------------------------------------------------------------------------
    def approval(self, name: str) -> dict[str, Any]:
        return self.api.emulator.get_object(TA, "default", name) or {}

    def status(self, name: str) -> dict[str, Any]:
        return self.approval(name).get("status") or {}

    def rpc(self) -> Rpc:
        return Rpc(self.runtime.url, "tok-carol")

    def pause(self, file: str) -> tuple[dict[str, Any], str, str]:
        (self.tools.sandbox / file).write_text(file)
        task = self.rpc().send(f"delete {file}")["task"]
        assert state(task) == "TASK_STATE_INPUT_REQUIRED", task
        (rid,) = request_ids(task)
        name = approval_name(AGENT, rid)
        wait_for(lambda: self.status(name).get("phase") == "Pending", 30, f"{name} Pending")
        return task, rid, name

    def finished(self, task: dict[str, Any]) -> dict[str, Any]:
        return wait_for(lambda: state(t := self.rpc().get_task(task["id"])) == "TASK_STATE_COMPLETED" and t, 60,
                        f"task {task['id']} completed")

    def waiting(self, task: dict[str, Any]) -> bool:
        return state(self.rpc().get_task(task["id"])) == "TASK_STATE_INPUT_REQUIRED"

    def cancel(self, task: dict[str, Any]) -> None:
        self.rpc().call("CancelTask", {"id": task["id"]})

    # -- Slack ----------------------------------------------------------------------------------------------------
    def posts(self, name: str) -> list[slack_api.Call]:
        return [c for c in self.slack.of("chat.postMessage") if name in json.dumps(c.args.get("blocks"))]

    def posted(self, name: str) -> dict[str, Any]:
        """The message posted for ``name``, once the bridge also noted where it is on the ToolApproval."""
        wait_for(lambda: ANNOTATION in (self.approval(name)["metadata"].get("annotations") or {}), 30,
                 f"{name}'s message posted and noted")
        (post,) = self.posts(name)
        where = json.loads(self.approval(name)["metadata"]["annotations"][ANNOTATION])
        return {"channel": where["channel"], "ts": where["ts"], "blocks": post.args["blocks"], "text": post.args["text"]}

    def shown(self, name: str, predicate: Any, what: str) -> list[dict[str, Any]]:
        """The newest blocks the message of ``name`` shows (post or update), once ``predicate(text)`` holds."""
        def newest() -> Any:
            where = json.loads(self.approval(name)["metadata"]["annotations"][ANNOTATION])
            updates = [c for c in self.slack.of("chat.update") if c.args.get("ts") == where["ts"]]
            blocks = updates[-1].args["blocks"] if updates else self.posts(name)[0].args["blocks"]
            return predicate(json.dumps(blocks)) and blocks

        return wait_for(newest, 30, what)

    def interact(self, body: str, timestamp: int | None = None, secret: str = SECRET) -> httpx.Response:
        return httpx.post(f"{self.bridge_url}/slack/interactions", content=body,
                          headers=slack_api.signed(body, secret, timestamp), timeout=10)

    def click(self, user: str, name: str, action: str, message: dict[str, Any] | None = None) -> httpx.Response:
        where = message or self.posted(name)
        value = next(e["value"] for b in where["blocks"] if b["type"] == "actions" for e in b["elements"])
        reply = self.interact(slack_api.block_action(user, where["channel"], where["ts"], action, value))
        assert reply.status_code == 200, reply.text
        return reply

    def told(self, user: str, text: str) -> str:
        """The ephemeral message the bridge showed ``user`` that contains ``text``."""
        return wait_for(lambda: next((c.args["text"] for c in self.slack.of("chat.postEphemeral")
                                      if c.args.get("user") == user and text in c.args["text"]), None), 30,
                        f"an ephemeral message to {user} containing {text!r}")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    kubectl_bin, plugin = kubectl_and_plugin()
    base = tmp_path_factory.mktemp("slack-e2e")
    (base / "tokens").write_text("carol:tok-carol\n")
    (base / "users.yaml").write_text(yaml.safe_dump(USERS))
    with serve() as api, demo_tools(base / "tools") as tools, pytest.MonkeyPatch.context() as mp, \
            slack_api.serve(channels={CHANNEL: CHANNEL_ID},
                            emails={BOB: "bob@example.com", MALLORY: "mallory@elsewhere.org"}) as slack:
        admin_config = api.kubeconfig_for(base / "kubeconfig-admin", api.emulator.add_user("cluster-admin", ["system:masters"]))
        mp.setenv("KUBECONFIG", str(admin_config))
        admin = Kubectl(kubectl_bin, admin_config)
        files = write_manifests(base / "manifests", tools.url, toolApprovers=[
            {"tool": "delete_file", "approvers": {"groups": ["sre"], "required": 2, "allowRequester": False}}])
        agent_file = next(f for f in files if yaml.safe_load(f.read_text())["kind"] == "Agent")
        doc = yaml.safe_load(agent_file.read_text())
        doc["spec"]["approval"]["notify"] = {"slack": {"channel": CHANNEL}}
        doc["spec"]["access"] = {"delegators": [{"principal": BRIDGE, "channel": "slack"}],
                                 "identities": [{"principal": "alice", "aliases": ["alice@example.com"]}]}
        agent_file.write_text(yaml.safe_dump(doc))
        for f in files:
            admin("apply", "--validate=false", "-f", str(f))
        condition = {"type": "AdmissionPolicy", "status": "True", "reason": "Enforced", "message": "enforced"}
        admin("patch", "agent", AGENT, "--subresource=status", "--type=merge",
              "-p", json.dumps({"status": {"conditions": [condition]}}))
        assert api.emulator.add_admission_documents(helm_support.admission_policy_documents()) == 1
        runtime_config = api.kubeconfig_for(base / "kubeconfig-runtime", api.emulator.add_service_account("default", AGENT))
        bridge_config = api.kubeconfig_for(base / "kubeconfig-bridge",
                                           api.emulator.add_service_account("gatehouse-system", "gatehouse-slack"))
        bob = admin.as_user(api.user_kubeconfig(base, "bob@example.com", ["sre"]))
        proc = RuntimeProcess(files, base / "state", base / "runtime.log", extra_args=[
            "--kubeconfig", str(runtime_config), "--kube-namespace", "default", "--log-level", "warning",
            "--api-token-file", str(base / "tokens")])
        proc.start(timeout=90)
        env = {**os.environ, "SLACK_BOT_TOKEN": TOKEN, "SLACK_SIGNING_SECRET": SECRET, "KUBECONFIG": str(bridge_config)}
        # `python -c` from the cwd, as the runtime is run: the code under test, not whichever the `gatehouse` script finds
        args = [sys.executable, "-c", "from agent_runtime.clients.cli import main; main()", "slack", "-n", "default",
                "--host", "127.0.0.1",
                "--kubeconfig", str(bridge_config), "--users-file", str(base / "users.yaml"), "--email-domain", "example.com",
                "--slack-api-url", slack.url, "--replay-namespace", "gatehouse-system"]
        s = Stack(api, admin, tools, proc, slack, bob, f"{plugin.parent}{os.pathsep}{os.environ.get('PATH', '')}", base,
                  args, env)
        s.start_bridge()
        try:
            yield s
        finally:
            s.stop_bridge()
            proc.stop()


def test_a_gated_call_is_posted_and_two_slack_approvals_run_it_once(stack: Stack) -> None:
    s = stack
    task, _rid, name = s.pause("two.txt")
    message = s.posted(name)
    assert message["channel"] == CHANNEL_ID
    (post,) = s.posts(name)
    assert post.args["channel"] == CHANNEL and post.token == TOKEN
    text = json.dumps(message["blocks"])
    for shown in ("*file-manager* wants to run `delete_file`", '\\"path\\": \\"two.txt\\"', "*Asked by*\\ncarol",
                  "Approve", "Deny", f"toolapproval default/{name}"):
        assert shown in text, shown
    # the runtime writes the status (who may decide, the count) just after the object: the message follows it
    s.shown(name, lambda t: "*Votes*: 0 of 2 approvals" in t and "*Waiting for*: a member of sre" in t, "0 of 2 shown")
    assert message["text"] == "file-manager: delete_file waits for approval"

    s.click(ALICE, name, messages.APPROVE)
    assert "approval recorded: 1 of 2 approvals" in s.told(ALICE, name)
    s.shown(name, lambda t: "1 of 2 approvals (alice)" in t and messages.APPROVE in t, "the message showing 1 of 2")
    (vote,) = s.status(name)["votes"]
    assert vote == {"by": "alice", "action": "Approve", "counted": True, "note": "", "via": "slack",
                    "seenAs": f"alice@example.com via {BRIDGE}"}  # the human and the bridge, both
    assert s.waiting(task) and not s.tools.executions("delete_file", "two.txt")

    s.click(BOB, name, messages.APPROVE)  # mapped by the e-mail in his Slack profile
    done = s.finished(task)
    assert "Delete of two.txt: deleted" in status_text(done)
    assert len(s.tools.executions("delete_file", "two.txt")) == 1
    final = s.shown(name, lambda t: "Approved by alice, bob@example.com" in t, "the message showing the outcome")
    assert not [b for b in final if b["type"] == "actions"]  # the buttons are gone
    assert s.status(name)["decidedBy"] == "alice, bob@example.com"
    # Named for the channel it came through, from who cast the ballots (the bridge delegator), not "kubectl".
    assert s.status(name)["source"] == "slack" and "(slack)" in json.dumps(final)


def test_deny_asks_why_and_the_model_is_told_the_reason(stack: Stack) -> None:
    s = stack
    task, _rid, name = s.pause("keep.txt")
    message = s.posted(name)
    s.click(ALICE, name, messages.DENY)
    opened = wait_for(lambda: [c for c in s.slack.of("views.open") if name in c.args["view"]["private_metadata"]], 30,
                      "the Deny dialog opened")
    view = opened[0].args["view"]
    assert view["callback_id"] == messages.DENY_VIEW and opened[0].args["trigger_id"].startswith(f"trigger-{ALICE}")
    assert not s.approval(name)["spec"].get("votes")  # opening the dialog decides nothing
    empty = s.interact(slack_api.view_submission(ALICE, messages.DENY_VIEW, view["private_metadata"], {
        messages.REASON_BLOCK: {messages.REASON_INPUT: {"type": "plain_text_input", "value": "   "}}}))
    assert empty.json()["response_action"] == "errors" and messages.REASON_BLOCK in empty.json()["errors"]
    sent = s.interact(slack_api.view_submission(ALICE, messages.DENY_VIEW, view["private_metadata"], {
        messages.REASON_BLOCK: {messages.REASON_INPUT: {"type": "plain_text_input", "value": "not during the freeze"}}}))
    assert sent.json() == {"response_action": "clear"}
    done = s.finished(task)
    assert "rejected by the user: not during the freeze" in status_text(done)
    assert not s.tools.executions("delete_file", "keep.txt") and (s.tools.sandbox / "keep.txt").exists()
    final = s.shown(name, lambda t: "Denied by alice" in t, "the message showing the denial")
    assert "not during the freeze" in json.dumps(final) and not [b for b in final if b["type"] == "actions"]
    assert "(slack)" in json.dumps(final) and s.status(name)["source"] == "slack"
    assert message["ts"] == json.loads(s.approval(name)["metadata"]["annotations"][ANNOTATION])["ts"]


def test_forgeries_replays_strangers_and_other_requests_decide_nothing(stack: Stack) -> None:
    s = stack
    task, _rid, name = s.pause("guarded.txt")
    message = s.posted(name)
    value = next(e["value"] for b in message["blocks"] if b["type"] == "actions" for e in b["elements"])
    approve = slack_api.block_action(ALICE, message["channel"], message["ts"], messages.APPROVE, value)
    # a wrong signing secret, a stale timestamp (six minutes), no signature at all: 401, nothing read
    assert s.interact(approve, secret="not-the-secret").status_code == 401
    assert s.interact(approve, timestamp=int(time.time()) - 360).status_code == 401
    assert httpx.post(f"{s.bridge_url}/slack/interactions", content=approve, timeout=10).status_code == 401
    # a stranger: told so, nothing written
    s.click(MALLORY, name, messages.APPROVE)
    assert s.told(MALLORY, "not mapped") == UNMAPPED
    # a button of this request sent as if from another message (another request's): refused
    _, _, other = s.pause("other.txt")
    elsewhere = s.posted(other)
    forged = slack_api.block_action(ALICE, elsewhere["channel"], elsewhere["ts"], messages.APPROVE, value)
    assert s.interact(forged).status_code == 200
    assert s.told(ALICE, "does not belong") == NOT_THIS_REQUEST
    time.sleep(1.0)  # the bridge had time to act on any of it
    assert not s.approval(name)["spec"].get("votes") and not s.approval(other)["spec"].get("votes")
    # alice's real click counts once; the same signed request again is a replay
    headers = slack_api.signed(approve, SECRET)
    first = httpx.post(f"{s.bridge_url}/slack/interactions", content=approve, headers=headers, timeout=10)
    again = httpx.post(f"{s.bridge_url}/slack/interactions", content=approve, headers=headers, timeout=10)
    assert (first.status_code, again.status_code, again.text) == (200, 401, "replayed request")
    wait_for(lambda: s.status(name).get("approvals") == "1/2", 30, "alice's one approval counted")
    time.sleep(1.0)
    assert len(s.approval(name)["spec"]["votes"]) == 1 and s.waiting(task)
    assert not s.tools.executions("delete_file", "guarded.txt")
    s.cancel(task)


def test_a_kubectl_decision_updates_the_message_and_a_later_click_is_told(stack: Stack) -> None:
    s = stack
    task, _rid, name = s.pause("kubectl.txt")
    message = s.posted(name)
    env = {**os.environ, "KUBECONFIG": str(s.bob.kubeconfig), "PATH": s.plugin_path}
    done = subprocess.run([s.admin.binary, "gatehouse", "deny", name, "--reason", "wrong file"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    final = s.shown(name, lambda t: "Denied by bob@example.com" in t, "the message updated after kubectl")
    assert "wrong file" in json.dumps(final) and "(kubectl)" in json.dumps(final)
    assert not [b for b in final if b["type"] == "actions"]
    s.click(ALICE, name, messages.APPROVE, message)  # a client still showing the old buttons
    assert s.told(ALICE, "already") == "This request is already denied by bob@example.com; nothing changed."
    assert [v["by"] for v in s.approval(name)["spec"]["votes"]] == ["bob@example.com"]
    assert "rejected by the user: wrong file" in status_text(s.finished(task))


def test_slack_down_and_a_restart_lose_nothing_and_post_once(stack: Stack) -> None:
    s = stack
    s.stop_bridge()
    task, _rid, name = s.pause("later.txt")  # made while the bridge is down
    before = len(s.slack.calls)
    s.slack.fail_next("chat.postMessage", 2, 503)
    s.slack.fail_next("chat.postMessage", 1, 429)
    s.start_bridge()
    s.posted(name)  # caught up from the ToolApprovals, through three failures
    failed = [c.answered for c in s.slack.calls[before:] if c.method == "chat.postMessage" and c.answered != 200]
    assert failed == [503, 503, 429]
    assert len(s.posts(name)) == 1
    # requests decided before the restart are not posted again, and their messages are not touched needlessly
    time.sleep(1.5)
    posts = [c for c in s.slack.of("chat.postMessage") if c.at > s.slack.calls[before].at]
    assert [json.dumps(c.args["blocks"]).count(name) > 0 for c in posts] == [True]
    s.cancel(task)
    s.shown(name, lambda t: "Canceled" in t, "the message showing the cancel")


def test_a_deny_click_replayed_after_a_restart_opens_no_second_dialog(stack: Stack) -> None:
    s = stack
    task, _rid, name = s.pause("replayed.txt")
    message = s.posted(name)
    value = next(e["value"] for b in message["blocks"] if b["type"] == "actions" for e in b["elements"])
    deny = slack_api.block_action(ALICE, message["channel"], message["ts"], messages.DENY, value)
    headers = slack_api.signed(deny, SECRET)  # captured once, sent again within its five minutes

    def dialogs() -> list[slack_api.Call]:
        return [c for c in s.slack.of("views.open") if name in c.args["view"]["private_metadata"]]

    assert httpx.post(f"{s.bridge_url}/slack/interactions", content=deny, headers=headers, timeout=10).status_code == 200
    wait_for(dialogs, 30, "the Deny dialog opened")
    s.stop_bridge()
    s.start_bridge()  # a new process: what the old one remembered in memory is gone
    again = httpx.post(f"{s.bridge_url}/slack/interactions", content=deny, headers=headers, timeout=10)
    assert (again.status_code, again.text) == (401, "replayed request")
    time.sleep(1.5)  # time for a second dialog, were one coming
    assert len(dialogs()) == 1 and not s.approval(name)["spec"].get("votes")
    assert s.waiting(task)
    s.cancel(task)


def test_the_same_signed_request_sent_to_two_bridges_is_accepted_once(stack: Stack) -> None:
    s = stack
    task, _rid, name = s.pause("twice.txt")
    message = s.posted(name)
    value = next(e["value"] for b in message["blocks"] if b["type"] == "actions" for e in b["elements"])
    approve = slack_api.block_action(ALICE, message["channel"], message["ts"], messages.APPROVE, value)
    headers = slack_api.signed(approve, SECRET)
    other, other_url = s.spawn_bridge()  # a second replica behind the same Request URL
    before = len(s.slack.calls)

    def answered() -> list[slack_api.Call]:
        return [c for c in s.slack.calls[before:] if c.method == "chat.postEphemeral" and c.args.get("user") == ALICE]

    try:
        start, answers = threading.Barrier(2), dict[str, httpx.Response]()

        def send(url: str) -> None:
            start.wait()
            answers[url] = httpx.post(f"{url}/slack/interactions", content=approve, headers=headers, timeout=10)

        senders = [threading.Thread(target=send, args=(url,)) for url in (s.bridge_url, other_url)]
        for t in senders:
            t.start()
        for t in senders:
            t.join(30)
        assert sorted((a.status_code, a.text) for a in answers.values()) == [(200, ""), (401, "replayed request")]
        wait_for(lambda: s.status(name).get("approvals") == "1/2", 30, "alice's one approval counted")
        wait_for(answered, 30, "alice answered")
        time.sleep(1.0)
        assert len(s.approval(name)["spec"]["votes"]) == 1 and s.waiting(task)
        assert len(answered()) == 1  # and she is answered once
    finally:
        other.terminate()
        other.wait(10)
    s.cancel(task)


def test_without_its_replay_memory_a_click_is_refused_not_let_through(stack: Stack) -> None:
    s = stack
    task, _rid, name = s.pause("unchecked.txt")
    message = s.posted(name)
    s.api.call(lambda: s.api.emulator.forbid("GET", r"/configmaps/gatehouse-slack-replays$"))  # RBAC gone, say
    try:
        value = next(e["value"] for b in message["blocks"] if b["type"] == "actions" for e in b["elements"])
        reply = s.interact(slack_api.block_action(ALICE, message["channel"], message["ts"], messages.APPROVE, value))
        assert (reply.status_code, reply.text) == (503, UNCHECKED)
        time.sleep(1.0)
        assert not s.approval(name)["spec"].get("votes") and s.waiting(task)
    finally:
        s.api.call(s.api.emulator.allow_all)
    s.cancel(task)
