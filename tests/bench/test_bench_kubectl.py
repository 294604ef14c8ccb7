"""Bar 4's kubectl half (``bench/kubectl_path.py``, ``bars.kubectl_bars``): a ToolApproval patch to the tool having
run p50 < 100 ms, and the mirror keeping up (every ToolApproval created, creation lag p99 < 2 s, judged at the size
the run held and saying where the bar is). The bars and the lag arithmetic from fabricated results; then the section
end to end with tiny counts against the emulated API (e2e)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench import bars, run
from bench.kubectl_path import _Recorder, lag_stats, mirror_steps, timing_stats

REPO = Path(__file__).resolve().parents[2]


def section(p50: float = 12.0, p99: float = 900.0, paused: int = 10_000, mirrored: int = 10_000) -> dict[str, Any]:
    return {"patch": {"kubectl_to_tool_ms": {"p50": p50, "p90": p50 + 4}, "a2a_to_tool_ms": {"p50": 9.0}},
            "mirror": {"held": paused, "paused": paused, "mirrored": mirrored, "all_mirrored_seconds": 95.0,
                       "lag_ms": {"p50": 300.0, "p99": p99}}}


def by_key(judged: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {b["key"]: b for b in judged}


def test_kubectl_patch_to_tool_is_judged_on_its_p50() -> None:
    patch, _ = bars.kubectl_bars(section(), [])
    assert (patch["key"], patch["value"], patch["verdict"]) == ("kubectl", 12.0, "pass")
    assert patch["limit"] == "< 100 ms" and patch["measured"] == "p90 16 ms; A2A on the same runtime p50 9 ms"
    assert bars.kubectl_bars(section(p50=100.0), [])[0]["verdict"] == "fail"
    assert bars.kubectl_bars(section(p50=150.0), ["kubectl"])[0]["verdict"] == "noisy"
    assert bars.kubectl_bars(section(), ["kubectl"])[1]["verdict"] == "pass"  # the mirror has its own section


def test_the_mirror_keeps_up_when_all_are_created_with_p99_under_two_seconds() -> None:
    lag = bars.kubectl_bars(section(), [])[1]
    assert (lag["key"], lag["value"], lag["verdict"]) == ("mirror_lag", 900.0, "pass")
    assert lag["limit"] == "all created, p99 < 2000 ms" and "10,000/10,000 created" in lag["measured"]
    assert "at 10,000 paused" in lag["bar"] and "the bar is at" not in lag["bar"]
    assert bars.kubectl_bars(section(p99=2500.0), [])[1]["verdict"] == "fail"
    assert bars.kubectl_bars(section(mirrored=9_999), [])[1]["verdict"] == "fail"  # one never created
    assert bars.kubectl_bars(section(p99=2500.0), ["mirror"])[1]["verdict"] == "noisy"
    quick = bars.kubectl_bars(section(paused=1000, mirrored=1000), [])[1]
    assert "(the bar is at 10,000)" in quick["bar"] and quick["verdict"] == "pass"


def test_not_measured_says_why() -> None:
    assert {b["verdict"] for b in bars.kubectl_bars(None, [])} == {None}
    failed = bars.kubectl_bars({"reason": "kubectl bench not available (kmock is not importable)"}, [])
    assert [b["reason"] for b in failed] == ["kubectl bench not available (kmock is not importable)"] * 2
    patch_only = bars.kubectl_bars({"patch": section()["patch"]}, [])
    assert patch_only[0]["verdict"] == "pass" and patch_only[1]["reason"] == "not run (--mirror-held 0)"


def test_build_bars_has_the_kubectl_bars_once_instead_of_the_placeholder() -> None:
    judged = bars.build_bars({"kubectl": section()}, None, {"available": False, "reason": "x", "agents": 0}, [], ["A"])
    keys = [b["key"] for b in judged]
    assert keys.count("kubectl") == 1 and keys.index("kubectl") + 1 == keys.index("mirror_lag")
    assert keys.index("mirror_lag") + 1 == keys.index("rest_vs_a2a")
    assert by_key(judged)["kubectl"]["verdict"] == "pass"


def test_creation_lag_from_the_pause_answered_to_the_object_added() -> None:
    answered = {"t1": 10.0, "t2": 10.5, "t3": 11.0}
    created = {"a-1": 10.2, "a-2": 10.6, "other": 1.0}
    lag = lag_stats(answered, created, {"t1": "a-1", "t2": "a-2", "t3": "a-3"})
    assert (lag["n"], lag["mirrored"], lag["missing"]) == (2, 2, 1)
    assert lag["p50"] == pytest.approx(150.0) and lag["max"] == pytest.approx(200.0)
    assert timing_stats([])["p50"] is None and timing_stats([0.01, 0.02, 0.03])["p90"] == pytest.approx(28.0)


def test_mirror_steps_split_each_toolapprovals_time_before_and_after_the_last_pause() -> None:
    seen = [(2.0, 2.001), (1.0, 1.002), (1.01, 1.014), (2.004, None), (2.010, 2.012)]  # any order; one never Pending
    steps = mirror_steps(seen, split=1.5)
    assert steps["while_pausing"] == {"created_to_pending_ms": 3.0, "pending_to_next_created_ms": 497.0}
    assert steps["after"] == {"created_to_pending_ms": 1.5, "pending_to_next_created_ms": 3.0}
    assert mirror_steps([], 0.0)["after"] == {"created_to_pending_ms": None, "pending_to_next_created_ms": None}


def test_the_recorder_keeps_when_each_toolapproval_was_created_pending_and_decided() -> None:
    recorder = _Recorder()

    def event(kind: str, at: float, phase: str | None = None) -> None:
        obj: dict[str, Any] = {"metadata": {"name": "a-1", "resourceVersion": str(int(at))}}
        if phase:
            obj["status"] = {"phase": phase}
        recorder.put_nowait((at, {"type": kind, "object": obj}))

    event("ADDED", 1.0)
    event("MODIFIED", 2.0, "Pending")
    event("MODIFIED", 3.0, "Pending")
    event("MODIFIED", 4.0, "Approved")
    recorder.put_nowait((5.0, {"type": "_END"}))  # what the emulator's compact() sends: ignored
    seen = recorder.seen["a-1"]
    assert (seen.created, seen.pending, seen.decided) == (1.0, 2.0, 4.0)
    assert seen.obj["status"]["phase"] == "Approved"


def test_only_kubectl_runs_the_gatehouse_target_and_its_two_sections() -> None:
    args = run.parse_args(["--only", "kubectl", "--quick"])
    assert args.targets == ["gatehouse"] and args.operator_agents == 0
    assert run.sections_for(args) == {"kubectl", "mirror"}
    quick = run.settings_from(args)
    assert (quick.kubectl_iterations, quick.mirror_held) == (20, 1000)
    full = run.settings_from(run.parse_args([]))
    assert (full.kubectl_iterations, full.mirror_held) == (50, 10_000)
    assert {"kubectl", "mirror"} <= run.sections_for(run.parse_args(["--quick"]))  # part of the quick run too


@pytest.mark.e2e
@pytest.mark.long  # `make soak`: a cluster and runtimes for the kubectl rows, ~30 s
def test_only_kubectl_with_tiny_counts(tmp_path: Path) -> None:
    from bench.gatehouse_adapter import availability

    if not availability().ok:
        pytest.skip(availability().reason)
    out = tmp_path / "results"
    cmd = [sys.executable, "-m", "bench.run", "--only", "kubectl", "--kubectl-iterations", "2", "--warmup", "0",
           "--mirror-held", "5", "--hygiene-seconds", "0.1", "--out", str(out), "--no-plot"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads((out / "latest.json").read_text())
    kubectl = report["results"]["gatehouse"]["kubectl"]
    assert "reason" not in kubectl, kubectl
    assert kubectl["patch"]["errors"] == {} and kubectl["patch"]["kubectl_to_tool_ms"]["n"] == 2
    assert kubectl["patch"]["a2a_to_tool_ms"]["n"] == 2
    mirror = kubectl["mirror"]
    assert (mirror["paused"], mirror["mirrored"], mirror["missing"]) == (5, 5, 0)
    assert mirror["api_requests"]["POST toolapprovals"] == 5
    judged = {b["key"]: b for b in report["bars"]}
    assert judged["kubectl"]["verdict"] in ("pass", "fail", "noisy") and judged["kubectl"]["value"] > 0
    assert judged["mirror_lag"]["verdict"] in ("pass", "fail", "noisy")
    assert set(report["hygiene"]["sections"]) == {"kubectl", "mirror"}
    assert "kubectl: Gatehouse (default) with the ToolApproval mirror" in proc.stdout
