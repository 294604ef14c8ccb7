"""The runtime in-process (ASGI) with the Kubernetes mirror and decision watcher on, against the emulated API.

Covers what the end-to-end tests (``test_kube_e2e.py``) are too slow for: a two-request batch decided one
ToolApproval at a time, an API that refuses writes (the agent is not blocked, the mirror catches up), a
watch whose history is compacted (410 Gone: list again), the retention, and an absent Agent.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from agent_runtime.app.factory import Runtime, build_app
from agent_runtime.app.settings import RuntimeSettings
from agent_runtime.approvals import Resolution
from agent_runtime.contract import wire
from agent_runtime.contract.manifests import select_agent_config
from agent_runtime.kube import KubeSettings
from agent_runtime.kube.objects import approval_name
from tests.support.inprocess import InProcessApp
from tests.support.kube_fixtures import Kubectl, until
from tests.support.kube_server import RunningEmulator
from tests.support.runtime import Tools, demo_tools, request_ids, state, status_text, write_manifests

pytestmark = pytest.mark.e2e

TA = "gatehouse.dev/v1alpha1/toolapprovals"


class App(InProcessApp):
    def __init__(self, client: httpx.AsyncClient, runtime: Runtime, tools: Tools, api: RunningEmulator) -> None:
        super().__init__(client, runtime, tools)
        self.api = api

    def approval(self, request_id: str) -> dict[str, Any] | None:
        return self.api.emulator.get_object(TA, "default", approval_name("file-manager", request_id))

    def agent(self) -> dict[str, Any] | None:
        return self.api.emulator.get_object("gatehouse.dev/v1alpha1/agents", "default", "file-manager")

    async def decide(self, request_id: str, action: str, reason: str = "", who: str = "alice") -> None:
        """A kubectl decision as the legacy ``spec.decision``, which the watcher counts as one vote by ``who``
        (``kubectl gatehouse approve|deny`` appends to ``spec.votes``: see test_kubectl_plugin.py, test_e2e.py)."""
        assert self.runtime.kube is not None
        path = self.runtime.kube.mirror.path(approval_name("file-manager", request_id))
        await self.runtime.kube.client.merge_patch(
            path, {"spec": {"decision": {"action": action, "reason": reason, "decidedBy": who}}}
        )


def phase(obj: dict[str, Any] | None) -> str | None:
    return (obj or {}).get("status", {}).get("phase")


async def _app(
    tmp_path: Path, api: RunningEmulator, kubectl: Kubectl, with_agent: bool = True, *, state: str = "state",
    mcp_url: str | None = None, wait_ready: bool = True, database_url: str | None = None,
    edit_agent: Callable[[dict[str, Any]], None] | None = None, tools_check_interval: float = 10.0, **kube: Any,
) -> AsyncIterator[App]:
    """The runtime in-process with its state in ``tmp_path/state`` (another ``state``: a pod that lost its volume),
    the demo tools (or ``mcp_url`` instead: e.g. one nothing listens on), and the kube settings ``kube``."""
    with demo_tools(tmp_path / "tools") as tools:
        # alice and bob decide with kubectl on the anonymous caller's tasks (auth off): name them, as deciding needs
        files = write_manifests(tmp_path / "m", mcp_url or tools.url, approvers={"users": ["alice", "bob", "anonymous"]})
        if edit_agent is not None:  # e.g. another toolNames
            (agent_file,) = [f for f in files if f.name == "agent.yaml"]
            doc = yaml.safe_load(agent_file.read_text())
            edit_agent(doc)
            agent_file.write_text(yaml.safe_dump(doc))
        if with_agent:
            for f in files:
                kubectl("apply", "--validate=false", "-f", str(f))
        config = select_agent_config(files)
        options = {"retention_seconds": 3600.0, "trust_kubectl": True, **kube}
        settings = KubeSettings("default", tmp_path / "kubeconfig", **options)
        starlette = build_app(RuntimeSettings(config=config, state_dir=tmp_path / state, kube=settings,
                                              database_url=database_url, tools_check_interval=tools_check_interval))
        runtime: Runtime = starlette.state.runtime
        async with starlette.router.lifespan_context(starlette):
            while wait_ready and not runtime.ready:
                await asyncio.sleep(0.05)
            transport = httpx.ASGITransport(app=starlette)
            headers = {"A2A-Version": "1.0"}
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", headers=headers) as client:
                yield App(client, runtime, tools, api)


@pytest.fixture
async def app(tmp_path: Path, kube_api: RunningEmulator, kubectl: Kubectl, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[App]:
    monkeypatch.setenv("GOOGLE_API_USE_CLIENT_CERTIFICATE", "false")
    async for a in _app(tmp_path, kube_api, kubectl):
        yield a


async def test_a_request_is_mirrored_and_a_kubectl_decision_resumes_the_task(app: App) -> None:
    (app.tools.sandbox / "one.txt").write_text("x")
    task = (await app.send("delete one.txt"))["task"]
    (rid,) = request_ids(task)
    name = approval_name("file-manager", rid)
    assert task["status"]["message"]["parts"][1]["data"]["action_requests"][0]["approval"] == name
    obj = await until(lambda: phase(app.approval(rid)) == "Pending" and app.approval(rid), what="the ToolApproval")
    meta, spec = obj["metadata"], obj["spec"]
    assert meta["labels"] == {"gatehouse.dev/agent": "file-manager", "gatehouse.dev/context": task["contextId"],
                              "gatehouse.dev/kind": "tool_approval"}
    assert meta["ownerReferences"][0]["uid"] == app.agent()["metadata"]["uid"]
    assert spec["agentRef"] == "file-manager" and spec["tool"] == "delete_file" and spec["arguments"] == {"path": "one.txt"}
    assert spec["taskId"] == task["id"] and spec["requestId"] == rid and spec["callId"]
    await until(lambda: app.agent()["status"].get("pendingApprovals") == 1, what="pendingApprovals 1")

    await app.decide(rid, "Approve", "looks fine")
    done = await until(lambda: _completed(app, task["id"]), what="the task completed")
    assert "Delete of one.txt" in status_text(done)
    assert len(app.tools.executions("delete_file", "one.txt")) == 1
    final = await until(lambda: phase(app.approval(rid)) == "Approved" and app.approval(rid), what="Approved")
    assert final["status"]["decidedBy"] == "alice" and final["status"]["source"] == "kubectl"
    assert final["status"]["reason"] == "looks fine" and final["status"]["decidedAt"]
    await until(lambda: app.agent()["status"].get("pendingApprovals") == 0, what="pendingApprovals 0")
    await until(lambda: _event_reasons(app) >= {"ApprovalRequested", "ApprovalApproved"}, what="both Events")
    (approved,) = [m for r, m in _events(app) if r == "ApprovalApproved"]
    assert f"approved by alice via kubectl: looks fine (toolapproval {name})" in approved


async def test_a_call_run_under_a_session_grant_is_a_granted_toolapproval(app: App) -> None:
    for name in ("g1.txt", "g2.txt"):
        (app.tools.sandbox / name).write_text("x")
    task = (await app.send("delete g1.txt"))["task"]
    glob = {"decision_type": "approve", "scope": "session", "grant": {"argument": "path", "glob": "g*.txt"}}
    assert state((await app.send(data=glob, task=task))["task"]) == "TASK_STATE_COMPLETED"
    again = (await app.send("delete g2.txt", context_id=task["contextId"]))["task"]
    assert state(again) == "TASK_STATE_COMPLETED" and len(app.tools.executions("delete_file", "g2.txt")) == 1
    granted = await until(lambda: [o for o in _approvals(app) if phase(o) == "Granted"], what="a Granted ToolApproval")
    (obj,) = granted
    assert obj["spec"]["arguments"] == {"path": "g2.txt"} and obj["spec"]["taskId"] == again["id"]
    assert obj["status"]["source"] == "grant" and obj["status"]["decidedBy"] == "anonymous"
    assert "session grant" in obj["status"]["reason"]
    await until(lambda: "ApprovalGranted" in _event_reasons(app), what="the ApprovalGranted Event")
    (message,) = [m for r, m in _events(app) if r == "ApprovalGranted"]
    assert "delete_file(path='g2.txt') granted by anonymous via grant" in message


def _approvals(app: App) -> list[dict[str, Any]]:
    return app.api.call(lambda: [o.raw for (res, _, _), o in app.api.emulator._objects.items()
                                 if res.plural == "toolapprovals" and not o.deleted])


async def _completed(app: App, task_id: str) -> dict[str, Any] | None:
    got = await app.get(task_id)
    return got if state(got) == "TASK_STATE_COMPLETED" else None


def _events(app: App) -> list[tuple[str, str]]:
    def collect() -> list[tuple[str, str]]:
        return [
            (o.raw.get("reason"), o.raw.get("message")) for (res, _, _), o in app.api.emulator._objects.items()
            if res.plural == "events" and not o.deleted and o.raw.get("reportingComponent") == "gatehouse.dev"
        ]
    return app.api.call(collect)


def _event_reasons(app: App) -> set[str]:
    return {reason for reason, _ in _events(app)}


async def test_a_batch_decided_one_toolapproval_at_a_time_resumes_once_with_every_resolution(app: App) -> None:
    for f in ("a.txt", "b.txt"):
        (app.tools.sandbox / f).write_text("x")
    task = (await app.send("clean up a.txt and b.txt"))["task"]
    first, second = request_ids(task)
    await until(lambda: phase(app.approval(second)) == "Pending", what="both mirrored")

    await app.decide(first, "Approve")
    await until(lambda: phase(app.approval(first)) == "Approved", what="first Approved")
    # As over REST: each request is decided on its own; the task waits, untouched, until none is pending.
    waiting = await app.get(task["id"])
    assert state(waiting) == "TASK_STATE_INPUT_REQUIRED"
    assert second in request_ids(waiting) and phase(app.approval(second)) == "Pending"
    assert app.tools.executions("delete_file") == []

    await app.decide(second, "Deny", "b stays")
    done = await until(lambda: _completed(app, task["id"]), what="the task completed")
    assert set(done["status"]["message"]["metadata"]["decisions"]) == {first, second}
    assert "rejected by the user: b stays" in status_text(done)
    assert [x["args"]["path"] for x in app.tools.executions("delete_file")] == ["a.txt"]
    assert (app.tools.sandbox / "b.txt").exists()
    await until(lambda: phase(app.approval(second)) == "Denied", what="second Denied")


async def test_a2a_first_then_a_late_kubectl_decision_is_ignored(app: App) -> None:
    (app.tools.sandbox / "c.txt").write_text("x")
    task = (await app.send("delete c.txt"))["task"]
    (rid,) = request_ids(task)
    await until(lambda: phase(app.approval(rid)) == "Pending", what="mirrored")
    done = (await app.send(data=wire.deny_all("not today"), task=task))["task"]
    assert state(done) == "TASK_STATE_COMPLETED"
    obj = await until(lambda: phase(app.approval(rid)) == "Denied" and app.approval(rid), what="Denied")
    assert obj["status"]["source"] == "a2a" and obj["status"]["reason"] == "not today"
    # A decision written anyway (say, without the plugin's check) changes nothing, and the status stays true.
    await app.decide(rid, "Approve", who="mallory")
    await asyncio.sleep(1.0)
    await app.runtime.kube.mirror.drained()
    obj = app.approval(rid)
    assert phase(obj) == "Denied" and obj["status"]["source"] == "a2a" and obj["status"]["decidedBy"] != "mallory"
    assert app.tools.executions("delete_file") == []


async def test_an_api_in_trouble_never_blocks_the_agent_and_the_mirror_catches_up(app: App) -> None:
    app.api.emulator.forbid("POST", "/toolapprovals$", status=503)
    (app.tools.sandbox / "d.txt").write_text("x")
    task = (await app.send("delete d.txt"))["task"]
    (rid,) = request_ids(task)
    done = (await app.send(data=wire.approve_all(), task=task))["task"]  # the agent works regardless
    assert state(done) == "TASK_STATE_COMPLETED" and len(app.tools.executions("delete_file", "d.txt")) == 1
    assert app.approval(rid) is None  # still being retried, with backoff
    app.api.emulator.allow_all()
    obj = await until(lambda: phase(app.approval(rid)) == "Approved" and app.approval(rid), what="caught up")
    assert obj["status"]["source"] == "a2a"


async def test_a_403_is_tried_again_as_an_api_server_that_has_just_started_answers_it(app: App) -> None:
    """The real kube-apiserver, started again, refuses with 403 ('clusterrole ... not found') until its RBAC cache is
    filled (tests/cluster/test_runtime.py): the ToolApproval is written once it stops, without waiting for a decision."""
    app.api.emulator.forbid("POST", "/toolapprovals$")
    (app.tools.sandbox / "g.txt").write_text("x")
    task = (await app.send("delete g.txt"))["task"]
    (rid,) = request_ids(task)
    await asyncio.sleep(1.0)  # refused a few times
    assert app.approval(rid) is None
    app.api.emulator.allow_all()
    await until(lambda: phase(app.approval(rid)) == "Pending", what="written after the refusals")


async def test_a_refused_write_is_dropped_and_later_ones_go_through(app: App) -> None:
    app.api.emulator.forbid("POST", "/toolapprovals$", status=422)  # invalid: retrying cannot help
    (app.tools.sandbox / "e.txt").write_text("x")
    task = (await app.send("delete e.txt"))["task"]
    await app.runtime.kube.mirror.drained()
    app.api.emulator.allow_all()
    done = (await app.send(data=wire.approve_all(), task=task))["task"]
    assert state(done) == "TASK_STATE_COMPLETED"
    (rid,) = request_ids(task)
    obj = await until(lambda: phase(app.approval(rid)) == "Approved" and app.approval(rid), what="created on decision")
    assert obj["status"]["source"] == "a2a"


async def test_the_watch_lists_again_after_410_gone(app: App) -> None:
    (app.tools.sandbox / "f.txt").write_text("x")
    task = (await app.send("delete f.txt"))["task"]
    (rid,) = request_ids(task)
    await until(lambda: phase(app.approval(rid)) == "Pending", what="mirrored")
    assert app.runtime.kube is not None
    before = app.runtime.kube.watcher.relists
    app.api.emulator.compact()  # the open watch ends; resuming from its version answers 410 Gone
    await until(lambda: app.runtime.kube.watcher.relists > before, what="a relist")
    await app.decide(rid, "Approve")
    await until(lambda: _completed(app, task["id"]), what="the task completed")
    assert len(app.tools.executions("delete_file", "f.txt")) == 1


@pytest.fixture
async def short_app(
    tmp_path: Path, kube_api: RunningEmulator, kubectl: Kubectl, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[App]:
    """No Agent object in the cluster, and finished ToolApprovals kept for one second only."""
    monkeypatch.setenv("GOOGLE_API_USE_CLIENT_CERTIFICATE", "false")
    async for a in _app(tmp_path, kube_api, kubectl, with_agent=False, retention_seconds=1.0):
        yield a


async def test_without_an_agent_object_and_with_a_short_retention(short_app: App, caplog: pytest.LogCaptureFixture) -> None:
    app = short_app
    (app.tools.sandbox / "g.txt").write_text("x")
    task = (await app.send("delete g.txt"))["task"]
    (rid,) = request_ids(task)
    obj = await until(lambda: phase(app.approval(rid)) == "Pending" and app.approval(rid), what="mirrored")
    assert "ownerReferences" not in obj["metadata"]
    assert "Agent default/file-manager not found" in caplog.text
    await app.decide(rid, "Deny", "no")
    await until(lambda: _completed(app, task["id"]), what="the task completed")
    await until(lambda: phase(app.approval(rid)) == "Denied", what="Denied")
    await until(lambda: app.approval(rid) is None, timeout=10, what="deleted after the retention")


async def test_a2a_and_an_internal_decision_at_once_leave_one_clean_outcome(app: App) -> None:
    for round_ in range(3):
        f = f"race{round_}.txt"
        (app.tools.sandbox / f).write_text("x")
        task = (await app.send(f"delete {f}"))["task"]
        (rid,) = request_ids(task)
        internal = app.runtime.resumer.resume(
            task["id"], task["contextId"], {rid: Resolution("approved")},
            "kubectl", "Approved by alice via kubectl.",
        )
        order = [internal, app.send_reply(data=wire.approve_all(), task=task)]
        if round_ % 2:
            order.reverse()
        results = await asyncio.gather(*order)
        a2a = results[0] if round_ % 2 else results[1]
        # The A2A message decided, or was told "Already decided" (-32004 once the task finished by kubectl).
        assert "result" in a2a or a2a["error"]["code"] == -32004, a2a
        done = await app.get(task["id"])
        assert state(done) == "TASK_STATE_COMPLETED", status_text(done)
        assert f"Delete of {f}" in status_text(done), status_text(done)
        assert done["status"]["message"]["metadata"]["decisions"][rid]["source"] in ("a2a", "kubectl")
        assert len(app.tools.executions("delete_file", f)) == 1


async def test_kubectl_decides_one_request_and_a2a_the_rest(app: App) -> None:
    for f in ("m1.txt", "m2.txt"):
        (app.tools.sandbox / f).write_text("x")
    task = (await app.send("clean up m1.txt and m2.txt"))["task"]
    first, second = request_ids(task)
    await until(lambda: phase(app.approval(second)) == "Pending", what="both mirrored")
    await app.decide(first, "Deny", "m1 stays")
    await until(lambda: phase(app.approval(first)) == "Denied", what="first Denied")
    replay = (await app.send(data=wire.approve_all(), task=task))["task"]  # approves what is still pending
    assert state(replay) == "TASK_STATE_COMPLETED"
    decisions = replay["status"]["message"]["metadata"]["decisions"]
    assert {k: (v["outcome"], v["source"]) for k, v in decisions.items()} == {
        first: ("denied", "kubectl"), second: ("approved", "a2a")}
    assert [x["args"]["path"] for x in app.tools.executions("delete_file")] == ["m2.txt"]
    await until(lambda: phase(app.approval(second)) == "Approved", what="second Approved")


async def test_a_decision_written_while_the_watch_is_down_is_applied_when_it_lists_again(app: App) -> None:
    (app.tools.sandbox / "h.txt").write_text("x")
    task = (await app.send("delete h.txt"))["task"]
    (rid,) = request_ids(task)
    await until(lambda: phase(app.approval(rid)) == "Pending", what="mirrored")
    app.api.emulator.forbid("GET", "/toolapprovals$", status=503)  # lists and watches fail
    app.api.emulator.compact()  # the open watch ends
    await asyncio.sleep(0.5)
    await app.decide(rid, "Approve", who="bob")
    await asyncio.sleep(1.0)
    assert state(await app.get(task["id"])) == "TASK_STATE_INPUT_REQUIRED"
    app.api.emulator.allow_all()
    await until(lambda: _completed(app, task["id"]), what="the task completed after the relist")
    obj = await until(lambda: phase(app.approval(rid)) == "Approved" and app.approval(rid), what="Approved")
    assert obj["status"]["decidedBy"] == "bob"
