"""The servers under test, as subprocesses on 127.0.0.1: how to start one, when it is ready, what it costs.

    Target (what to run)          ──start()──►  Server (a running process: url, pid, seconds to ready)
      ├─ AdkTarget(durable)         python -m bench.adk_baseline ...        ready: GET /.well-known/agent-card.json
      └─ GatehouseTarget(api_token) gatehouse-runtime serve -f ... [--api-token-file F] (bench/gatehouse_adapter.py)
                                                                            ready: GET /readyz

What the client sends every request is the target's (:meth:`Target.request_headers`: the A2A headers, plus
``Authorization: Bearer`` for a target that authenticates); a running server hands it to the scenarios as its
:attr:`Server.endpoint` (``bench/protocols.py``).

Also the demo-tools MCP server every target calls, and :func:`rss_mb` (psutil, the process and its children).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import MappingProxyType

import httpx

from agent_runtime.clients import processes
from bench.protocols import Endpoint, Protocol, bearer_headers

__all__ = ["AdkTarget", "Server", "Target", "ToolsServer", "free_port", "rss_mb", "running", "tools_server"]

REPO = Path(__file__).resolve().parents[1]
ADK_CARD = "/.well-known/agent-card.json"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` and its children, in MiB."""
    import psutil

    proc = psutil.Process(pid)
    total = proc.memory_info().rss
    for child in proc.children(recursive=True):
        try:
            total += child.memory_info().rss
        except psutil.Error:
            pass
    return total / (1024 * 1024)


@dataclass
class Target:
    """One kind of server to measure. Subclasses say how to start it and how it is answered."""

    key: str
    label: str
    protocol: Protocol
    ready_path: str
    durable: bool = True

    def command(self, port: int, state_dir: Path, tools_url: str, work: Path) -> list[str]:
        raise NotImplementedError

    def request_headers(self) -> dict[str, str]:
        """The headers of every A2A request to this target's servers (the A2A ones; no credential by default)."""
        return bearer_headers(None)

    async def model_calls(self, http: httpx.AsyncClient, url: str) -> float | None:
        """Model calls made so far by the server at ``url`` (None: the server does not say)."""
        raise NotImplementedError


@dataclass
class AdkTarget(Target):
    """google-adk's own confirmation served by its own ``to_a2a`` (``bench/adk_baseline.py``)."""

    protocol: Protocol = "adk"
    ready_path: str = ADK_CARD

    def command(self, port: int, state_dir: Path, tools_url: str, work: Path) -> list[str]:
        cmd = [sys.executable, "-m", "bench.adk_baseline", "--tools-url", tools_url, "--port", str(port)]
        return [*cmd, "--state-dir", str(state_dir)] if self.durable else [*cmd, "--in-memory"]

    async def model_calls(self, http: httpx.AsyncClient, url: str) -> float | None:
        from bench.adk_baseline import MODEL_CALLS_PATH

        response = await http.get(url + MODEL_CALLS_PATH)
        response.raise_for_status()
        return float(response.json()["model_calls"])


def adk_targets() -> list[AdkTarget]:
    return [
        AdkTarget(key="adk_durable", label="ADK durable", durable=True),
        AdkTarget(key="adk_memory", label="ADK in-memory", durable=False),
    ]


@dataclass
class Server:
    """A running target."""

    target: Target
    url: str
    proc: subprocess.Popen[bytes]
    ready_seconds: float
    log: Path
    state_dir: Path
    started: float = 0.0  # time.perf_counter() just before the process was spawned

    @property
    def pid(self) -> int:
        return self.proc.pid

    @cached_property
    def endpoint(self) -> Endpoint:
        """What the client needs to talk to this server: its URL, protocol and request headers."""
        return Endpoint(self.url, self.target.protocol, self.target.request_headers())

    def rss_mb(self) -> float:
        return rss_mb(self.pid)


def _log_tail(log: Path, lines: int = 40) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@contextmanager
def running(target: Target, work: Path, tools_url: str, name: str, timeout: float = 90.0,
            state_dir: Path | None = None, env_extra: Mapping[str, str] = MappingProxyType({})) -> Iterator[Server]:
    """Start ``target`` with a fresh state directory under ``work/name`` (or ``state_dir``, e.g. an earlier server's:
    a restart); yield once its ready path answers 200. ``env_extra`` is added to the server's environment.

    ``ready_seconds`` runs from just before the process is spawned to the first 200 (cold start to ready).
    """
    base = work / name
    base.mkdir(parents=True, exist_ok=True)
    state_dir = state_dir or base / "state"
    log = base / "server.log"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = target.command(port, state_dir, tools_url, base)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONWARNINGS": "ignore"}
    env.pop("GATEHOUSE_API_TOKEN", None)  # whether a target authenticates is its own command's say, not the shell's
    env.update(env_extra)
    start = time.perf_counter()
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=REPO, env=env)
    try:
        deadline = start + timeout
        with httpx.Client(timeout=2.0) as http:
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"{target.label} exited with {proc.returncode} before ready:\n{_log_tail(log)}")
                try:
                    if http.get(url + target.ready_path).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.perf_counter() > deadline:
                    raise RuntimeError(f"{target.label} was not ready after {timeout:.0f}s:\n{_log_tail(log)}")
                time.sleep(0.02)
        ready = time.perf_counter() - start
        yield Server(target=target, url=url, proc=proc, ready_seconds=ready, log=log, state_dir=state_dir, started=start)
    finally:
        processes.stop(proc)


@dataclass
class ToolsServer:
    url: str
    sandbox: Path
    journal: Path
    proc: subprocess.Popen[bytes] = field(repr=False)

    def touch(self, names: list[str]) -> None:
        """Create the files the scenario's conversations will delete."""
        for name in names:
            (self.sandbox / name).write_text("x")


@contextmanager
def tools_server(work: Path) -> Iterator[ToolsServer]:
    """``gatehouse demo-tools`` with a journal (one line per executed call), shared by every target of a run."""
    sandbox = work / "sandbox"
    journal = work / "journal.jsonl"
    sandbox.mkdir(parents=True, exist_ok=True)
    port = free_port()
    cmd = [sys.executable, "-c", "from agent_runtime.clients.cli import main; main()", "demo-tools",
           "--sandbox", str(sandbox), "--port", str(port), "--journal", str(journal)]
    log = work / "demo-tools.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=REPO, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        deadline = time.monotonic() + 60
        while "demo-tools ready" not in log.read_text(errors="replace"):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"demo-tools did not start:\n{_log_tail(log)}")
            time.sleep(0.05)
        yield ToolsServer(url=f"http://127.0.0.1:{port}/mcp", sandbox=sandbox, journal=journal, proc=proc)
    finally:
        processes.stop(proc)
