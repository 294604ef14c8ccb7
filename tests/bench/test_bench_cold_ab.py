"""``python -m bench.cold_ab`` end to end with one round: two trees (here both this checkout) started as the bench's
default target, the sides' medians and their ratios printed. Checks the output's shape, never timings."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.long  # `make soak`: cold starts of both sides
def test_one_round_prints_each_side_and_the_ratios(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.cold_ab", "--a", str(REPO), "--b", str(REPO), "--rounds", "1", "--settle", "0",
         "--no-adk", "--work", str(tmp_path)],
        capture_output=True, text=True, cwd=REPO, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    for side in ("A", "B"):
        line = next(x for x in lines if x.strip().startswith(f"{side}: ready p50"))
        ready, cpu, rss = (float(v) for v in re.findall(
            r"ready p50 ([\d.]+) s .*CPU to ready p50 ([\d.]+) s .*RSS at rest p50 ([\d.]+) MB", line)[0])
        assert ready > 0 and cpu > 0 and rss > 50  # a served runtime, read once it answered /readyz
    assert any(x.startswith("B/A: ready ") and "CPU to ready" in x and "RSS" in x for x in lines), done.stdout
    assert "interleaved" in lines[-1]
