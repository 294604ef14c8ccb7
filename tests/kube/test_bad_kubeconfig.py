"""``gatehouse-runtime serve --kubeconfig`` with a file it cannot use: one clear line and exit 2, no traceback."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.runtime import RUNTIME_CMD, write_manifests

pytestmark = pytest.mark.e2e  # starts `gatehouse-runtime serve` as a real process


@pytest.mark.parametrize(
    ("content", "expected"),
    [(None, "no such file"), ("garbage: [\n", "ParserError"), ("{}\n", "Invalid kube-config file")],
    ids=["missing", "not-yaml", "empty"],
)
def test_serve_refuses_a_kubeconfig_it_cannot_use(tmp_path: Path, content: str | None, expected: str) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    if content is not None:
        kubeconfig.write_text(content)
    files = [arg for path in write_manifests(tmp_path / "m", "http://127.0.0.1:1/mcp") for arg in ("-f", str(path))]
    proc = subprocess.run(
        [*RUNTIME_CMD, "serve", *files, "--kubeconfig", str(kubeconfig), "--state-dir", str(tmp_path / "state")],
        capture_output=True, text=True, timeout=120,
    )
    output = " ".join((proc.stdout + proc.stderr).split())  # the console wraps long lines
    assert proc.returncode == 2, output
    assert f"cannot use kubeconfig {kubeconfig}" in output and expected in output, output
    assert "Traceback" not in output and "╭" not in output, output
