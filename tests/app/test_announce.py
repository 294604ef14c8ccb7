"""What ``gatehouse-runtime serve`` prints once it listens (agent_runtime/app/announce.py): its A2A, inbox and REST URLs,
on stderr at the default log level, with the real port, each answering."""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from pathlib import Path

import httpx
import pytest

from agent_runtime.app.announce import listening_url, startup_lines
from agent_runtime.clients import processes
from tests.support.runtime import RUNTIME_CMD, demo_tools, write_manifests


def test_the_lines_name_each_url_under_the_base() -> None:
    lines = startup_lines("file-manager", "http://127.0.0.1:8080/")
    assert lines[0] == "gatehouse-runtime: agent file-manager is listening on http://127.0.0.1:8080/"
    assert "http://127.0.0.1:8080/.well-known/agent-card.json" in lines[1]
    assert lines[2].endswith("http://127.0.0.1:8080/ui/") and lines[3].endswith("http://127.0.0.1:8080/approvals")
    assert startup_lines("a", "http://h:1/", "https://agent.example/")[-1] == "  the agent card announces https://agent.example/"
    assert listening_url("::1", 8080, tls=True) == "https://[::1]:8080/"


@pytest.mark.e2e
def test_serve_prints_its_urls_on_stderr_at_the_default_log_level(tmp_path: Path) -> None:
    with demo_tools(tmp_path / "tools") as tools:
        files = write_manifests(tmp_path / "manifests", tools.url)
        args = [*RUNTIME_CMD, "serve", "--port", "0", "--state-dir", str(tmp_path / "state")]
        for f in files:
            args += ["-f", str(f)]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        said: list[str] = []
        threading.Thread(target=lambda: said.extend(proc.stderr or ()), daemon=True).start()
        try:
            deadline = time.monotonic() + 120  # start-up is slow on a loaded machine
            while not any("REST approvals:" in line for line in said):
                assert proc.poll() is None and time.monotonic() < deadline, "".join(said)
                time.sleep(0.1)
            text = "".join(said)
            base = re.search(r"is listening on (http://127\.0\.0\.1:(\d+)/)", text)
            assert base is not None and base.group(2) != "0", text  # the port it bound, not the 0 it was given
            urls = {name: re.search(rf"{name}:\s+(\S+)", text) for name in ("A2A \\(JSON-RPC\\)", "approvals inbox",
                                                                              "REST approvals")}
            assert all(urls.values()), text
            a2a, inbox, rest = (m.group(1) for m in urls.values() if m is not None)
            assert a2a == base.group(1) and inbox == f"{a2a}ui/" and rest == f"{a2a}approvals"
            card = httpx.get(f"{a2a}.well-known/agent-card.json", timeout=10)
            assert card.status_code == 200 and card.json()["name"] == "file-manager"
            assert httpx.get(inbox, timeout=10).status_code == 200  # local mode: no login
            assert httpx.get(rest, timeout=10).json()["approvals"] == []
        finally:
            processes.stop(proc, grace=5)
