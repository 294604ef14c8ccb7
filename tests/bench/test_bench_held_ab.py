"""``python -m bench.held_ab`` end to end, small: two trees (both this checkout) filled with a few paused
conversations each, the sides' medians and B - A printed; and one traced fill, whose probe reports what was kept
and what a full collection found. Checks the output's shape, never the figures."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

# `make soak`: an A/B bench tool end to end (two trees, ~25 s), as bench/cold_ab.py's test
pytestmark = [pytest.mark.e2e, pytest.mark.long]

REPO = Path(__file__).resolve().parents[2]


def _run(*args: str, work: Path) -> list[str]:
    done = subprocess.run([sys.executable, "-m", "bench.held_ab", *args, "--paused", "5", "--work", str(work)],
                          capture_output=True, text=True, cwd=REPO, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.splitlines()


def test_one_round_prints_each_side_and_the_difference(tmp_path: Path) -> None:
    lines = _run("--a", str(REPO), "--b", str(REPO), "--rounds", "1", work=tmp_path)
    for side in ("A", "B"):
        line = next(x for x in lines if x.startswith(f"{side}: RSS at rest p50"))
        rest, paused = (float(v) for v in re.findall(r"at rest p50 ([\d.]+) MB, with 5 paused p50 ([\d.]+) MB", line)[0])
        assert rest > 50 and paused > 50  # a served runtime's resident memory
    assert any(x.startswith("B - A: at rest ") for x in lines), lines
    assert "interleaved" in lines[-1]


def test_a_traced_fill_reports_what_was_kept_and_the_garbage_waiting(tmp_path: Path) -> None:
    lines = _run("--trace", str(tmp_path / "trace"), work=tmp_path / "work")
    assert lines[0] == "5 paused"
    assert re.match(r"Python memory allocated since rest, alive: [\d.]+ MB", lines[1]), lines[:3]
    for stage in ("rest", "paused"):
        line = next(x for x in lines if x.startswith(f"{stage}: VmRSS"))
        assert re.search(r"a full collection found \d+ objects", line), line
    assert (tmp_path / "trace" / "paused.snapshot").stat().st_size > 0
