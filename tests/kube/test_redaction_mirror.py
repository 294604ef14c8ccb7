"""A secret in a tool call's arguments, against the emulated Kubernetes API: the ToolApproval (readable by
``gatehouse-viewer``) and the Events (readable by the built-in ``view`` role) show it redacted, with the real
arguments' hash and the redacted paths; a kubectl vote on that ToolApproval still counts, and the approved call runs
with the real arguments. A ToolApproval whose shown arguments were changed decides nothing.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent_runtime.approvals import args_hash
from agent_runtime.kube.objects import approval_name
from tests.kube.test_runtime import App, _app, _completed, _events, phase, until
from tests.support.kube_fixtures import Kubectl
from tests.support.kube_server import RunningEmulator
from tests.support.runtime import request_ids, state

pytestmark = pytest.mark.e2e

SECRET = "sk-live-4eC39HqLyjWDarjtT1zdp7dc"


@pytest.fixture
async def app(tmp_path: Path, kube_api: RunningEmulator, kubectl: Kubectl, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[App]:
    monkeypatch.setenv("GOOGLE_API_USE_CLIENT_CERTIFICATE", "false")
    async for a in _app(tmp_path, kube_api, kubectl):
        yield a


def _everything(app: App) -> str:
    """Every object the emulated API holds, as JSON (ToolApprovals, Events, the Agent…)."""
    return app.api.call(lambda: json.dumps([o.raw for o in app.api.emulator._objects.values()], default=str))


async def test_the_cluster_sees_the_arguments_redacted_and_a_kubectl_vote_counts(app: App) -> None:
    task = (await app.send(f"write {SECRET} to creds.txt"))["task"]
    (rid,) = request_ids(task)
    obj = await until(lambda: phase(app.approval(rid)) == "Pending" and app.approval(rid), what="the ToolApproval")
    spec = obj["spec"]
    assert spec["arguments"] == {"path": "creds.txt", "content": "«redacted»"}
    assert spec["argumentsHash"] == args_hash("write_file", {"path": "creds.txt", "content": SECRET})
    assert spec["redacted"] == ["$.content"]
    (requested,) = await until(lambda: [m for r, m in _events(app) if r == "ApprovalRequested"], what="the Event")
    assert requested.startswith("write_file(") and "content='«redacted»'" in requested

    await app.decide(rid, "Approve", "fine")  # the watcher finds the request it wrote, redacted, unchanged
    done = await until(lambda: _completed(app, task["id"]), what="the task completed")
    assert state(done) == "TASK_STATE_COMPLETED"
    assert (app.tools.sandbox / "creds.txt").read_text() == SECRET  # bound to, and run with, the real arguments
    await until(lambda: phase(app.approval(rid)) == "Approved", what="Approved")
    (approved,) = await until(lambda: [m for r, m in _events(app) if r == "ApprovalApproved"], what="the Event")
    assert "content='«redacted»'" in approved and "approved by alice via kubectl" in approved
    assert SECRET not in _everything(app)


async def test_a_toolapproval_showing_other_arguments_decides_nothing(app: App) -> None:
    task = (await app.send(f"write {SECRET} to creds.txt"))["task"]
    (rid,) = request_ids(task)
    await until(lambda: phase(app.approval(rid)) == "Pending", what="the ToolApproval")
    assert app.runtime.kube is not None
    path = app.runtime.kube.mirror.path(approval_name("file-manager", rid))
    await app.runtime.kube.client.merge_patch(path, {"spec": {"arguments": {"path": "harmless.txt", "content": "«redacted»"}}})
    await app.decide(rid, "Approve", "looks harmless")
    await until(lambda: "VotesIgnored" in {r for r, _ in _events(app)}, what="the VotesIgnored Event")
    assert state(await app.get(task["id"])) == "TASK_STATE_INPUT_REQUIRED"
    assert not (app.tools.sandbox / "creds.txt").exists()
