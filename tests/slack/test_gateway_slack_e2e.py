"""The Slack bridge and an MCP gateway's held call (docs/gateway.md): ``gatehouse slack`` as a process against the
emulated Kubernetes API (with the chart's admission policy), a real ``gatehouse-runtime gateway`` in front of the demo
tools mirroring its held calls as ToolApprovals with ``spec.gatewayRef``, the Slack Web API stand-in, and a real MCP
client waiting on the call. The MCPGateway's ``spec.approval.notify.slack`` says where its requests go, as an Agent's
does; the message names the gateway, and a click votes through the same ballot path."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from agent_runtime.kube.objects import approval_name
from agent_runtime.slack import messages
from agent_runtime.slack.notifier import ANNOTATION
from tests.slack.gateway_bridge import SECRET, gateway_and_bridge
from tests.support import slack_api
from tests.support.kube_fixtures import wait_for
from tests.support.processes import GATEHOUSE_CMD, free_port

pytestmark = pytest.mark.e2e

GATEWAY = "files-gate"
TA = "gatehouse.dev/v1alpha1/toolapprovals"
BRIDGE = "system:serviceaccount:gatehouse-system:gatehouse-slack"
CHANNEL, CHANNEL_ID = "#ops-approvals", "C0OPSAPPROV"
ALICE = "U0ALICE"
USERS = {"users": {ALICE: {"principal": "alice@example.com", "groups": ["sre"]}}}


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
    sandbox = tmp_path / "sandbox"
    sandbox.mkdir()
    (sandbox / "old.log").write_text("x")
    tools_port = free_port()
    tools = [*GATEHOUSE_CMD, "demo-tools", "--sandbox", str(sandbox), "--port", str(tools_port)]
    with gateway_and_bridge(tmp_path, monkeypatch, gateway=GATEWAY, docs=_manifests(f"http://127.0.0.1:{tools_port}/mcp"),
                            tokens="carol:tok-carol\n", users=USERS, channels={CHANNEL: CHANNEL_ID},
                            ready=f"gateway {GATEWAY} ready", upstream=tools) as stack:
        api, slack, port, bridge_url = stack.api, stack.slack, stack.port, stack.bridge_url
        box: dict[str, Any] = {}
        caller = threading.Thread(target=lambda: box.update(
            result=mcp_call(f"http://127.0.0.1:{port}/mcp", "delete_file", {"path": "old.log"})), daemon=True)
        caller.start()

        name = approval_name(GATEWAY, wait_for(lambda: stack.first_pending("tok-carol"), 30, "the held call"))
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


def _up(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.fixture(autouse=True)
def _no_leftovers() -> Iterator[None]:
    yield
