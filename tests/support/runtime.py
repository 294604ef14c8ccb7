"""End-to-end helpers: the demo MCP server and the runtime as real processes, and a raw A2A JSON-RPC client."""

from __future__ import annotations

import json
import os
import signal
import ssl
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from agent_runtime.clients import processes
from tests.support.processes import GATEHOUSE_CMD, free_port, running

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "file-manager"
RUNTIME_CMD = [sys.executable, "-c", "from agent_runtime.clients.cli import runtime_main; runtime_main()"]


@dataclass
class Tools:
    url: str
    sandbox: Path
    journal: Path
    process: subprocess.Popen[str] | None = None  # the server, where a test may stop it (an MCP server scaled to 0)

    def executions(self, tool: str | None = None, path: str | None = None) -> list[dict[str, Any]]:
        if not self.journal.exists():
            return []
        lines = [json.loads(line) for line in self.journal.read_text().splitlines() if line.strip()]
        return [
            x for x in lines
            if (tool is None or x["tool"] == tool) and (path is None or x["args"].get("path") == path)
        ]


@contextmanager
def demo_tools(base: Path) -> Iterator[Tools]:
    sandbox, journal = base / "sandbox", base / "journal.jsonl"
    sandbox.mkdir(parents=True, exist_ok=True)
    port = free_port()
    args = [*GATEHOUSE_CMD, "demo-tools", "--sandbox", str(sandbox), "--port", str(port), "--journal", str(journal)]
    with running(args, ready="demo-tools ready") as process:
        yield Tools(f"http://127.0.0.1:{port}/mcp", sandbox, journal, process)


def write_manifests(directory: Path, mcp_url: str, **approval: Any) -> list[Path]:
    """The example manifests with the MCP URL pointed at ``mcp_url`` and ``spec.approval`` fields overridden. The
    example's approvers (sre, and ``anonymous`` for local use) are left out unless given: a test's Agent decides by the
    default (the requester alone) or by the approvers the test names."""
    directory.mkdir(parents=True, exist_ok=True)
    out = []
    for name in ("agent.yaml", "modelconfig.yaml", "mcp-server.yaml"):
        doc = yaml.safe_load((EXAMPLE / name).read_text())
        if doc["kind"] == "RemoteMCPServer":
            doc["spec"]["url"] = mcp_url
        if doc["kind"] == "Agent":
            doc["spec"]["approval"].pop("approvers", None)
            doc["spec"]["approval"].update(approval)
        path = directory / name
        path.write_text(yaml.safe_dump(doc))
        out.append(path)
    return out


class RuntimeProcess:
    """``gatehouse-runtime serve`` as a subprocess; ``kill9()`` and ``start()`` again for restarts."""

    def __init__(
        self, files: list[Path], state_dir: Path, log: Path, extra_args: list[str] | None = None, serve_args: Sequence[str] = (),
        verify: ssl.SSLContext | None = None,
    ) -> None:
        self.files, self.state_dir, self.log = files, state_dir, log
        self.extra_args = list(extra_args or [])
        self.serve_args = list(serve_args)
        self.port = free_port()
        self.verify = verify  # served over HTTPS (--tls-cert), trusted with this context
        self.url = f"{'https' if verify else 'http'}://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 120.0) -> None:  # generous: start-up is slow on a loaded 2-core machine
        args = [*RUNTIME_CMD, "serve", "--port", str(self.port), "--state-dir", str(self.state_dir), *self.extra_args]
        for f in self.files:
            args += ["-f", str(f)]
        args += self.serve_args
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"runtime exited {self.proc.returncode}:\n{self.log.read_text()[-4000:]}")
            try:
                if httpx.get(f"{self.url}/readyz", timeout=1, verify=self.verify or True).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"runtime not ready:\n{self.log.read_text()[-4000:]}")

    def kill9(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None:
            processes.stop(self.proc)


@contextmanager
def runtime(base: Path, tools: Tools, serve_args: Sequence[str] = (), **approval: Any) -> Iterator[RuntimeProcess]:
    files = write_manifests(base / "manifests", tools.url, **approval)
    proc = RuntimeProcess(files, base / "state", base / "runtime.log", serve_args=serve_args)
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


class Rpc:
    """Raw A2A JSON-RPC over httpx (header ``A2A-Version: 1.0``), returning plain JSON."""

    def __init__(self, url: str, token: str | None = None, verify: ssl.SSLContext | None = None) -> None:
        headers = {"A2A-Version": "1.0", **({"Authorization": f"Bearer {token}"} if token else {})}
        self.client = httpx.Client(base_url=url, headers=headers, timeout=60, verify=verify or True)

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        body = {"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": method, "params": params}
        reply = self.client.post("/", json=body)
        reply.raise_for_status()
        return reply.json()

    def send(
        self, text: str | None = None, data: Any = None, task: dict[str, Any] | None = None, context_id: str | None = None
    ) -> dict[str, Any]:
        """SendMessage; returns the JSON-RPC ``result`` (``{"task": …}`` or ``{"message": …}``), or raises on error."""
        parts: list[dict[str, Any]] = []
        if text is not None:
            parts.append({"text": text})
        if data is not None:
            parts.append({"data": data})
        message: dict[str, Any] = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": parts}
        if task is not None:
            message["taskId"], message["contextId"] = task["id"], task["contextId"]
        elif context_id is not None:
            message["contextId"] = context_id
        reply = self.call("SendMessage", {"message": message})
        if "error" in reply:
            raise RuntimeError(reply["error"])
        return reply["result"]

    def send_finished(self, text: str | None = None, data: Any = None, *, task: dict[str, Any]) -> str:
        """SendMessage on ``task``, finished: checks the answer is the A2A error for it (-32004) and returns what its
        data explains ("Already decided: …")."""
        try:
            self.send(text, data, task=task)
        except RuntimeError as exc:
            (error,) = exc.args
            assert error["code"] == -32004, error
            return finished_explanation(error)
        raise AssertionError(f"task {task['id']} took a message: it is not finished")

    def get_task(self, task_id: str) -> dict[str, Any]:
        reply = self.call("GetTask", {"id": task_id})
        if "error" in reply:
            raise RuntimeError(reply["error"])
        return reply["result"]

    def metric(self, name: str, **labels: str) -> float:
        text = self.client.get("/metrics").text
        want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        for line in text.splitlines():
            if line.startswith("#"):
                continue
            key, _, value = line.rpartition(" ")
            metric, _, label_text = key.partition("{")
            got = ",".join(sorted(x for x in label_text.rstrip("}").split(",") if x))
            if metric == name and got == want:
                return float(value)
        return 0.0


def state(task: dict[str, Any]) -> str:
    return task["status"]["state"]


ENDED = frozenset({"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"})


def ended(task: dict[str, Any]) -> bool:
    """The task's turn is over. (Not merely "no longer paused": a decided task is WORKING while its call runs.)"""
    return state(task) in ENDED


def status_text(task: dict[str, Any]) -> str:
    """What the task says now: a finished turn's reply (its artifacts), then its status message's text."""
    parts = [p for a in task.get("artifacts", []) for p in a.get("parts", [])]
    parts += task["status"].get("message", {}).get("parts", [])
    return "\n".join(p["text"] for p in parts if "text" in p)


def reply_text(task: dict[str, Any]) -> str:
    """A finished turn's reply alone: the text of the task's artifacts."""
    return "\n".join(p["text"] for a in task.get("artifacts", []) for p in a.get("parts", []) if "text" in p)


def finished_explanation(error: dict[str, Any]) -> str:
    """What a JSON-RPC error for a message to a finished task (-32004) explains: "Already decided: …", "Nothing was
    run; …" (the ``explanation`` of its ``google.rpc.ErrorInfo`` detail; docs/wire-contract.md)."""
    for detail in error.get("data") or []:
        if isinstance(detail, dict) and detail.get("@type", "").endswith("google.rpc.ErrorInfo"):
            return str(detail.get("metadata", {}).get("explanation", ""))
    return ""


def interrupt(task: dict[str, Any]) -> dict[str, Any]:
    (data,) = [p["data"] for p in task["status"]["message"]["parts"] if "data" in p]
    return data


def request_ids(task: dict[str, Any]) -> list[str]:
    return [r["id"] for r in interrupt(task)["action_requests"]]


def wait_for(predicate: Any, timeout: float = 15.0, interval: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(interval)


__all__ = [
    "Rpc", "RuntimeProcess", "Tools", "demo_tools", "finished_explanation", "interrupt", "request_ids", "runtime", "state",
    "status_text",
    "wait_for", "write_manifests",
]
