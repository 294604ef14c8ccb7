"""The gateway's pure parts: routing a call by the policy, and the resumable stream's event store."""

from __future__ import annotations

from typing import Any

import mcp_types
import yaml

from agent_runtime.contract.manifests import parse_resource
from agent_runtime.contract.resources import MCPGateway, RemoteMCPServer
from agent_runtime.contract.translator import translate_gateway
from agent_runtime.gateway import routing
from agent_runtime.gateway.events import RecentEvents

DOCS = yaml.safe_load_all("""
apiVersion: gatehouse.dev/v1alpha1
kind: RemoteMCPServer
metadata: {name: tools}
spec: {url: "http://127.0.0.1:1/mcp"}
---
apiVersion: gatehouse.dev/v1alpha1
kind: MCPGateway
metadata: {name: gate}
spec:
  upstream: {name: tools, toolNames: [read_file, delete_file], requireApproval: [delete_file]}
  approval:
    rules: [{tool: read_file, when: {arg: path, glob: "secret/**"}, action: deny}]
""")


def _config() -> Any:
    server, gateway = (parse_resource(d) for d in DOCS)
    assert isinstance(server, RemoteMCPServer) and isinstance(gateway, MCPGateway)
    return translate_gateway(gateway, {"tools": server})


def test_route_forwards_refuses_holds_and_knows_what_is_offered() -> None:
    config = _config()
    assert routing.route(config, "read_file", {"path": "a.txt"}).kind == "forward"
    refused = routing.route(config, "read_file", {"path": "secret/key"})
    assert refused.kind == "refuse" and "refused by policy" in refused.message
    held = routing.route(config, "delete_file", {"path": "a.txt"})
    assert held.kind == "hold" and held.decision is not None and held.decision.approvers is None  # the requester alone
    assert routing.route(config, "list_dir", {}).kind == "unknown"


def _message(n: int) -> mcp_types.JSONRPCNotification:
    return mcp_types.JSONRPCNotification(jsonrpc="2.0", method="notifications/progress", params={"n": n})


async def test_recent_events_replay_what_came_after_on_the_same_stream_only() -> None:
    store = RecentEvents(limit=4)
    first = await store.store_event("s1", _message(1))
    await store.store_event("s2", _message(2))
    third = await store.store_event("s1", _message(3))
    replayed: list[str | None] = []

    async def send(event: Any) -> None:
        replayed.append(event.event_id)

    assert await store.replay_events_after(first, send) == "s1" and replayed == [third]
    for n in range(5):
        await store.store_event("s1", _message(10 + n))
    assert await store.replay_events_after(first, send) is None  # fell out of the bounded store: not resumable
