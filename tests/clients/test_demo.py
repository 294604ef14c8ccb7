"""``gatehouse demo --no-interactive`` end to end: a real subprocess, stdin not a terminal, must pass by itself.

Port 8765 (the example's MCP URL) is held busy during the run, so the demo must also adjust the manifest.
"""

from __future__ import annotations

import dataclasses
import os
import re
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from agent_runtime.clients.demo import stack
from tests.support.processes import GATEHOUSE_CMD

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def port_8765_taken() -> Iterator[None]:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", stack.MCP_PORT))
            s.listen()
        except OSError:
            pass  # already taken by something else: the same situation for the demo
        yield


def test_demo_narrated_passes_and_stops_its_processes(port_8765_taken: None) -> None:
    proc = subprocess.run(
        [*GATEHOUSE_CMD, "demo", "--no-interactive"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "200"},
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    for line in (
        f"port {stack.MCP_PORT} is taken",
        "runtime ready at http://127.0.0.1:",
        "approvals inbox: open http://127.0.0.1:",
        "you> delete old.txt",
        '"interrupt_type": "tool_approval"',
        'decision> {"decision_type": "approve"}',
        "Delete of old.txt: deleted /old.txt",
        "old.txt is gone",
        """decision> {"decision_type": "deny", "reason": "notes.txt holds this week's meeting notes"}""",
        "rejected by the user: notes.txt holds this week's meeting notes",
        "notes.txt is still there",
        "you> read .env",
        '"decision_type": "batch"',
        "rejected by the user: b.txt is still in use",
        "demo passed",
    ):
        assert line in out, f"missing {line!r} in:\n{out}"
    assert "Traceback" not in out
    # Every child is gone: nothing the demo started still answers on the runtime port.
    match = re.search(r"runtime ready at http://127\.0\.0\.1:(\d+)", out)
    assert match is not None
    port = int(match.group(1))
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0


def test_adjusted_manifests_point_at_the_free_port(tmp_path: Path) -> None:
    example = ROOT / "examples" / "file-manager"
    local = stack.manifests_for(example, stack.MCP_PORT, tmp_path / "local")  # the example points at the cluster
    assert yaml.safe_load(local[2].read_text())["spec"]["url"] == "http://127.0.0.1:8765/mcp"
    files = stack.manifests_for(example, 40123, tmp_path / "m")
    docs = {p.name: yaml.safe_load(p.read_text()) for p in files}
    assert docs["mcp-server.yaml"]["spec"]["url"] == "http://127.0.0.1:40123/mcp"
    assert docs["agent.yaml"] == yaml.safe_load((example / "agent.yaml").read_text())


def test_cli_help_lists_demo() -> None:
    out = subprocess.run([*GATEHOUSE_CMD, "demo", "--help"], capture_output=True, text=True, timeout=60, env={
        **os.environ, "COLUMNS": "200"}).stdout
    assert "--interactive" in out and "--no-interactive" in out and "--keep" in out


def test_a_step_that_misbehaves_fails_the_demo_with_a_clear_message(monkeypatch: pytest.MonkeyPatch) -> None:
    from rich.console import Console

    from agent_runtime.clients.demo import runner, walkthrough

    wrong = dataclasses.replace(walkthrough.STEPS[1], reply=("Delete of old.txt: kept",))
    monkeypatch.setattr(walkthrough, "STEPS", [walkthrough.STEPS[0], wrong])
    monkeypatch.chdir(ROOT)
    console = Console(record=True, width=200)
    assert runner.run_demo(interactive=False, console=console) == runner.EXIT_FAILED
    out = console.export_text()
    assert "demo failed: step 2 ('delete old.txt'): the reply 'Delete of old.txt: deleted /old.txt" in out
    assert "does not contain ['Delete of old.txt: kept']" in out
    assert "demo passed" not in out
