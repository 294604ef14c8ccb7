"""The bridge's port, proven with a second channel: :mod:`tests.bridges.recording_channel` (a notifier posting to a
real HTTP server on 127.0.0.1, and a table of people) runs on the same :mod:`agent_runtime.bridges` code as Slack,
against the emulated Kubernetes API with the chart's admission policy, and a runtime in-process (its mirror and
watcher). A new channel is that one module.

And the channel a vote came through is derived from who cast it, never from a field the voter writes: a ballot's
``via``/``channel``/``source`` is ignored whoever writes it (the recorder bridge, a delegator named ``channel: slack``,
a person on kubectl).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from agent_runtime.access.settings import load_access_settings
from agent_runtime.app.factory import Runtime, build_app
from agent_runtime.app.settings import RuntimeSettings
from agent_runtime.bridges import Ballots, MessageKeeper, Person, Ref
from agent_runtime.bridges.ballots import NOT_THIS_REQUEST, unmapped
from agent_runtime.bridges.requests import posted
from agent_runtime.contract.manifests import select_agent_config
from agent_runtime.kube import KubeSettings, toolapproval_client
from agent_runtime.kube.client import KubeClient
from agent_runtime.kube.objects import approval_name
from tests.bridges import recording_channel
from tests.bridges.recording_channel import ANNOTATION, People, RecordingNotifier, decide
from tests.support import helm as helm_support
from tests.support.inprocess import InProcessApp
from tests.support.kube_fixtures import Kubectl, until
from tests.support.kube_server import RunningEmulator
from tests.support.runtime import demo_tools, request_ids, state, status_text, write_manifests

pytestmark = pytest.mark.e2e

TA = "gatehouse.dev/v1alpha1/toolapprovals"
AGENT = "file-manager"
ROOM = "ops-approvals"
RECORDER = "system:serviceaccount:gatehouse-system:gatehouse-recorder"  # a delegator with no channel named
SLACK = "system:serviceaccount:gatehouse-system:gatehouse-slack"  # the delegator named ``channel: slack``
SRE = ["sre"]
PEOPLE = {"u-alice": Person("alice@example.com", ("sre",)), "u-bob": Person("bob@example.com", ("sre",))}


@dataclass
class Stack:
    app: InProcessApp
    api: RunningEmulator
    service: recording_channel.Service
    ballots: Ballots
    base: Path

    def approval(self, name: str) -> dict[str, Any]:
        return self.api.emulator.get_object(TA, "default", name) or {}

    def status(self, name: str) -> dict[str, Any]:
        return self.approval(name).get("status") or {}

    async def pause(self, file: str) -> tuple[dict[str, Any], str]:
        (self.app.tools.sandbox / file).write_text(file)
        reply = await self.app.send_reply(f"delete {file}")
        assert "result" in reply, reply
        task = reply["result"]["task"]
        (rid,) = request_ids(task)
        name = approval_name(AGENT, rid)
        await until(lambda: self.status(name).get("phase") == "Pending", what=f"{name} Pending")
        return task, name

    async def posted(self, name: str) -> dict[str, str]:
        """Where the channel shows ``name``, once the bridge noted it on the ToolApproval."""
        where: dict[str, str] = await until(lambda: posted(self.approval(name), ANNOTATION, ("room", "id")),
                                            what=f"{name}'s message noted")
        return where

    async def told(self, user: str, text: str) -> str:
        found: str = await until(lambda: next((t["text"] for t in self.service.of("/tell")
                                               if t["user"] == user and text in t["text"]), None),
                                 what=f"{user} told {text!r}")
        return found

    async def shows(self, message_id: str, **fields: str) -> dict[str, Any]:
        """The newest thing the channel shows in message ``message_id`` (``m-N``: the Nth post), once it has
        ``fields``."""
        def newest() -> dict[str, Any] | None:
            posts = self.service.of("/post")
            number = int(message_id.removeprefix("m-"))
            seen = [*posts[number - 1:number], *[b for b in self.service.of("/update") if b["id"] == message_id]]
            return seen[-1] if seen and all(seen[-1].get(k) == v for k, v in fields.items()) else None

        found: dict[str, Any] = await until(newest, what=f"message {message_id} showing {fields}")
        return found

    async def ballot(self, kubeconfig: Path, name: str, **extra: Any) -> None:
        """Append an Approve as the user of ``kubeconfig`` (``by`` and ``groups`` theirs: the admission policy checks
        them), with ``extra`` fields."""
        def write() -> None:
            client = toolapproval_client.connect(config_file=str(kubeconfig))
            by, groups = toolapproval_client.identity(client)
            votes = [*self.approval(name)["spec"].get("votes", []),
                     {"by": by, "groups": groups, "action": "Approve", **extra}]
            client.CustomObjectsApi().patch_namespaced_custom_object(
                "gatehouse.dev", "v1alpha1", "default", "toolapprovals", name, {"spec": {"votes": votes}})

        await asyncio.to_thread(write)


@pytest.fixture
async def stack(tmp_path: Path, kube_api: RunningEmulator, kubectl: Kubectl,
                monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Stack]:
    monkeypatch.setenv("GOOGLE_API_USE_CLIENT_CERTIFICATE", "false")
    with demo_tools(tmp_path / "tools") as tools, recording_channel.service() as service:
        files = write_manifests(tmp_path / "m", tools.url, toolApprovers=[
            {"tool": "delete_file", "approvers": {"groups": SRE, "required": 2, "allowRequester": False}}])
        agent_file = next(f for f in files if yaml.safe_load(f.read_text())["kind"] == "Agent")
        doc = yaml.safe_load(agent_file.read_text())
        doc["metadata"].setdefault("annotations", {})["recorder.example/room"] = ROOM
        doc["spec"]["access"] = {"delegators": [{"principal": RECORDER}, {"principal": SLACK, "channel": "slack"}]}
        agent_file.write_text(yaml.safe_dump(doc))
        for f in files:
            kubectl("apply", "--validate=false", "-f", str(f))
        assert kube_api.emulator.add_admission_documents(helm_support.admission_policy_documents()) == 1
        emulator = kube_api.emulator
        runtime_config = kube_api.kubeconfig_for(tmp_path / "kubeconfig-runtime", emulator.add_service_account("default", AGENT))
        bridge_config = kube_api.kubeconfig_for(
            tmp_path / "kubeconfig-recorder", emulator.add_service_account("gatehouse-system", "gatehouse-recorder"))
        kube_api.kubeconfig_for(tmp_path / "kubeconfig-slack",
                                emulator.add_service_account("gatehouse-system", "gatehouse-slack"))
        kube_api.user_kubeconfig(tmp_path, "bob@example.com", SRE)
        config = select_agent_config(files)
        (tmp_path / "tokens").write_text("carol:tok-carol\n")
        access = load_access_settings(config.access, token_file=tmp_path / "tokens", env={})
        settings = KubeSettings("default", runtime_config, trust_kubectl=True)
        starlette = build_app(RuntimeSettings(config=config, state_dir=tmp_path / "state", kube=settings, access=access))
        runtime: Runtime = starlette.state.runtime
        notifier = RecordingNotifier(service.url)
        kube = KubeClient.connect(bridge_config, False)
        keeper = MessageKeeper(kube, notifier, ["default"])
        ballots = Ballots(kube, toolapproval_client.connect(config_file=str(bridge_config)), notifier, People(PEOPLE),
                          wait=10.0)
        async with starlette.router.lifespan_context(starlette):
            while not runtime.ready:
                await asyncio.sleep(0.05)
            keeper.start()
            transport = httpx.ASGITransport(app=starlette)
            headers = {"A2A-Version": "1.0", "Authorization": "Bearer tok-carol"}
            try:
                async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", headers=headers) as client:
                    yield Stack(InProcessApp(client, runtime, tools), kube_api, service, ballots, tmp_path)
            finally:
                await keeper.stop()
                await kube.aclose()


async def test_a_second_channel_shows_a_request_and_two_people_decide_it_through_the_shared_bridge(stack: Stack) -> None:
    s = stack
    task, name = await s.pause("two.txt")
    where = await s.posted(name)
    assert where["room"] == ROOM and where["id"] == "m-1"
    (first,) = [b for b in s.service.of("/post") if b["name"] == name]
    assert (first["room"], first["tool"], first["phase"]) == (ROOM, "delete_file", "Pending")
    await s.shows("m-1", approvals="0/2")  # the runtime's status, written just after the object: the message follows
    ref = Ref("default", name, s.approval(name)["spec"]["requestId"])
    place = {"room": ROOM, "id": "m-1"}

    await decide(s.ballots, "u-alice", ref, place, "Approve")
    assert "approval recorded: 1 of 2 approvals" in await s.told("u-alice", name)
    (vote,) = s.status(name)["votes"]
    # the human, on behalf of whom the recorder voted; named kubectl, because that is what its delegator entry says
    assert vote == {"by": "alice@example.com", "action": "Approve", "counted": True, "note": "", "via": "kubectl",
                    "seenAs": f"alice@example.com via {RECORDER}"}
    await s.shows("m-1", approvals="1/2")
    assert s.app.tools.executions("delete_file", "two.txt") == []

    # nobody the channel knows, and a click from another message: told, nothing written
    await decide(s.ballots, "u-mallory", ref, place, "Approve")
    assert await s.told("u-mallory", "not mapped") == unmapped("Recorder")
    await decide(s.ballots, "u-bob", ref, {"room": ROOM, "id": "m-9"}, "Approve")
    assert await s.told("u-bob", "does not belong") == NOT_THIS_REQUEST
    assert len(s.approval(name)["spec"]["votes"]) == 1

    await decide(s.ballots, "u-bob", ref, place, "Approve")
    done = await until(lambda: _completed(s, task["id"]), what="the task completed")
    assert "Delete of two.txt: deleted" in status_text(done)
    assert len(s.app.tools.executions("delete_file", "two.txt")) == 1
    final = await s.shows("m-1", phase="Approved")
    assert final["decidedBy"] == "alice@example.com, bob@example.com"
    assert len([b for b in s.service.of("/post") if b["name"] == name]) == 1  # posted once, updated since
    # a later click is told it is decided
    await decide(s.ballots, "u-alice", ref, place, "Approve")
    assert await s.told("u-alice", "already") == (
        "This request is already approved by alice@example.com, bob@example.com; nothing changed.")


async def test_a_post_the_channel_refuses_is_not_noted_on_the_toolapproval(stack: Stack) -> None:
    s = stack
    s.service.refuse.add(ROOM)
    _task, name = await s.pause("nowhere.txt")
    await until(lambda: [b for b in s.service.of("/post") if b["name"] == name], what="the refused post")
    await asyncio.sleep(1.0)
    assert ANNOTATION not in (s.approval(name)["metadata"].get("annotations") or {})


@pytest.mark.parametrize(("writer", "written", "via"), [
    ("recorder", {"via": "slack", "channel": "slack", "source": "slack"}, "kubectl"),  # a bridge cannot claim slack
    ("slack", {"via": "kubectl", "channel": "rest", "source": "inbox"}, "slack"),  # … nor the Slack bridge hide it
], ids=["recorder-writes-slack", "slack-bridge-writes-kubectl"])
async def test_a_channel_written_on_a_ballot_is_ignored_the_delegator_names_it(
        stack: Stack, writer: str, written: dict[str, str], via: str) -> None:
    s = stack
    task, name = await s.pause("named.txt")
    config, claim = s.base / f"kubeconfig-{writer}", {"user": "alice@example.com", "groups": SRE}
    await s.ballot(config, name, onBehalfOf=claim, **written)
    # stored as written (a real API server prunes fields its schema lacks; the emulator keeps them, the worse case)
    assert written.items() <= s.approval(name)["spec"]["votes"][0].items()
    (vote,) = await until(lambda: s.status(name).get("votes"), what="the vote judged")
    assert (vote["by"], vote["counted"], vote["via"]) == ("alice@example.com", True, via)
    assert state(await s.app.get(task["id"])) == "TASK_STATE_INPUT_REQUIRED"


async def test_a_persons_own_ballot_is_kubectl_whatever_channel_it_writes(stack: Stack) -> None:
    s = stack
    _task, name = await s.pause("mine.txt")
    bob = next(s.base.glob("kubeconfig-bob*"))
    await s.ballot(bob, name, via="slack", channel="slack")
    assert s.approval(name)["spec"]["votes"][0]["via"] == "slack"
    (vote,) = await until(lambda: s.status(name).get("votes"), what="the vote judged")
    assert (vote["by"], vote["counted"], vote["via"]) == ("bob@example.com", True, "kubectl")


async def _completed(s: Stack, task_id: str) -> dict[str, Any] | None:
    got = await s.app.get(task_id)
    return got if state(got) == "TASK_STATE_COMPLETED" else None
