"""``bench --real-model``: its rows, and a run where the local model is missing (the row says why; nothing starts)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from bench import real_model

REPO = Path(__file__).resolve().parents[2]


def _split(wall: float, model: float) -> dict[str, dict[str, float]]:
    return {"wall_ms": {"p50": wall}, "model_ms": {"p50": model}, "rest_ms": {"p50": wall - model}}


def test_rows_hold_the_split_and_judge_model_calls() -> None:
    result = {"available": True, "pause": _split(1300.0, 1250.0), "resume": _split(1500.0, 1440.0),
              "model_calls_per_approved_call": 2.0}
    rows = {r["metric"]: r for r in real_model.rows(result)}
    assert rows["real model: pause p50, of it the rest (ms)"]["gatehouse"] == 50.0
    assert rows["real model: resume p50, wall (ms)"]["gatehouse"] == 1500.0
    assert rows["real model: model calls per approved call"]["pass"] == "pass"


def test_without_the_model_the_row_says_why(tmp_path: Path) -> None:
    env = {**os.environ, "GATEHOUSE_LLM_CACHE": str(tmp_path / "no-cache")}
    cmd = [sys.executable, "-m", "bench.run", "--only", "real-model", "--out", str(tmp_path / "out"), "--no-plot"]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    report = json.loads((tmp_path / "out" / "latest.json").read_text())
    assert report["real_model"]["available"] is False
    assert "make e2e-llm" in report["real_model"]["reason"]
    assert report["rows"][0]["metric"] == "real model: pause p50, wall (ms)"  # --only real-model: its rows alone
