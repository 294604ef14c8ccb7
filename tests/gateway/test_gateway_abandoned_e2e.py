"""A held call nobody waits for any more (docs/gateway.md, "Nobody waiting"): a real gateway process in front of the
demo tools, a real MCP client that gives up before the decision (its own short timeout), and the gateway's REST API
as an approver uses it. Once the request's lifetime (``approval.timeout``) has ended with no client waiting, it is
``abandoned``: REST shows it, a vote on it is refused saying why, a retry is a new request, and nothing ever ran."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from agent_runtime.approvals import ApprovalRecord
from agent_runtime.kube.objects import phase
from tests.gateway.test_gateway_e2e import RUNTIME_CMD, TOKENS, Served, _manifests
from tests.support.processes import GATEHOUSE_CMD, free_port, running

pytestmark = pytest.mark.e2e

LIFETIME = 3.0  # seconds: the gateway's approval.timeout


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    base = tmp_path_factory.mktemp("abandoned")
    sandbox, journal = base / "sandbox", base / "journal.jsonl"
    sandbox.mkdir()
    (base / "tokens").write_text(TOKENS)
    tools_port, port = free_port(), free_port()
    upstream = f"http://127.0.0.1:{tools_port}/mcp"
    offered = "{name: file-tools, requireApproval: [delete_file]}"
    approval = f"    timeout: {LIFETIME:g}s\n    onTimeout: approve\n    approvers: {{groups: [sre]}}"
    (base / "gateway.yaml").write_text(_manifests(upstream, "file-tools", "files-gate", upstream=offered, approval=approval))
    tools = [*GATEHOUSE_CMD, "demo-tools", "--sandbox", str(sandbox), "--port", str(tools_port), "--journal", str(journal)]
    gateway = [*RUNTIME_CMD, "gateway", "-f", str(base / "gateway.yaml"), "--port", str(port),
               "--api-token-file", str(base / "tokens"), "--state-dir", str(base / "state"), "--keepalive", "0.3s"]
    with running(tools, ready="demo-tools ready"), running(gateway, ready="gateway files-gate ready", timeout=60):
        yield Served(f"http://127.0.0.1:{port}/mcp", upstream, sandbox, journal)


async def give_up(served: Served, args: dict[str, Any]) -> None:
    """Call the gated tool and stop waiting after half a second (the client's own read timeout)."""
    async with create_mcp_http_client(headers={"Authorization": "Bearer tok-bob"}) as http:
        async with Client(streamable_http_client(served.url, http_client=http)) as client:
            with pytest.raises((MCPError, TimeoutError)):
                await client.call_tool("delete_file", args, read_timeout_seconds=0.5)


async def rest(served: Served, method: str, path: str, **kwargs: Any) -> httpx2.Response:
    async with httpx2.AsyncClient(headers={"authorization": "Bearer tok-alice"}) as http:
        return await http.request(method, served.base + path, **kwargs)


async def request_for(served: Served, path: str, status: str) -> dict[str, Any]:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        listed = (await rest(served, "GET", "approvals", params={"state": status})).json()["approvals"]
        found = [a for a in listed if a["tool"] == "delete_file" and a["args"] == {"path": path}]
        if found:
            return dict(found[0])
        await asyncio.sleep(0.1)
    raise AssertionError(f"no {status} delete_file of {path}")


async def vote(served: Served, request_id: str, decision: str = "approve") -> httpx2.Response:
    return await rest(served, "POST", f"approvals/{request_id}/decision", json={"decision": decision},
                      headers={"idempotency-key": f"k-{request_id}-{decision}-{time.time()}"})


async def test_a_call_whose_client_left_is_abandoned_at_its_lifetimes_end_not_run_by_ontimeout_approve(
    served: Served,
) -> None:
    (served.sandbox / "left.txt").write_text("x")
    await give_up(served, {"path": "left.txt"})
    pending = await request_for(served, "left.txt", "pending")
    gone = await request_for(served, "left.txt", "abandoned")  # onTimeout is approve: it would have run
    assert gone["id"] == pending["id"] and "nobody waited" in gone["reason"], gone
    refused = await vote(served, gone["id"])
    assert refused.status_code == 409 and "abandoned" in refused.text, refused.text
    assert (served.sandbox / "left.txt").exists() and served.ran() == []


async def test_an_approval_nobody_came_back_for_is_abandoned_and_a_later_retry_is_a_new_request(served: Served) -> None:
    (served.sandbox / "later.txt").write_text("x")
    await give_up(served, {"path": "later.txt"})
    pending = await request_for(served, "later.txt", "pending")
    assert (await vote(served, pending["id"])).status_code == 200  # approved while nobody waits: nothing runs yet
    gone = await request_for(served, "later.txt", "abandoned")
    assert gone["id"] == pending["id"]
    await give_up(served, {"path": "later.txt"})  # the retry after the lifetime: a new request, not the old approval
    again = await request_for(served, "later.txt", "pending")
    assert again["id"] != gone["id"]
    assert (served.sandbox / "later.txt").exists() and served.ran() == []


def test_an_abandoned_request_is_the_phase_abandoned_of_its_toolapproval() -> None:
    record = ApprovalRecord(id="apr-1", task_id="held-1", context_id="mcp:bob", confirmation_id="held-1",
                            call_id="mcp-1", tool="delete_file", server="file-tools", args={}, args_hash="", hint="",
                            created_at=0.0, expires_at=1.0, status="abandoned")
    assert phase(record) == "Abandoned"


__all__ = ["Path"]

