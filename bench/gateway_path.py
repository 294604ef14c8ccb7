"""The MCP gateway's speed (issue 38, "Speed"; ``--only gateway``): both of its ratios in one section, interleaved.

One demo-tools server (the run's, with its journal) is the upstream. Started for this section:

- ``gatehouse-runtime gateway`` as configured by default (:class:`GatewayTarget`: authentication on, one principal
  ``bench`` with a random bearer token; ``delete_file`` gated, the requester deciding their own calls: the safe
  default with no approvers declared), in front of the demo tools;
- the ``gatehouse`` target (``gatehouse-runtime serve``, the product as configured by default) for the A2A decision.

Then, per iteration, the order alternating every iteration so a slow stretch of the machine falls on both sides:

- **pass-through**: one ``read_file`` with the MCP SDK's own client (``mcp.Client``, a ``ClientSession`` over
  streamable HTTP, each side's session opened once before the loop) straight to the demo tools, one through the
  gateway, and one through a forwarding proxy that does nothing else (``bench/bare_proxy.py``: the hop's own floor,
  what any Python proxy in the gateway's place costs at least; not judged); ratio = through / direct, p50 (bar: at
  most 1.3x), beside it bare / direct;
- **decision to result**: a gated ``delete_file`` through the gateway, held; once it is pending (``GET
  /approvals``), ``POST /approvals/{id}/decision`` is sent, timed to the waiting client's ``tools/call`` result;
  and an A2A pause on the runtime, its decision (the ``approve`` ``SendMessage``) timed to the completed task, the
  A2A client's result. Ratio = gateway / A2A, p50 (bar: at most 1.2x).

Every iteration's tool run is checked in the journal afterwards (each approved call ran exactly once).

``python -m bench.gateway_path --tree before=/tmp/tree-a --tree after=. --iterations 400`` compares gateways of
several source trees (``git archive <rev> agent_runtime operator | tar -x -C /tmp/tree-a``) on the pass-through
alone: one demo-tools server, a gateway per tree, and per iteration one direct ``read_file`` and one through each
gateway, the order rotating and reversing every iteration. Printed: each side's p50 and ratio to direct, and each
process's CPU time per call (``/proc/PID/stat``, user + system; the client's and the demo tools' over all sides'
calls), which a loaded machine moves far less than the wall time (docs/gateway.md "Speed").
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from contextlib import AsyncExitStack, ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import mcp_types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from bench.gatehouse_adapter import AUTH_PRINCIPAL, TOKEN_FILE, availability
from bench.protocols import Protocol, StepError, approve, pause
from bench.scenarios import client, journal_runs, rotated, stats
from bench.targets import Target, ToolsServer, running, tools_server

__all__ = ["GatewayTarget", "gateway_results"]

PROBE = "gateway-probe.txt"  # what every pass-through call reads
PENDING_TIMEOUT = 30.0  # seconds a held call may take to appear in GET /approvals
BARE = "bare"  # the side through bench/bare_proxy.py


@dataclass
class GatewayTarget(Target):
    """``gatehouse-runtime gateway`` in front of the run's demo tools, authentication on (``--api-token-file``)."""

    key: str = "gateway"
    label: str = "MCPGateway (default)"
    protocol: Protocol = "gatehouse"
    ready_path: str = "/readyz"
    api_token: str = field(default_factory=lambda: secrets.token_urlsafe(32), repr=False)

    def command(self, port: int, state_dir: Path, tools_url: str, work: Path) -> list[str]:
        manifests = work / "gateway.yaml"
        manifests.write_text(f"""apiVersion: gatehouse.dev/v1alpha1
kind: RemoteMCPServer
metadata: {{name: file-tools}}
spec: {{url: "{tools_url}"}}
---
apiVersion: gatehouse.dev/v1alpha1
kind: MCPGateway
metadata: {{name: bench-gate}}
spec:
  upstream: {{name: file-tools, requireApproval: [delete_file]}}
""")
        token_file = work / TOKEN_FILE
        token_file.touch(mode=0o600)
        token_file.write_text(f"{AUTH_PRINCIPAL}:{self.api_token}\n")
        return [*availability().executable, "gateway", "-f", str(manifests), "--port", str(port),
                "--host", "127.0.0.1", "--state-dir", str(state_dir), "--api-token-file", str(token_file)]

    def request_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_token}"}


@dataclass
class BareProxyTarget(Target):
    """``bench/bare_proxy.py`` in front of the run's demo tools: one HTTP hop and nothing else."""

    key: str = "bare_proxy"
    label: str = "bare forwarding proxy"
    protocol: Protocol = "gatehouse"
    ready_path: str = "/healthz"

    def command(self, port: int, state_dir: Path, tools_url: str, work: Path) -> list[str]:
        return [sys.executable, "-m", "bench.bare_proxy", tools_url, "--port", str(port)]


def _ok(result: mcp_types.CallToolResult | Any, what: str) -> None:
    if not isinstance(result, mcp_types.CallToolResult) or result.is_error:
        raise StepError("state", f"{what}: {str(result)[:200]}")


async def _pending(http: httpx.AsyncClient, base: str, headers: dict[str, str], path: str) -> str:
    """The id of the pending ``delete_file`` request for ``path``, once ``GET /approvals`` lists it."""
    deadline = time.monotonic() + PENDING_TIMEOUT
    while time.monotonic() < deadline:
        listed = (await http.get(f"{base}/approvals", headers=headers)).json()
        for request in listed.get("approvals", []):
            if request.get("tool") == "delete_file" and (request.get("args") or {}).get("path") == path:
                return str(request["id"])
        await asyncio.sleep(0.002)
    raise StepError("state", f"the held call for {path} never appeared in GET /approvals")


async def _held_decision(through: Client, http: httpx.AsyncClient, base: str, headers: dict[str, str],
                         path: str) -> float:
    """A gated call through the gateway: held, then approved over REST; seconds from the decision sent to the
    client's result."""
    call = asyncio.create_task(through.call_tool("delete_file", {"path": path}))
    try:
        request_id = await _pending(http, base, headers, path)
        start = time.perf_counter()
        answer = await http.post(f"{base}/approvals/{request_id}/decision", json={"decision": "approve"},
                                 headers={**headers, "Idempotency-Key": f"bench-{request_id}"})
        if answer.status_code >= 300:
            raise StepError("http", f"decision: HTTP {answer.status_code}: {answer.text[:200]}")
        result = await call
        seconds = time.perf_counter() - start
    finally:
        if not call.done():
            call.cancel()
    _ok(result, f"held {path}")
    return seconds


async def gateway_results(a2a_target: Target, work: Path, tools: ToolsServer, iterations: int, warmup: int,
                          check: Callable[[str], Any] | None = None) -> dict[str, Any]:
    """The section's results (``{"reason": ...}`` when it could not run)."""
    gateway = GatewayTarget()
    names = {kind: [f"gateway-{kind}-{i}.txt" for i in range(warmup + iterations)] for kind in ("held", "a2a")}
    tools.touch([PROBE, *names["held"], *names["a2a"]])
    times: dict[str, list[float]] = {"direct": [], "through": [], BARE: [], "gateway_decision": [], "a2a_decision": []}
    errors: Counter[str] = Counter()
    try:
        with ExitStack() as servers:
            gw = servers.enter_context(running(gateway, work, tools.url, "gateway"))
            bare_proxy = servers.enter_context(running(BareProxyTarget(), work, tools.url, "bare-proxy"))
            a2a = servers.enter_context(running(a2a_target, work, tools.url, "gateway-a2a"))
            if check is not None:
                check("gateway")
            headers = gateway.request_headers()
            async with AsyncExitStack() as stack:
                direct_http = await stack.enter_async_context(create_mcp_http_client())
                through_http = await stack.enter_async_context(create_mcp_http_client(headers=headers))
                direct = await stack.enter_async_context(Client(streamable_http_client(tools.url, http_client=direct_http)))
                through = await stack.enter_async_context(
                    Client(streamable_http_client(f"{gw.url}/mcp", http_client=through_http)))
                bare_http = await stack.enter_async_context(create_mcp_http_client())
                bare = await stack.enter_async_context(
                    Client(streamable_http_client(f"{bare_proxy.url}/mcp", http_client=bare_http)))
                http = await stack.enter_async_context(client())
                callers = {"direct": direct, "through": through, BARE: bare}
                for each in callers.values():  # as a client does before calling (the SDK validates results against it)
                    await each.list_tools()
                sides = list(callers)
                for i in range(warmup + iterations):
                    keep = i >= warmup
                    for side in _turn(sides, i):
                        start = time.perf_counter()
                        try:
                            _ok(await callers[side].call_tool("read_file", {"path": PROBE}), side)
                        except Exception as exc:  # StepError, and the MCP client's own errors: counted, not timed
                            errors[f"{side}:{getattr(exc, 'kind', type(exc).__name__)}"] += 1
                            continue
                        if keep:
                            times[side].append(time.perf_counter() - start)
                    for side in (("gateway", "a2a") if i % 2 == 0 else ("a2a", "gateway")):
                        try:
                            if side == "gateway":
                                seconds = await _held_decision(through, http, gw.url, headers, names["held"][i])
                            else:
                                paused = await pause(http, a2a.endpoint, f"delete {names['a2a'][i]}")
                                seconds = await approve(http, a2a.endpoint, paused)
                        except Exception as exc:
                            errors[f"{side}:{getattr(exc, 'kind', type(exc).__name__)}"] += 1
                            continue
                        if keep:
                            times[f"{side}_decision"].append(seconds)
    except (RuntimeError, OSError) as exc:
        return {"reason": f"{type(exc).__name__}: {str(exc).splitlines()[0]}"}
    runs = journal_runs(tools.journal)
    once = sum(runs[name] == 1 for kind in names for name in names[kind])
    out: dict[str, Any] = {"iterations": iterations, "direct_ms": stats(times["direct"]),
                           "through_ms": stats(times["through"]), "bare_ms": stats(times[BARE]),
                           "gateway_decision_ms": stats(times["gateway_decision"]),
                           "a2a_decision_ms": stats(times["a2a_decision"]), "ran_once": once,
                           "ran_twice": sum(runs[n] > 1 for kind in names for n in names[kind]), "errors": dict(errors)}
    out["passthrough_ratio"] = _ratio(out["through_ms"], out["direct_ms"])
    out["bare_ratio"] = _ratio(out["bare_ms"], out["direct_ms"])  # the hop's floor, beside the bar
    out["decision_ratio"] = _ratio(out["gateway_decision_ms"], out["a2a_decision_ms"])
    return out


def _turn(sides: list[str], i: int) -> list[str]:
    """Iteration ``i``'s order: who goes first rotates every iteration and the order reverses every other, so no side
    always follows the same one."""
    order = rotated(sides, i)
    return order[::-1] if i % 2 else order


def _ratio(top: dict[str, Any], bottom: dict[str, Any]) -> float | None:
    return None if not top.get("p50") or not bottom.get("p50") else round(top["p50"] / bottom["p50"], 3)



def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def passthrough_ab(trees: dict[str, Path], iterations: int, warmup: int = 20) -> str:
    """The pass-through of each tree's gateway against direct calls, interleaved (see the module's docstring)."""
    work = Path(tempfile.mkdtemp(prefix="gateway-ab-"))
    times: dict[str, list[float]] = {"direct": [], **{label: [] for label in trees}, BARE: []}
    with ExitStack() as servers:
        tools = servers.enter_context(tools_server(work))
        tools.touch([PROBE])
        bare_proxy = servers.enter_context(running(BareProxyTarget(), work, tools.url, "bare-proxy"))
        gateways = {}
        for label, tree in trees.items():
            target = GatewayTarget()
            path = f"{tree.resolve()}{os.pathsep}{tree.resolve() / 'operator'}"
            gateways[label] = (target, servers.enter_context(
                running(target, work, tools.url, f"gateway-{label}", env_extra={"PYTHONPATH": path})))
        async with AsyncExitStack() as stack:
            clients = {"direct": await stack.enter_async_context(Client(streamable_http_client(
                tools.url, http_client=await stack.enter_async_context(create_mcp_http_client()))))}
            for label, (target, server) in gateways.items():
                http = await stack.enter_async_context(create_mcp_http_client(headers=target.request_headers()))
                clients[label] = await stack.enter_async_context(
                    Client(streamable_http_client(f"{server.url}/mcp", http_client=http)))
            clients[BARE] = await stack.enter_async_context(Client(streamable_http_client(
                f"{bare_proxy.url}/mcp", http_client=await stack.enter_async_context(create_mcp_http_client()))))
            for each in clients.values():
                await each.list_tools()
            pids = {"demo-tools": tools.proc.pid, **{label: server.proc.pid for label, (_, server) in gateways.items()},
                    BARE: bare_proxy.proc.pid}
            names = list(clients)
            for i in range(warmup + iterations):
                if i == warmup:
                    before = {k: _cpu_seconds(pid) for k, pid in pids.items()} | {"client": time.process_time()}
                for side in _turn(names, i):
                    start = time.perf_counter()
                    _ok(await clients[side].call_tool("read_file", {"path": PROBE}), side)
                    if i >= warmup:
                        times[side].append(time.perf_counter() - start)
            after = {k: _cpu_seconds(pid) for k, pid in pids.items()} | {"client": time.process_time()}
    p50 = {side: statistics.median(t) * 1000 for side, t in times.items()}
    lines = [f"load {os.getloadavg()[0]:.2f}, {iterations} iterations, p50:"]
    lines += [f"  {side}: {p50[side]:.2f} ms ({p50[side] / p50['direct']:.2f}x)" for side in names]
    lines.append("CPU per call (ms): " + ", ".join(f"{k} {(after[k] - before[k]) * 1000 / iterations:.2f}"
                                                   for k in after))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.gateway_path", description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", action="append", required=True, metavar="LABEL=DIR",
                        help="a source tree whose agent_runtime/ the gateway runs (repeat to compare)")
    parser.add_argument("--iterations", type=int, default=400)
    args = parser.parse_args(argv)
    trees = {label: Path(tree) for label, _, tree in (t.partition("=") for t in args.tree)}
    print(asyncio.run(passthrough_ab(trees, args.iterations)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
