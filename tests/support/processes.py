"""Start the project's commands as real subprocesses on 127.0.0.1 and wait for their ready line."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from agent_runtime.clients import processes

GATEHOUSE_CMD = [sys.executable, "-c", "from agent_runtime.clients.cli import main; main()"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def running(args: list[str], ready: str, timeout: float = 30.0, cwd: Path | None = None) -> Iterator[subprocess.Popen[str]]:
    """Run ``args``; yield once a stdout line contains ``ready``; terminate (then kill) on exit."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=cwd)
    lines: list[str] = []
    seen = threading.Event()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if ready in line:
                seen.set()

    threading.Thread(target=pump, daemon=True).start()
    deadline = time.monotonic() + timeout
    try:
        while not seen.wait(0.05):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{args} did not get ready (exit {proc.poll()}):\n{''.join(lines)}")
        yield proc
    finally:
        processes.stop(proc, grace=5)
