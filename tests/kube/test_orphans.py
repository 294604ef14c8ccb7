"""Nothing stays Pending for ever (agent_runtime/kube/orphans.py): the in-process runtime against the emulated API.

A ToolApproval whose request the runtime has no record of — left behind by a pod whose ``emptyDir`` database
went with it — becomes ``Orphaned`` at start-up and at every periodic check; one the runtime knows is never
touched, however new, and one it knows but shown as Orphaned gets its real status back. The Agent's
``status.pendingApprovals`` follows the store, whatever wrote the Agent's status in between.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agent_runtime.kube.objects import approval_name
from tests.kube.test_runtime import TA, App, _app, _events, app, phase, until  # noqa: F401  (the fixture)
from tests.support.kube_fixtures import Kubectl
from tests.support.kube_server import RunningEmulator
from tests.support.runtime import request_ids

pytestmark = pytest.mark.e2e

AGENTS = "gatehouse.dev/v1alpha1/agents"


def left_behind(request_id: str, agent: str = "file-manager", kind: str = "tool_approval") -> dict[str, Any]:
    """A Pending ToolApproval as a runtime mirrored it, for a request that runtime's lost database held."""
    questions = kind == "hitl_request"
    return {
        "apiVersion": "gatehouse.dev/v1alpha1", "kind": "ToolApproval",
        "metadata": {"name": approval_name(agent, request_id), "namespace": "default",
                     "labels": {"gatehouse.dev/agent": agent, "gatehouse.dev/kind": kind}},
        "spec": {"agentRef": agent, "contextId": "ctx-gone", "taskId": "task-gone", "requestId": request_id,
                 "tool": "hitl_request" if questions else "delete_file", "arguments": {"path": "gone.txt"}},
        "status": {"phase": "Pending", "approvals": "0/1", "required": 1, "votes": []},
    }


def seed(api: RunningEmulator, *docs: dict[str, Any]) -> None:
    for doc in docs:
        api.call(lambda doc=doc: api.emulator.seed(TA, doc))


def obj(api: RunningEmulator, request_id: str, agent: str = "file-manager") -> dict[str, Any]:
    return api.emulator.get_object(TA, "default", approval_name(agent, request_id)) or {}


def pending_approvals(api: RunningEmulator) -> int | None:
    return ((api.emulator.get_object(AGENTS, "default", "file-manager") or {}).get("status") or {}).get("pendingApprovals")


@pytest.fixture
async def restarted(
    tmp_path: Path, kube_api: RunningEmulator, kubectl: Kubectl, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[App]:
    """A runtime starting on an empty database while ToolApprovals of its lost one, of a lost hitl_request question
    and of another agent are still Pending in the cluster."""
    monkeypatch.setenv("GOOGLE_API_USE_CLIENT_CERTIFICATE", "false")
    seed(kube_api, left_behind("apr-lost1"), left_behind("hitl-lost2", kind="hitl_request"),
         left_behind("apr-theirs", agent="other-agent"))
    async for a in _app(tmp_path, kube_api, kubectl):
        yield a


async def test_at_start_an_unknown_request_is_orphaned_and_a_known_one_untouched(restarted: App) -> None:
    app, api = restarted, restarted.api  # noqa: F811
    (app.tools.sandbox / "fresh.txt").write_text("x")
    task = (await app.send("delete fresh.txt"))["task"]
    (known,) = request_ids(task)
    await until(lambda: phase(obj(api, known)) == "Pending", what="the new request mirrored")

    lost = await until(lambda: phase(obj(api, "apr-lost1")) == "Orphaned" and obj(api, "apr-lost1"), what="Orphaned")
    status = lost["status"]
    assert status["reason"].startswith("the runtime has no record of request apr-lost1: its state was lost (an ephemeral "
                                       "volume, a deleted database) or it belongs to another runtime")
    assert status["decidedAt"] and "approvals" not in status and "votes" not in status  # the whole status replaced
    question = await until(lambda: phase(obj(api, "hitl-lost2")) == "Orphaned" and obj(api, "hitl-lost2"), what="hitl")
    assert "no record of request hitl-lost2" in question["status"]["reason"]
    warning = await until(lambda: [m for r, m in _events(app) if r == "Orphaned"], what="the Warning Event")
    assert any(m.startswith(f"{approval_name('file-manager', 'apr-lost1')}: the runtime has no record") for m in warning)

    # A sweep now, with the known request pending: it stays Pending, and so does the other agent's object.
    assert app.runtime.kube is not None
    assert await app.runtime.kube.orphans.sweep() == []
    await app.runtime.kube.mirror.drained()
    assert phase(obj(api, known)) == "Pending" and "reason" not in obj(api, known)["status"]
    assert phase(obj(api, "apr-theirs", agent="other-agent")) == "Pending"
    await until(lambda: pending_approvals(api) == 1, what="pendingApprovals 1 (the orphans do not count)")


@pytest.fixture
async def checking(
    tmp_path: Path, kube_api: RunningEmulator, kubectl: Kubectl, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[App]:
    """A runtime that checks every half second."""
    monkeypatch.setenv("GOOGLE_API_USE_CLIENT_CERTIFICATE", "false")
    async for a in _app(tmp_path, kube_api, kubectl, check_seconds=0.5):
        yield a


async def test_periodically_an_unknown_request_is_orphaned(checking: App, kubectl: Kubectl, tmp_path: Path) -> None:
    app, api = checking, checking.api  # noqa: F811
    assert app.runtime.kube is not None
    await until(lambda: app.runtime.kube.orphans.sweeps >= 1, what="the start-up sweep")
    doc = left_behind("apr-later")
    del doc["status"]  # as created, before any status: Pending all the same
    (tmp_path / "later.json").write_text(json.dumps(doc))
    kubectl("apply", "--validate=false", "-f", str(tmp_path / "later.json"))
    # Nobody votes on it: only the periodic check can find it.
    orphaned = await until(lambda: phase(obj(api, "apr-later")) == "Orphaned" and obj(api, "apr-later"), timeout=10,
                           what="Orphaned by a periodic check")
    assert "no record of request apr-later" in orphaned["status"]["reason"]
    assert app.runtime.kube.orphans.sweeps >= 2


async def test_a_vote_on_an_unknown_request_orphans_it_at_once(app: App, kubectl: Kubectl, tmp_path: Path) -> None:  # noqa: F811
    api = app.api
    assert app.runtime.kube is not None
    await until(lambda: app.runtime.kube.orphans.sweeps >= 1, what="the start-up sweep")
    doc = left_behind("apr-voted")
    del doc["status"]
    doc["spec"]["votes"] = [{"by": "alice", "action": "Approve"}]
    (tmp_path / "voted.json").write_text(json.dumps(doc))
    kubectl("apply", "--validate=false", "-f", str(tmp_path / "voted.json"))  # the check runs every 60 s: not it
    await until(lambda: phase(obj(api, "apr-voted")) == "Orphaned", timeout=5, what="Orphaned by the watcher")


async def test_a_known_request_shown_as_orphaned_gets_its_status_back_and_the_count_is_rewritten(app: App) -> None:  # noqa: F811
    api = app.api
    assert app.runtime.kube is not None
    (app.tools.sandbox / "back.txt").write_text("x")
    task = (await app.send("delete back.txt"))["task"]
    (rid,) = request_ids(task)
    name = approval_name("file-manager", rid)
    await until(lambda: phase(obj(api, rid)) == "Pending", what="mirrored")
    await until(lambda: pending_approvals(api) == 1, what="pendingApprovals 1")
    # Another runtime with the same agent name (or this one, on a database since restored from a backup) judged it
    # Orphaned; and the operator wrote back a status it read before the request was made.
    wrong = {"status": {"phase": "Orphaned", "reason": "the runtime has no record of request …",
                        "decidedAt": "2026-01-01T00:00:00Z"}}
    await app.runtime.kube.client.merge_patch(f"{app.runtime.kube.mirror.path(name)}/status", wrong)
    await app.runtime.kube.client.merge_patch(app.runtime.kube.mirror.agent_status_path, {"status": {"pendingApprovals": 0}})
    copy = {**obj(api, rid), "metadata": {"name": f"{name}-copy", "namespace": "default",  # not the runtime's object
                                          "labels": obj(api, rid)["metadata"]["labels"]}}
    seed(api, copy)

    await app.runtime.kube.orphans.sweep()
    await app.runtime.kube.mirror.drained()
    status = obj(api, rid)["status"]
    assert status["phase"] == "Pending" and status["approvals"] == "0/1" and status["votes"] == []
    assert "reason" not in status and "decidedAt" not in status
    assert pending_approvals(api) == 1
    assert phase(api.emulator.get_object(TA, "default", f"{name}-copy")) == "Orphaned"  # a copy gets no status back


async def test_after_a_restart_on_the_same_database_nothing_is_orphaned_and_the_count_is_right(
    tmp_path: Path, kube_api: RunningEmulator, kubectl: Kubectl, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pods rolled: the new one recounts (the operator had written the status back with 0 meanwhile)."""
    monkeypatch.setenv("GOOGLE_API_USE_CLIENT_CERTIFICATE", "false")
    async for first in _app(tmp_path, kube_api, kubectl):
        (first.tools.sandbox / "kept.txt").write_text("x")
        (rid,) = request_ids((await first.send("delete kept.txt"))["task"])
        await until(lambda: pending_approvals(kube_api) == 1, what="pendingApprovals 1")
    kubectl("patch", "agent", "file-manager", "--subresource=status", "--type=merge",
            "-p", json.dumps({"status": {"pendingApprovals": 0}}))
    async for second in _app(tmp_path, kube_api, kubectl):
        kube = second.runtime.kube
        assert kube is not None
        await until(lambda k=kube: k.orphans.sweeps >= 1, what="the start-up sweep")
        await kube.mirror.drained()
        assert phase(obj(kube_api, rid)) == "Pending"
        await until(lambda: pending_approvals(kube_api) == 1, what="pendingApprovals 1 again")
    # The same pod rolled onto an empty volume: the ToolApproval is Orphaned and nothing is pending.
    async for _ in _app(tmp_path, kube_api, kubectl, state="empty-volume"):
        await until(lambda: phase(obj(kube_api, rid)) == "Orphaned", what="Orphaned")
        await until(lambda: pending_approvals(kube_api) == 0, what="pendingApprovals 0")


async def test_a_failing_store_orphans_nothing(app: App, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    api = app.api
    assert app.runtime.kube is not None
    seed(api, left_behind("apr-maybe"))

    found = app.runtime.approvals.get

    async def unreachable(request_id: str) -> None:
        raise ConnectionError("database unreachable")

    monkeypatch.setattr(app.runtime.approvals, "get", unreachable)
    with pytest.raises(ConnectionError):
        await app.runtime.kube.orphans.sweep()
    await app.runtime.kube.mirror.drained()
    assert phase(obj(api, "apr-maybe")) == "Pending"
    monkeypatch.setattr(app.runtime.approvals, "get", found)
    await app.runtime.kube.orphans.sweep()
    await until(lambda: phase(obj(api, "apr-maybe")) == "Orphaned", what="Orphaned once the store answers")
