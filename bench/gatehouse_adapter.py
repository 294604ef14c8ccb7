"""The Gatehouse side of the bench: a small adapter around ``gatehouse-runtime serve``.

It plugs in by itself once the runtime exists. :func:`availability` runs ``gatehouse-runtime serve --help``; if
that fails, every Gatehouse row says "gatehouse runtime not available yet" and the ADK rows still run. Once it
works, the bench starts (``--host 127.0.0.1`` only if ``--help`` lists it):

    gatehouse-runtime serve -f WORK/agent.yaml -f examples/file-manager/modelconfig.yaml \\
        -f WORK/mcp.yaml --port P --state-dir D [--host 127.0.0.1]

where ``WORK/mcp.yaml`` is ``examples/file-manager/mcp-server.yaml`` pointed at the bench's demo-tools server, and
``WORK/agent.yaml`` the example Agent with the bench's principal added to its approvers. It
expects: readiness at ``GET /readyz`` (200), A2A JSON-RPC at ``/``, a pause as ``TASK_STATE_INPUT_REQUIRED`` with a
data part ``{"interrupt_type": "tool_approval", "action_requests": [{"id": "apr-…", …}]}``, a decision as a data
part ``{"decision_type": "approve"}`` on the same task/context, and ``gatehouse_model_calls_total`` in
``GET /metrics`` (Prometheus text; summed over label sets; absent → the row says so).

Two Gatehouse targets run side by side (:func:`gatehouse_targets`):

- ``gatehouse``, **the product as configured by default**, as the operator deploys it: authentication on (an Agent
  without an ``access`` block gets a generated token Secret; here the bench writes ``WORK/api-tokens``, one
  principal, ``bench``, with a random token, mode 0600, and adds ``--api-token-file WORK/api-tokens``; its client
  sends ``Authorization: Bearer <token>`` on every A2A and REST request, :meth:`GatehouseTarget.request_headers`),
  audit records written (always: there is no switch), redaction on (``spec.approval.redact`` defaults to the
  built-in secret shapes; the example Agent sets nothing), sqlite state;
- ``gatehouse_local``, the same runtime in local mode (no credential configured: every caller is ``anonymous``,
  loopback only; what ``gatehouse-runtime serve`` does on a laptop), for comparison: the authentication overhead
  is ``gatehouse`` - ``gatehouse_local`` in the same run.

``/readyz`` and ``/metrics`` are public either way. The ToolApproval mirror of a runtime in a cluster
(``--kube-namespace``) is measured on its own, against the emulated API (``bench/kubectl_path.py``).
"""

from __future__ import annotations

import functools
import re
import secrets
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import yaml

from bench.protocols import Protocol, bearer_headers
from bench.targets import Target

__all__ = ["AUTH_PRINCIPAL", "DEFAULT_CONFIGURATION", "NOT_AVAILABLE", "Availability", "GatehouseTarget", "availability",
           "gatehouse_targets", "parse_metric"]

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "file-manager"
NOT_AVAILABLE = "gatehouse runtime not available yet"
MODEL_CALLS_METRIC = "gatehouse_model_calls_total"
AUTH_PRINCIPAL = "bench"  # the one principal of the default target's token file
TOKEN_FILE = "api-tokens"
DEFAULT_CONFIGURATION = ("the product as configured by default: authentication on (bearer token), audit records "
                         "written, redaction on (built-in shapes), sqlite state")


@dataclass(frozen=True)
class Availability:
    ok: bool
    executable: list[str]
    reason: str = ""
    help_text: str = ""


def _executable() -> list[str]:
    beside = Path(sys.executable).with_name("gatehouse-runtime")
    if beside.is_file():
        return [str(beside)]
    found = shutil.which("gatehouse-runtime")
    return [found] if found else [sys.executable, "-c", "from agent_runtime.clients.cli import runtime_main; runtime_main()"]


@functools.cache
def availability() -> Availability:
    """Whether ``gatehouse-runtime serve`` exists here (its ``--help`` exits 0)."""
    exe = _executable()
    try:
        proc = subprocess.run([*exe, "serve", "--help"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Availability(False, exe, f"{NOT_AVAILABLE} ({exc})")
    if proc.returncode != 0:
        return Availability(False, exe, f"{NOT_AVAILABLE} (`gatehouse-runtime serve --help` exited {proc.returncode})")
    return Availability(True, exe, help_text=proc.stdout)


def parse_metric(text: str, name: str) -> float | None:
    """Sum of every sample of ``name`` in Prometheus text exposition (None if there is none)."""
    pattern = re.compile(rf"^{re.escape(name)}(?:\{{[^}}]*\}})?\s+(\S+)", re.MULTILINE)
    values = [float(v) for v in pattern.findall(text)]
    return sum(values) if values else None


@dataclass
class GatehouseTarget(Target):
    """``gatehouse-runtime serve``; with ``api_token`` set, authentication on (``--api-token-file``)."""

    key: str = "gatehouse_local"
    label: str = "Gatehouse local mode"
    protocol: Protocol = "gatehouse"
    ready_path: str = "/readyz"
    api_token: str = field(default="", repr=False)  # "" = local mode, no credential configured
    approver_groups: tuple[str, ...] = ()  # named among the approvers too (the kubectl path's voter's group)

    def command(self, port: int, state_dir: Path, tools_url: str, work: Path) -> list[str]:
        avail = availability()
        mcp = yaml.safe_load((EXAMPLE / "mcp-server.yaml").read_text())
        mcp["spec"]["url"] = tools_url
        mcp_file = work / "mcp.yaml"
        mcp_file.write_text(yaml.safe_dump(mcp, sort_keys=False))
        # The example names its approvers (group sre, and anonymous for local mode); the bench's one principal decides
        # the calls it asks for, so it is named too (deciding belongs to named approvers: docs/security.md).
        agent = yaml.safe_load((EXAMPLE / "agent.yaml").read_text())
        approvers = agent["spec"]["approval"].setdefault("approvers", {})
        approvers["users"] = [*approvers.get("users", []), AUTH_PRINCIPAL]
        approvers["groups"] = [*approvers.get("groups", []), *self.approver_groups]
        agent_file = work / "agent.yaml"
        agent_file.write_text(yaml.safe_dump(agent, sort_keys=False))
        cmd = [
            *avail.executable, "serve",
            "-f", str(agent_file), "-f", str(EXAMPLE / "modelconfig.yaml"), "-f", str(mcp_file),
            "--port", str(port), "--state-dir", str(state_dir),
        ]
        if "--host" in avail.help_text:
            cmd += ["--host", "127.0.0.1"]
        if self.api_token:
            token_file = work / TOKEN_FILE
            token_file.touch(mode=0o600)
            token_file.write_text(f"{AUTH_PRINCIPAL}:{self.api_token}\n")
            cmd += ["--api-token-file", str(token_file)]
        return cmd

    def request_headers(self) -> dict[str, str]:
        return bearer_headers(self.api_token or None)

    async def model_calls(self, http: httpx.AsyncClient, url: str) -> float | None:
        response = await http.get(url + "/metrics")
        if response.status_code != 200:
            return None
        return parse_metric(response.text, MODEL_CALLS_METRIC)


def gatehouse_targets() -> list[GatehouseTarget]:
    """The runtime as configured by default (authentication on, a fresh random token per run), and the same
    runtime in local mode (no credential), for comparison."""
    return [
        GatehouseTarget(key="gatehouse", label="Gatehouse (default)", api_token=secrets.token_urlsafe(32)),
        GatehouseTarget(key="gatehouse_local", label="Gatehouse local mode"),
    ]
