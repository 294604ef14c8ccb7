"""The Slack bridge and an MCP gateway's held call (docs/gateway.md): ``gatehouse slack`` as a process against the
emulated Kubernetes API (with the chart's admission policy), a real ``gatehouse-runtime gateway`` in front of the demo
tools mirroring its held calls as ToolApprovals with ``spec.gatewayRef``, the Slack Web API stand-in, and a real MCP
client waiting on the call. The MCPGateway's ``spec.approval.notify.slack`` says where its requests go, as an Agent's
does; the message names the gateway, and a click votes through the same ballot path."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from agent_runtime.kube.objects import approval_name
from agent_runtime.slack import messages
from agent_runtime.slack.notifier import ANNOTATION
from tests.support import helm as helm_support
from tests.support import slack_api
from tests.support.kube_fixtures import Kubectl, kubectl_and_plugin, wait_for
from tests.support.kube_server import serve
from tests.support.processes import GATEHOUSE_CMD, free_port, running

pytestmark = pytest.mark.e2e

GATEWAY = "files-gate"
TA = "gatehouse.dev/v1alpha1/toolapprovals"
BRIDGE = "system:serviceaccount:gatehouse-system:gatehouse-slack"
SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
TOKEN = "xoxb-test-token"
CHANNEL, CHANNEL_ID = "#ops-approvals", "C0OPSAPPROV"
ALICE = "U0ALICE"
USERS = {"users": {ALICE: {"principal": "alice@example.com", "groups": ["sre"]}}}
RUNTIME_CMD = [sys.executable, "-c", "from agent_runtime.clients.cli import runtime_main; runtime_main()"]


def _manifests(tools_url: str) -> list[dict[str, Any]]:
    return [
        {"apiVersion": "gatehouse.dev/v1alpha1", "kind": "RemoteMCPServer", "metadata": {"name": "file-tools"},
         "spec": {"url": tools_url}},
        {"apiVersion": "gatehouse.dev/v1alpha1", "kind": "MCPGateway", "metadata": {"name": GATEWAY},
         "spec": {"upstream": {"name": "file-tools", "requireApproval": ["delete_file"]},
                  "approval": {"approvers": {"groups": ["sre"]}, "notify": {"slack": {"channel": CHANNEL}}},
                  "access": {"delegators": [{"principal": BRIDGE, "channel": "slack"}],
                             "identities": [{"principal": "alice", "aliases": ["alice@example.com"]}]}}},
    ]


def mcp_call(url: str, tool: str, args: dict[str, Any]) -> Any:
    async def call() -> Any:
        async with create_mcp_http_client(headers={"Authorization": "Bearer tok-carol"}) as http:
            async with Client(streamable_http_client(url, http_client=http)) as client:
                return await client.call_tool(tool, args)

    return asyncio.run(call())


def test_a_gateways_held_call_is_posted_naming_the_gateway_and_a_slack_click_runs_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    kubectl_bin, _ = kubectl_and_plugin()
    sandbox = tmp_path / "sandbox"
    sandbox.mkdir()
    (sandbox / "old.log").write_text("x")
    (tmp_path / "tokens").write_text("carol:tok-carol\n")
    (tmp_path / "users.yaml").write_text(yaml.safe_dump(USERS))
    tools_port, port = free_port(), free_port()
    docs = _manifests(f"http://127.0.0.1:{tools_port}/mcp")
    (tmp_path / "gateway.yaml").write_text(yaml.safe_dump_all(docs))
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
        tools = [*GATEHOUSE_CMD, "demo-tools", "--sandbox", str(sandbox), "--port", str(tools_port)]
        gateway = [*RUNTIME_CMD, "gateway", "-f", str(tmp_path / "gateway.yaml"), "--port", str(port),
                   "--api-token-file", str(tmp_path / "tokens"), "--state-dir", str(tmp_path / "state"),
                   "--kubeconfig", str(gateway_config), "--kube-namespace", "default",
                   "--trust-kubectl-without-admission-policy"]  # the emulator enforces the chart's policy anyway
        bridge_port = free_port()
        bridge = [*GATEHOUSE_CMD, "slack", "-n", "default", "--host", "127.0.0.1", "--port", str(bridge_port),
                  "--kubeconfig", str(bridge_config), "--users-file", str(tmp_path / "users.yaml"),
                  "--slack-api-url", slack.url, "--replay-namespace", "gatehouse-system"]
        env = {**os.environ, "SLACK_BOT_TOKEN": TOKEN, "SLACK_SIGNING_SECRET": SECRET, "KUBECONFIG": str(bridge_config)}
        log = (tmp_path / "bridge.log").open("ab")
        with running(tools, ready="demo-tools ready"), running(gateway, ready=f"gateway {GATEWAY} ready", timeout=60):
            proc = subprocess.Popen(bridge, env=env, stdout=log, stderr=subprocess.STDOUT)
            try:
                bridge_url = f"http://127.0.0.1:{bridge_port}"
                wait_for(lambda: _up(bridge_url), 60, "the bridge's /healthz")
                box: dict[str, Any] = {}
                caller = threading.Thread(target=lambda: box.update(
                    result=mcp_call(f"http://127.0.0.1:{port}/mcp", "delete_file", {"path": "old.log"})), daemon=True)
                caller.start()

                def held() -> str | None:  # the requester sees her own request over REST
                    listed = httpx.get(f"http://127.0.0.1:{port}/approvals", params={"state": "pending"},
                                       headers={"Authorization": "Bearer tok-carol"}, timeout=10).json()["approvals"]
                    return str(listed[0]["id"]) if listed else None

                name = approval_name(GATEWAY, wait_for(held, 30, "the held call"))
                wait_for(lambda: api.emulator.get_object(TA, "default", name), 30, "the held call's ToolApproval")
                assert api.emulator.get_object(TA, "default", name)["spec"]["gatewayRef"] == GATEWAY
                wait_for(lambda: ANNOTATION in (api.emulator.get_object(TA, "default", name)["metadata"].get(
                    "annotations") or {}), 30, f"{name}'s message posted and noted\n{(tmp_path / 'bridge.log').read_text()}")
                (post,) = [c for c in slack.of("chat.postMessage") if name in json.dumps(c.args.get("blocks"))]
                assert post.args["channel"] == CHANNEL  # the MCPGateway's notify.slack
                text = json.dumps(post.args["blocks"])
                for shown in (f"*gateway {GATEWAY}* wants to run `delete_file`", f"*Gateway*\\n{GATEWAY} (default)",
                              "*Asked by*\\ncarol"):
                    assert shown in text, shown
                assert "?" not in post.args["text"] and post.args["text"] == f"gateway {GATEWAY}: delete_file waits for approval"

                where = json.loads(api.emulator.get_object(TA, "default", name)["metadata"]["annotations"][ANNOTATION])
                value = next(e["value"] for b in post.args["blocks"] if b["type"] == "actions" for e in b["elements"])
                body = slack_api.block_action(ALICE, where["channel"], where["ts"], messages.APPROVE, value)
                reply = httpx.post(f"{bridge_url}/slack/interactions", content=body,
                                   headers=slack_api.signed(body, SECRET), timeout=10)
                assert reply.status_code == 200, reply.text
                caller.join(60)
                assert not caller.is_alive() and not box["result"].is_error, box
                assert not (sandbox / "old.log").exists()
                status = wait_for(lambda: (s := api.emulator.get_object(TA, "default", name).get("status") or {})
                                  .get("phase") == "Approved" and s, 30, "the ToolApproval Approved")
                assert status["decidedBy"] == "alice" and status["source"] == "slack"
            finally:
                proc.terminate()
                proc.wait(10)


def _up(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.fixture(autouse=True)
def _no_leftovers() -> Iterator[None]:
    yield
