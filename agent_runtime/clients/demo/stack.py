"""The processes behind ``gatehouse demo``: a seeded sandbox, the demo MCP server and the runtime.

    temp dir ─┬─ sandbox/     notes.txt, old.txt, report.md, .env, a.txt, b.txt  (what the tools may touch)
              ├─ state/       the runtime's sqlite database
              ├─ manifests/   an adjusted copy of the example, only when port 8765 is taken
              └─ tools.log, runtime.log

:func:`started` starts ``gatehouse demo-tools`` and ``gatehouse-runtime serve -f examples/file-manager/…`` as
subprocesses (each in its own session, so a Ctrl-C reaches only the demo, which then stops them), waits for the
tools' ready line and the runtime's ``/readyz``, and always terminates both on the way out.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import yaml

from agent_runtime.clients import processes

__all__ = ["EXAMPLE_FILES", "MCP_PORT", "SEED", "Stack", "StackError", "find_example", "started"]

MCP_PORT = 8765  # the tools server's port, locally and in the example's Service (examples/file-manager/tools-server.yaml)
RUNTIME_PORT = 8080  # the runtime's default; another free port when taken
EXAMPLE_FILES = ("agent.yaml", "modelconfig.yaml", "mcp-server.yaml")
SEED = {
    "notes.txt": "Meeting notes: ship the approval gate on Friday.\n",
    "old.txt": "An old draft nobody needs.\n",
    "report.md": "# Q3 report\nAll green.\n",
    ".env": "API_TOKEN=demo-not-a-real-secret\n",
    "a.txt": "scratch file a\n",
    "b.txt": "scratch file b\n",
}
_GATEHOUSE = [sys.executable, "-c", "from agent_runtime.clients.cli import main; main()"]
_RUNTIME = [sys.executable, "-c", "from agent_runtime.clients.cli import runtime_main; runtime_main()"]

Say = Callable[[str], None]


class StackError(RuntimeError):
    """The demo could not start its processes; the message says why (with the log's tail)."""


@dataclass
class Stack:
    """Where everything lives once started."""

    base: Path
    sandbox: Path
    manifests: list[Path]
    mcp_url: str
    url: str
    logs: dict[str, Path] = field(default_factory=dict)

    def log_tail(self, name: str, lines: int = 30) -> str:
        path = self.logs.get(name)
        if path is None or not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def find_example() -> Path:
    """``examples/file-manager`` in the working directory, else in the source tree this package runs from."""
    for root in (Path.cwd(), Path(__file__).resolve().parents[2]):
        candidate = root / "examples" / "file-manager"
        if all((candidate / name).is_file() for name in EXAMPLE_FILES):
            return candidate
    raise StackError("examples/file-manager/ not found: run the demo from a checkout of the Gatehouse repository.")


def port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def seed(sandbox: Path, *, overwrite: bool = True) -> None:
    """The demo's files in ``sandbox``; ``overwrite`` False leaves files already there alone (a restarted server)."""
    sandbox.mkdir(parents=True, exist_ok=True)
    for name, text in SEED.items():
        if overwrite or not (sandbox / name).exists():
            (sandbox / name).write_text(text, encoding="utf-8")


def manifests_for(example: Path, mcp_port: int, out_dir: Path) -> list[Path]:
    """The example's manifests in ``out_dir``, the RemoteMCPServer pointed at the local tools server on ``mcp_port``
    (the example itself points at the in-cluster Service of tools-server.yaml)."""
    files = [example / name for name in EXAMPLE_FILES]
    out_dir.mkdir(parents=True, exist_ok=True)
    out = []
    for path in files:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        if doc.get("kind") == "RemoteMCPServer":
            doc["spec"]["url"] = f"http://127.0.0.1:{mcp_port}/mcp"
        target = out_dir / path.name
        target.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
        out.append(target)
    return out


@contextmanager
def started(say: Say, *, keep: bool = False, timeout: float = 90.0) -> Iterator[Stack]:
    """Seed a sandbox, start the tools and the runtime, yield once both are ready; stop both (and clean up) after."""
    example = find_example()
    base = Path(tempfile.mkdtemp(prefix="gatehouse-demo-"))
    try:
        with ExitStack() as stack:
            sandbox = base / "sandbox"
            seed(sandbox)
            say(f"sandbox [bold]{sandbox}[/] seeded with {', '.join(SEED)}")
            mcp_port = MCP_PORT if port_free(MCP_PORT) else free_port()
            files = manifests_for(example, mcp_port, base / "manifests")
            if mcp_port != MCP_PORT:
                say(f"port {MCP_PORT} is taken: the tools listen on {mcp_port}, manifests adjusted in {files[0].parent}")
            runtime_port = RUNTIME_PORT if port_free(RUNTIME_PORT) else free_port()
            logs = {"tools": base / "tools.log", "runtime": base / "runtime.log"}
            out = Stack(base, sandbox, files, f"http://127.0.0.1:{mcp_port}/mcp", f"http://127.0.0.1:{runtime_port}", logs)

            tools_args = ["demo-tools", "--sandbox", str(sandbox), "--port", str(mcp_port)]
            say(f"$ gatehouse {' '.join(tools_args)}")
            tools = stack.enter_context(_process([*_GATEHOUSE, *tools_args], logs["tools"]))
            _wait(lambda: "demo-tools ready" in logs["tools"].read_text(errors="replace"), tools, out, "tools", timeout)

            serve_args = ["serve", "--port", str(runtime_port), "--state-dir", str(base / "state")]
            for path in files:
                serve_args += ["-f", _shown(path)]
            say(f"$ gatehouse-runtime {' '.join(serve_args)}")
            runtime = stack.enter_context(_process([*_RUNTIME, *serve_args], logs["runtime"]))
            _wait(lambda: _ready(out.url), runtime, out, "runtime", timeout)
            say(f"runtime ready at [bold]{out.url}[/] (agent card: {out.url}/.well-known/agent-card.json)")
            say(f"approvals inbox: open [bold]{out.url}/ui/[/] in a browser to see and decide pending calls "
                f"(chat tab: {out.url}/ui/chat)")
            yield out
    finally:
        if keep:
            say(f"kept {base} (sandbox, runtime state, logs)")
        else:
            shutil.rmtree(base, ignore_errors=True)


def _shown(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


@contextmanager
def _process(args: list[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with log.open("ab") as sink:
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
    try:
        yield proc
    finally:
        processes.stop(proc)


def _ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/readyz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _wait(check: Callable[[], bool], proc: subprocess.Popen[bytes], stack: Stack, name: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if proc.poll() is not None:
            raise StackError(f"{name} exited with code {proc.returncode} before it was ready:\n{stack.log_tail(name)}")
        if time.monotonic() > deadline:
            raise StackError(f"{name} was not ready within {timeout:.0f}s:\n{stack.log_tail(name)}")
        time.sleep(0.1)
