"""The runtime's readiness on its Agent, the condition ``RuntimeReady`` (agent_runtime/kube/runtime_ready.py).

In-process runtimes against the emulated API: ready, its MCP server unreachable, its database unreachable; and
the reporter on its own: written on change only, the other conditions kept (a 409 Conflict read again),
``Starting`` only when it lasts, ``Stopping`` never, written again when the Agent lost it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from typing import Any

import pytest

from agent_runtime.app.readiness import STARTING, STOPPING, Readiness, ready, tools_unreachable
from agent_runtime.kube.client import KubeClient
from agent_runtime.kube.runtime_ready import CONDITION, RuntimeReadyReporter, shown
from tests.kube.test_runtime import App, _app, app, until  # noqa: F401  (the fixture)
from tests.support.kube_fixtures import Kubectl
from tests.support.kube_server import RunningEmulator
from tests.support.processes import GATEHOUSE_CMD, running
from tests.support.runtime import free_port

pytestmark = pytest.mark.e2e

AGENTS = "gatehouse.dev/v1alpha1/agents"
POD = socket.gethostname()
OPERATOR = [  # what the operator writes (gatehouse_operator/status.py)
    {"type": "Accepted", "status": "True", "reason": "Reconciled", "message": "ok", "lastTransitionTime": "2026-01-01T00:00:00Z"},
    {"type": "Ready", "status": "True", "reason": "Available", "message": "1/1 replicas available",
     "lastTransitionTime": "2026-01-01T00:00:00Z"},
]


def agent(api: RunningEmulator) -> dict[str, Any]:
    return api.emulator.get_object(AGENTS, "default", "file-manager") or {}


def runtime_ready(api: RunningEmulator) -> dict[str, Any] | None:
    return shown(agent(api))


async def test_a_ready_runtime_says_so_once_and_keeps_the_other_conditions(app: App, kubectl: Kubectl) -> None:  # noqa: F811
    api, runtime = app.api, app.runtime
    assert runtime.kube is not None
    reporter = runtime.kube.runtime_ready
    first = await until(lambda: runtime_ready(api), what="RuntimeReady")
    assert {k: first[k] for k in ("status", "reason")} == {"status": "True", "reason": "Ready"}
    assert first["message"] == f"pod {POD}: ready: the stores are open and the tools of file-tools are listed"
    kubectl("patch", "agent", "file-manager", "--subresource=status", "--type=merge",  # the operator writes its own
            "-p", json.dumps({"status": {"conditions": [*OPERATOR, first]}}))
    for _ in range(5):  # probes write nothing
        assert (await app.client.get("/readyz")).status_code == 200
    await asyncio.sleep(1.5)
    assert reporter.writes == 1

    runtime.readiness = tools_unreachable("ConnectError: connection refused")  # what a failed listing sets
    down = await until(lambda: (c := runtime_ready(api)) and c["status"] == "False" and c, what="RuntimeReady False")
    assert (down["reason"], down["message"]) == ("ToolsUnreachable", f"pod {POD}: listing MCP tools: ConnectError: "
                                                                     "connection refused")
    assert down["lastTransitionTime"] >= first["lastTransitionTime"]
    conditions = agent(api)["status"]["conditions"]
    assert [c["type"] for c in conditions] == ["Accepted", "Ready", CONDITION] and conditions[:2] == OPERATOR
    await until(lambda: reporter.writes == 2, what="the reporter counting its second write")  # counted after the PATCH returns
    await asyncio.sleep(1.0)
    assert reporter.writes == 2  # and no more


async def test_an_unreachable_mcp_server_is_the_reason(
    tmp_path: Any, kube_api: RunningEmulator, kubectl: Kubectl, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOOGLE_API_USE_CLIENT_CERTIFICATE", "false")
    nowhere = f"http://127.0.0.1:{free_port()}/mcp"  # nothing listens there
    async for a in _app(tmp_path, kube_api, kubectl, mcp_url=nowhere, wait_ready=False):
        condition = await until(lambda: runtime_ready(kube_api), what="RuntimeReady")
        assert (condition["status"], condition["reason"]) == ("False", "ToolsUnreachable")
        assert condition["message"].startswith(f"pod {POD}: listing MCP tools: ")
        probe = await a.client.get("/readyz")
        assert probe.status_code == 503 and probe.json()["reason"] == "ToolsUnreachable"
        assert condition["message"] == f"pod {POD}: {probe.json()['problems'][0]}"


async def test_a_gated_tool_the_server_does_not_offer_fails_readyz_and_says_which(
    tmp_path: Any, kube_api: RunningEmulator, kubectl: Kubectl, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``remove_file`` gated in both lists, misspelt the same way: the demo server has only delete_file."""
    monkeypatch.setenv("GOOGLE_API_USE_CLIENT_CERTIFICATE", "false")

    def misspelt(doc: dict[str, Any]) -> None:
        server = doc["spec"]["tools"][0]["mcpServer"]
        server["toolNames"] = ["list_dir", "read_file", "remove_file"]
        server["requireApproval"] = ["remove_file"]

    async for a in _app(tmp_path, kube_api, kubectl, wait_ready=False, edit_agent=misspelt):
        condition = await until(lambda: (c := runtime_ready(kube_api)) and c["reason"] == "GatedToolMissing" and c,
                                what="RuntimeReady GatedToolMissing")
        assert condition["status"] == "False"
        probe = await a.client.get("/readyz")
        assert probe.status_code == 503 and probe.json()["reason"] == "GatedToolMissing"
        (problem,) = probe.json()["problems"]
        assert problem.startswith("MCP server file-tools does not offer remove_file, which "
                                  "spec.tools[file-tools].mcpServer.requireApproval gates")
        assert condition["message"] == f"pod {POD}: {problem}"
        assert not a.runtime.ready


async def test_a_server_lost_after_start_shows_on_the_agent_and_readyz_keeps_the_pod_in_service(
    tmp_path: Any, kube_api: RunningEmulator, kubectl: Kubectl, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tools server stops after the runtime is ready: the Agent's RuntimeReady turns False (ToolsUnreachable,
    said once, not "Failed to create MCP session: Failed to create MCP session"), /readyz stays 200 with a warning,
    so approvers still reach the pod; the server back on its port, the condition is True again."""
    monkeypatch.setenv("GOOGLE_API_USE_CLIENT_CERTIFICATE", "false")
    port, sandbox = free_port(), tmp_path / "sandbox"
    sandbox.mkdir()
    args = [*GATEHOUSE_CMD, "demo-tools", "--sandbox", str(sandbox), "--port", str(port), "--journal", str(tmp_path / "j")]
    url = f"http://127.0.0.1:{port}/mcp"
    with contextlib.ExitStack() as tools:
        tools.enter_context(running(args, ready="demo-tools ready"))
        async for a in _app(tmp_path, kube_api, kubectl, mcp_url=url, tools_check_interval=0.3):
            up = await until(lambda: (c := runtime_ready(kube_api)) and c["status"] == "True" and c, what="Ready")
            assert up["reason"] == "Ready"
            tools.close()  # scaled to 0
            down = await until(lambda: (c := runtime_ready(kube_api)) and c["status"] == "False" and c,
                               what="RuntimeReady False", timeout=15)
            assert down["reason"] == "ToolsUnreachable"
            assert down["message"].startswith(f"pod {POD}: MCP server file-tools stopped answering at {url}: ")
            probe = await a.client.get("/readyz")
            assert probe.status_code == 200, probe.text
            assert probe.json()["warnings"] == [down["message"].removeprefix(f"pod {POD}: ")]
            with running(args, ready="demo-tools ready"):
                back = await until(lambda: (c := runtime_ready(kube_api)) and c["status"] == "True" and c,
                                   what="RuntimeReady True again", timeout=15)
                assert back["reason"] == "Ready"
                assert "warnings" not in (await a.client.get("/readyz")).json()


async def test_an_unreachable_database_is_the_reason(
    tmp_path: Any, kube_api: RunningEmulator, kubectl: Kubectl, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOOGLE_API_USE_CLIENT_CERTIFICATE", "false")
    database = f"postgresql+asyncpg://gatehouse:secret@127.0.0.1:{free_port()}/gatehouse"
    with pytest.raises(OSError):
        async for _ in _app(tmp_path, kube_api, kubectl, database_url=database):
            pass  # pragma: no cover  (the runtime does not start)
    condition = runtime_ready(kube_api)
    assert condition is not None and (condition["status"], condition["reason"]) == ("False", "DatabaseUnavailable")
    assert condition["message"].startswith(f"pod {POD}: opening the stores: ")


# -- the reporter alone --------------------------------------------------------------------------------------


@pytest.fixture
async def client(kube_api: RunningEmulator) -> Any:
    kube_api.call(lambda: kube_api.emulator.seed(AGENTS, {
        "apiVersion": "gatehouse.dev/v1alpha1", "kind": "Agent",
        "metadata": {"name": "file-manager", "namespace": "default"}, "spec": {"modelConfig": "m"},
        "status": {"conditions": list(OPERATOR), "pendingApprovals": 2},
    }))
    c = KubeClient.connect(None, False)  # $KUBECONFIG: the emulator
    yield c
    await c.aclose()


PATH = "/apis/gatehouse.dev/v1alpha1/namespaces/default/agents/file-manager/status"


class Racing(KubeClient):
    """Someone else writes the Agent's status between the reporter's read and its write, once."""

    def __init__(self, inner: KubeClient) -> None:
        super().__init__(inner._client, inner._auth)
        self.raced = False

    async def get(self, path: str, params: dict[str, str] | None = None) -> dict[str, Any]:
        got = await super().get(path, params)
        if not self.raced:
            self.raced = True
            policy = {"type": "AdmissionPolicy", "status": "True", "reason": "Enforced", "message": "bound"}
            await super().merge_patch(PATH, {"status": {"conditions": [*OPERATOR, policy]}})
        return got


async def test_a_conflict_is_read_again_and_nobody_elses_condition_is_lost(client: KubeClient, kube_api: RunningEmulator) -> None:
    racing = Racing(client)
    reporter = RuntimeReadyReporter(racing, PATH, "pod-a")
    assert await reporter.report(ready(["file-tools"]))
    assert racing.raced
    status = agent(kube_api)["status"]
    assert [c["type"] for c in status["conditions"]] == ["Accepted", "Ready", "AdmissionPolicy", CONDITION]
    assert status["pendingApprovals"] == 2
    mine = shown(agent(kube_api))
    assert mine is not None and mine["message"].startswith("pod pod-a: ready")


async def test_written_on_change_only_starting_when_it_lasts_and_stopping_never(
    client: KubeClient, kube_api: RunningEmulator
) -> None:
    now: list[Readiness] = [STARTING]
    reporter = RuntimeReadyReporter(client, PATH, "pod-a", poll=0.05, settle=0.6)
    reporter.start(lambda: now[0])
    try:
        await asyncio.sleep(0.3)
        assert runtime_ready(kube_api) is None  # a quick start goes straight to Ready
        starting = await until(lambda: runtime_ready(kube_api), timeout=3, what="Starting, once it lasted")
        assert (starting["status"], starting["reason"]) == ("False", "Starting")
        now[0] = ready([])
        await until(lambda: (c := runtime_ready(kube_api)) and c["reason"] == "Ready", timeout=3, what="Ready")
        since = runtime_ready(kube_api)["lastTransitionTime"]  # type: ignore[index]
        await asyncio.sleep(0.3)
        assert reporter.writes == 2
        now[0] = STOPPING  # shutting down: another pod may be taking over
        await asyncio.sleep(0.3)
        assert reporter.writes == 2 and runtime_ready(kube_api)["reason"] == "Ready"  # type: ignore[index]
        assert runtime_ready(kube_api)["lastTransitionTime"] == since  # type: ignore[index]
    finally:
        await reporter.stop()


async def test_written_again_when_the_agent_lost_it_but_not_over_another_pods(
    client: KubeClient, kube_api: RunningEmulator
) -> None:
    reporter = RuntimeReadyReporter(client, PATH, "pod-a")
    assert not await reporter.recheck()  # nothing written yet: nothing to write again
    assert await reporter.report(ready([]))
    assert not await reporter.recheck()  # as written
    # An operator wrote back the status it read before: our condition is gone.
    await client.merge_patch(PATH, {"status": {"conditions": OPERATOR}})
    assert await reporter.recheck() and shown(agent(kube_api))["message"].startswith("pod pod-a: ")  # type: ignore[index]
    # Another replica wrote last: as true as ours, left alone.
    other = RuntimeReadyReporter(client, PATH, "pod-b")
    assert await other.report(tools_unreachable("timeout"))
    assert not await reporter.recheck()
    assert shown(agent(kube_api))["message"].startswith("pod pod-b: ")  # type: ignore[index]


async def test_no_agent_no_write_until_it_exists(client: KubeClient, kube_api: RunningEmulator) -> None:
    reporter = RuntimeReadyReporter(client, PATH.replace("file-manager", "not-yet"), "pod-a")
    assert not await reporter.report(ready([]))
    assert reporter.written == ready([])  # remembered: recheck() writes it once the Agent exists
    assert not await reporter.recheck()
