"""A vote on a ToolApproval cast on behalf of a human (``spec.votes[].onBehalfOf``, what the Slack bridge writes):
counted as that human only when its ``by`` is one of the Agent's ``spec.access.delegators``, else recorded and not
counted. The runtime in-process with its mirror and watcher, against the emulated API (as tests/kube/test_runtime.py).

Votes are appended here with the admin's client, as the API would store them; who may write which ``by`` is the
admission policy's part (tests/chart/test_admission_policy.py, and the bridge end to end in tests/slack/).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from agent_runtime.access.settings import load_access_settings
from agent_runtime.app.factory import Runtime, build_app
from agent_runtime.app.settings import RuntimeSettings
from agent_runtime.contract.manifests import select_agent_config
from agent_runtime.kube import KubeSettings
from agent_runtime.kube.client import KubeError
from agent_runtime.kube.objects import approval_name
from tests.support.inprocess import InProcessApp
from tests.support.kube_fixtures import Kubectl, until
from tests.support.kube_server import RunningEmulator
from tests.support.runtime import demo_tools, request_ids, state, status_text, write_manifests

pytestmark = pytest.mark.e2e

TA = "gatehouse.dev/v1alpha1/toolapprovals"
AGENT = "file-manager"
BRIDGE = "system:serviceaccount:gatehouse-system:gatehouse-slack"
SRE = ["sre"]
APPROVERS = {"groups": SRE, "required": 2, "allowRequester": False}
NOT_DELEGATOR = ("mallory@example.com may not act on behalf of alice@example.com: it is not a trusted delegator of this "
                 "agent (spec.access.delegators); nothing was decided")


class App(InProcessApp):
    api: RunningEmulator

    def approval(self, name: str) -> dict[str, Any]:
        return self.api.emulator.get_object(TA, "default", name) or {}

    async def vote(self, name: str, by: str, action: str = "Approve", groups: list[str] | None = None, **extra: Any) -> None:
        """Append a vote as the API would store it."""
        assert self.runtime.kube is not None
        obj = self.approval(name)
        votes = [*obj["spec"].get("votes", []), {"by": by, "groups": groups or [], "action": action, **extra}]
        await self.runtime.kube.client.merge_patch(self.runtime.kube.mirror.path(name), {"spec": {"votes": votes}})

    async def votes(self, name: str, count: int) -> list[dict[str, Any]]:
        return await until(lambda: len(v := (self.approval(name).get("status") or {}).get("votes") or []) >= count and v,
                           what=f"{count} vote(s) judged on {name}")

    async def pause(self, file: str) -> tuple[dict[str, Any], str]:
        (self.tools.sandbox / file).write_text(file)
        reply = await self.send_reply(f"delete {file}")
        assert "result" in reply, reply
        task = reply["result"]["task"]
        (rid,) = request_ids(task)
        name = approval_name(AGENT, rid)
        await until(lambda: (self.approval(name).get("status") or {}).get("phase") == "Pending", what=f"{name} Pending")
        return task, name


@pytest.fixture
async def app(tmp_path: Path, kube_api: RunningEmulator, kubectl: Kubectl, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[App]:
    monkeypatch.setenv("GOOGLE_API_USE_CLIENT_CERTIFICATE", "false")
    with demo_tools(tmp_path / "tools") as tools:
        files = write_manifests(tmp_path / "m", tools.url, toolApprovers=[{"tool": "delete_file", "approvers": APPROVERS}])
        agent_file = next(f for f in files if yaml.safe_load(f.read_text())["kind"] == "Agent")
        doc = yaml.safe_load(agent_file.read_text())
        doc["spec"]["access"] = {"delegators": [{"principal": BRIDGE}],
                                 "identities": [{"principal": "alice", "aliases": ["alice@example.com"]}]}
        agent_file.write_text(yaml.safe_dump(doc))
        for f in files:
            kubectl("apply", "--validate=false", "-f", str(f))
        settings = KubeSettings("default", tmp_path / "kubeconfig", trust_kubectl=True)
        config = select_agent_config(files)
        (tmp_path / "tokens").write_text("carol:tok-carol\n")
        access = load_access_settings(config.access, token_file=tmp_path / "tokens", env={})
        starlette = build_app(RuntimeSettings(config=config, state_dir=tmp_path / "state", kube=settings, access=access))
        runtime: Runtime = starlette.state.runtime
        async with starlette.router.lifespan_context(starlette):
            while not runtime.ready:
                await asyncio.sleep(0.05)
            transport = httpx.ASGITransport(app=starlette)
            headers = {"A2A-Version": "1.0", "Authorization": "Bearer tok-carol"}
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", headers=headers) as client:
                made = App(client, runtime, tools)
                made.api = kube_api
                yield made


async def test_the_bridge_votes_for_two_humans_and_each_counts_as_that_human(app: App) -> None:
    task, name = await app.pause("two.txt")
    await app.vote(name, BRIDGE, onBehalfOf={"user": "alice@example.com", "groups": SRE}, reason="ok from slack")
    (first,) = await app.votes(name, 1)
    # the alias folds alice@example.com into alice; seenAs keeps both the human and the bridge (the audit reads it)
    assert first == {"by": "alice", "action": "Approve", "counted": True, "note": "", "via": "kubectl",
                     "seenAs": f"alice@example.com via {BRIDGE}"}
    assert app.approval(name)["status"]["approvals"] == "1/2"
    assert not app.tools.executions("delete_file", "two.txt")
    await app.vote(name, BRIDGE, onBehalfOf={"user": "bob@example.com", "groups": SRE})
    final = await until(lambda: app.approval(name)["status"].get("phase") == "Approved" and app.approval(name)["status"],
                        what="Approved")
    assert (final["approvals"], final["decidedBy"]) == ("2/2", "alice, bob@example.com")
    done = await until(lambda: _completed(app, task["id"]), what="the task completed")
    assert "Delete of two.txt" in status_text(done)
    assert len(app.tools.executions("delete_file", "two.txt")) == 1


async def test_on_behalf_of_from_someone_not_a_delegator_is_recorded_and_never_counts(app: App) -> None:
    task, name = await app.pause("forged.txt")
    await app.vote(name, "mallory@example.com", onBehalfOf={"user": "alice@example.com", "groups": SRE})
    (vote,) = await app.votes(name, 1)
    assert vote == {"by": "mallory@example.com", "action": "Approve", "counted": False, "note": NOT_DELEGATOR,
                    "via": "kubectl", "seenAs": "alice@example.com via mallory@example.com"}
    assert app.approval(name)["status"]["approvals"] == "0/2"
    # the same forger, for bob now: recorded again, never counted; the task still waits
    await app.vote(name, "mallory@example.com", "Deny", onBehalfOf={"user": "bob@example.com", "groups": SRE})
    votes = await app.votes(name, 2)
    assert [v["counted"] for v in votes] == [False, False]
    assert app.approval(name)["status"]["phase"] == "Pending"
    assert state(await app.get(task["id"])) == "TASK_STATE_INPUT_REQUIRED"
    assert not app.tools.executions("delete_file", "forged.txt")


@pytest.mark.parametrize(("claim", "note"), [
    ({"user": ""}, "gatehouse/on_behalf_of.principal must be a non-empty string"),
    ({"groups": SRE}, "gatehouse/on_behalf_of.principal must be a non-empty string"),
    ("alice@example.com", "gatehouse/on_behalf_of must be an object {principal, groups}, got str"),
    ({"user": "alice@example.com", "groups": "sre"}, "gatehouse/on_behalf_of.groups must be a list of strings"),
])
async def test_a_malformed_on_behalf_of_decides_nothing(app: App, claim: Any, note: str) -> None:
    task, name = await app.pause("bad.txt")
    with pytest.raises(KubeError) as refused:  # the CRD's schema refuses it at the API …
        await app.vote(name, BRIDGE, groups=SRE, onBehalfOf=claim)
    assert refused.value.status == 422 and "onBehalfOf" in refused.value.message
    # … and where no schema checks it (a CRD not applied as shipped), the runtime refuses it itself: the bridge is in sre
    # here, yet its malformed vote does not count as its own
    app.api.call(app.api.emulator._validated.clear)
    await app.vote(name, BRIDGE, groups=SRE, onBehalfOf=claim)
    (vote,) = await app.votes(name, 1)
    assert (vote["counted"], vote["note"]) == (False, note)
    assert app.approval(name)["status"]["approvals"] == "0/2"
    assert state(await app.get(task["id"])) == "TASK_STATE_INPUT_REQUIRED"


async def test_separation_of_duties_applies_to_the_human_behind_the_bridge(app: App) -> None:
    task, name = await app.pause("mine.txt")  # asked by carol
    await app.vote(name, BRIDGE, onBehalfOf={"user": "carol", "groups": SRE})
    (vote,) = await app.votes(name, 1)
    assert vote["counted"] is False and vote["by"] == "carol"
    assert vote["note"].startswith("carol started this task and may not decide its calls (separation of duties)")
    assert state(await app.get(task["id"])) == "TASK_STATE_INPUT_REQUIRED"


async def _completed(app: App, task_id: str) -> dict[str, Any] | None:
    got = await app.get(task_id)
    return got if state(got) == "TASK_STATE_COMPLETED" else None
