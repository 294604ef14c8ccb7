"""An MCP gateway's held call decided with ``kubectl gatehouse approve`` (docs/gateway.md): the demo tools, the
gateway (``gatehouse-runtime gateway --kubeconfig …``) and the emulated API server as real parts on 127.0.0.1; a real
MCP client waits on the held call while the vote goes through the ToolApproval the gateway wrote (``spec.gatewayRef``)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agent_runtime.kube.objects import approval_name
from tests.gateway.test_gateway_e2e import OFFERED, RUNTIME_CMD, TOKENS, Served, _manifests, _text, held_call, pending
from tests.kube.test_kubectl_plugin import plugin
from tests.support.kube_fixtures import wait_for
from tests.support.kube_server import RunningEmulator
from tests.support.processes import GATEHOUSE_CMD, free_port, running

pytestmark = pytest.mark.e2e

TA = "gatehouse.dev/v1alpha1/toolapprovals"


async def test_a_held_call_is_a_toolapproval_of_the_gateway_approved_with_kubectl(
    kube_api: RunningEmulator, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    sandbox, journal = tmp_path / "sandbox", tmp_path / "journal.jsonl"
    sandbox.mkdir()
    (sandbox / "gone.txt").write_text("x")
    tools_port, port = free_port(), free_port()
    upstream = f"http://127.0.0.1:{tools_port}/mcp"
    offered = f"{{name: file-tools, toolNames: [{', '.join(OFFERED)}], requireApproval: [delete_file]}}"
    approvers = "    approvers: {users: [tester], groups: [system:masters]}"  # the emulator's admin votes with kubectl
    (tmp_path / "gateway.yaml").write_text(_manifests(upstream, "file-tools", "files-gate", upstream=offered,
                                                      approval=approvers))
    (tmp_path / "tokens").write_text(TOKENS)
    tools = [*GATEHOUSE_CMD, "demo-tools", "--sandbox", str(sandbox), "--port", str(tools_port), "--journal", str(journal)]
    gateway = [*RUNTIME_CMD, "gateway", "-f", str(tmp_path / "gateway.yaml"), "--port", str(port),
               "--api-token-file", str(tmp_path / "tokens"), "--state-dir", str(tmp_path / "state"),
               "--kube-namespace", "default", "--trust-kubectl-without-admission-policy"]  # $KUBECONFIG: the emulator
    served = Served(f"http://127.0.0.1:{port}/mcp", upstream, sandbox, journal)
    with running(tools, ready="demo-tools ready"), running(gateway, ready="gateway files-gate ready", timeout=60):
        call = await held_call(served, "tok-bob", "delete_file", {"path": "gone.txt"})
        request = await pending(served, token="tok-bob")  # the requester sees their own request
        name = approval_name("files-gate", request["id"])
        obj: dict[str, Any] = await asyncio.to_thread(
            wait_for, lambda: kube_api.emulator.get_object(TA, "default", name), 30, "the held call's ToolApproval")
        assert obj["spec"]["gatewayRef"] == "files-gate" and "agentRef" not in obj["spec"]
        assert obj["metadata"]["labels"]["gatehouse.dev/gateway"] == "files-gate"
        assert obj["spec"]["requestedBy"] == "bob" and obj["spec"]["arguments"] == {"path": "gone.txt"}

        code, out, err = await asyncio.to_thread(plugin, capsys, "approvals", "--gateway", "files-gate")
        assert code == 0 and name in out and "gateway/files-gate" in out
        code, out, err = await asyncio.to_thread(plugin, capsys, "approve", name, "--reason", "checked", "--wait", "20")
        assert code == 0, err
        result = await asyncio.wait_for(call, 30)
    assert not result.is_error, _text(result)
    assert not (sandbox / "gone.txt").exists() and [c["tool"] for c in served.ran()] == ["delete_file"]
