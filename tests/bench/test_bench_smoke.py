"""The bench end to end with tiny counts: the plain-ADK baseline servers (durable and in-memory) under the real
driver, over HTTP on 127.0.0.1. Checks the shape and sanity of ``latest.json``; never timings."""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.gatehouse_adapter import GatehouseTarget
from bench.scenarios import Settings
from tests.support.processes import free_port

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
ADK = ("adk_durable", "adk_memory")


def floors_add_up(floors: dict[str, Any]) -> bool:
    assert floors["a2a"]["pause_ms"] > 0 and floors["a2a"]["reply_ms"] > 0
    # the server's CPU comes from psutil's process times, which tick at 10 ms: 6 requests on a quiet machine can read 0
    assert floors["a2a"]["server_cpu_ms_per_request"] >= 0
    assert floors["adk"]["pause_turn_ms"] > 0 and floors["adk"]["resume_turn_ms"] > 0
    assert floors["mcp"]["call_ms"] > 0 and floors["mcp"]["client_cpu_ms_per_call"] > 0
    assert floors["pause_floor_ms"] == pytest.approx(floors["a2a"]["pause_ms"] + floors["adk"]["pause_turn_ms"], abs=0.02)
    assert floors["resume_floor_ms"] == pytest.approx(
        floors["a2a"]["reply_ms"] + floors["adk"]["resume_turn_ms"] + floors["mcp"]["call_ms"], abs=0.02)
    a2a, adk, mcp = floors["a2a"], floors["adk"], floors["mcp"]
    cpu_ms = a2a["server_cpu_ms_per_request"] + adk["resume_turn_ms"] + mcp["client_cpu_ms_per_call"]
    assert floors["decisions_per_second_ceiling_pooled"] == pytest.approx(1000 / cpu_ms, abs=0.1)
    # bar 2's denominator: the median of the rounds' ceilings (3 iterations in 2 rounds)
    assert len(floors["decisions_per_second_ceiling_rounds"]) == 2
    assert floors["decisions_per_second_ceiling"] == pytest.approx(
        statistics.median(floors["decisions_per_second_ceiling_rounds"]), abs=0.1)
    return True


@pytest.mark.long  # `make soak`: the whole ADK side of the bench, ~60 s
def test_bench_quick_adk_rows(tmp_path: Path) -> None:
    out = tmp_path / "results"
    cmd = [sys.executable, "-m", "bench.run", "--targets", ",".join(ADK), "--iterations", "3", "--warmup", "0",
           "--paused", "5", "--concurrency", "5", "--loss-levels", "2", "--loss-conversations", "2",
           "--rounds", "2", "--cold-starts", "1", "--settle", "0.1", "--hygiene-seconds", "0.1", "--out", str(out),
           "--work", str(tmp_path / "work"), "--no-plot"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    report = json.loads((out / "latest.json").read_text())
    assert {"meta", "settings", "available", "hygiene", "results", "operator", "floors", "auth_overhead", "bars",
            "rows"} <= set(report)
    assert len(list(out.glob("2*.json"))) == 1  # the timestamped copy
    assert report["available"]["gatehouse"] == report["available"]["gatehouse_local"] == "not run (--targets)"
    # a CPU sample before each section that ran, each judged quiet or noisy (the machine running this test may be busy)
    samples = report["hygiene"]["sections"]
    assert list(samples) == ["floors", "cold_start", "latency", "loss", "held"]
    assert all(x["verdict"] in ("quiet", "noisy") and x["others_cores"] >= 0 for x in samples.values())
    bars = {b["key"]: b for b in report["bars"]}  # the Gatehouse bars: not measured without the gatehouse target
    assert bars["share_pause"]["verdict"] is None and bars["backlog_pause"]["verdict"] is None
    assert bars["operator_requests"]["limit"].startswith("<= 8 + ")
    assert report["auth_overhead"]["pass"] is None and report["auth_overhead"]["reason"] == "gatehouse: not run (--targets)"
    assert "authentication overhead: not measured" in proc.stdout
    assert report["operator"]["available"] is False and report["operator"]["reason"]
    assert report["meta"]["machine"]["nproc"] >= 1

    for key in ADK:
        assert report["available"][key] == ""
        result = report["results"][key]
        latency = result["latency"]
        assert latency["errors"] == {}
        assert latency["approved"] == 3
        for phase in ("pause_ms", "resume_ms"):
            assert latency[phase]["n"] == 3
            assert 0 < latency[phase]["p50"] <= latency[phase]["p99"]
        assert latency["model_calls_per_approved_call"] == 2  # ADK's confirmation: call, then summary
        assert latency["tool_runs_per_approval"] == 1  # the journal: every approved call ran exactly once

        held = result["held"]
        assert held["paused"] == 5 and held["decisions"] == 5
        assert held["tool_ran_once"] == 5 and held["tool_ran_twice"] == 0 and held["tool_not_run"] == 0
        assert held["rss_paused_mb"] > 0 and held["decisions_per_second"] > 0
        # bar 2's numerator: the median of the rounds (5 decided in 2, --rounds 2), the two targets taking turns
        assert held["rounds"] == 2 and held["round_decisions"] == [3, 2] and held["interleaved"] is True
        assert held["decisions_per_second"] == pytest.approx(statistics.median(held["decisions_per_second_rounds"]),
                                                             abs=0.01)

        loss = result["loss"]["2"]
        assert loss["conversations"] == 2 and loss["lost"] == 0

        cold = result["cold_start"]
        assert cold["ready_seconds"] > 0 and cold["rss_at_rest_mb"] > 0

    # the libraries alone, composed into pauses and resumes (the bars' floors) and each alone in a loop (``tight``):
    # every part measured, and the sums add up
    assert floors_add_up(report["floors"]) and floors_add_up(report["floors"]["tight"])
    assert report["floors"]["rounds"] == 2
    assert "Library floors on this machine" in proc.stdout

    metrics = [row["metric"] for row in report["rows"]]
    assert "pause p50 (ms)" in metrics and "model calls per approved call" in metrics
    assert any(m.startswith("operator:") for m in metrics)
    assert all(row["gatehouse"] == "not run (--targets)" for row in report["rows"] if not row["metric"].startswith("operator:"))


def test_gatehouse_adapter_reports_unavailable_runtime_or_builds_its_command(tmp_path: Path) -> None:
    from bench.gatehouse_adapter import NOT_AVAILABLE, GatehouseTarget, availability, parse_metric

    avail = availability()
    if not avail.ok:
        assert avail.reason.startswith(NOT_AVAILABLE)
    cmd = GatehouseTarget().command(free_port(), tmp_path / "state", "http://127.0.0.1:9/mcp", tmp_path)
    assert cmd[len(avail.executable)] == "serve" and "--state-dir" in cmd and "--port" in cmd
    assert "http://127.0.0.1:9/mcp" in (tmp_path / "mcp.yaml").read_text()
    text = 'gatehouse_model_calls_total{agent="a"} 3.0\ngatehouse_model_calls_total{agent="b"} 1\nother_total 9\n'
    assert parse_metric(text, "gatehouse_model_calls_total") == 4.0
    assert parse_metric("", "gatehouse_model_calls_total") is None


def test_backlog_of_the_default_gatehouse(tmp_path: Path) -> None:
    """``--only backlog`` with tiny counts against the real runtime as configured by default (a bearer token on
    every request, REST included): every size measured, the first page of GET /approvals as long as the backlog."""
    from bench.gatehouse_adapter import availability

    if not availability().ok:
        pytest.skip(availability().reason)
    out = tmp_path / "results"
    cmd = [sys.executable, "-m", "bench.run", "--only", "backlog", "--backlog", "3,6", "--backlog-probes", "2",
           "--backlog-decisions", "2", "--warmup", "0", "--hygiene-seconds", "0.1", "--out", str(out), "--no-plot"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads((out / "latest.json").read_text())
    assert report["available"]["gatehouse"] == "" and report["available"]["adk_durable"] == "not run (--only backlog)"
    steps = report["results"]["gatehouse"]["backlog"]["steps"]
    assert [s["backlog"] for s in steps] == [3, 6]
    for s in steps:
        assert s["errors"] == {} and s["fill_errors"] == {}, s
        assert s["pause_ms"]["n"] == s["resume_ms"]["n"] == s["listing_ms"]["n"] == 2
        assert s["decisions"] == 2 and s["rss_mb"] > 0 and s["hygiene"]["verdict"] in ("quiet", "noisy")
    bars = {b["key"]: b for b in report["bars"]}
    assert bars["backlog_pause"]["verdict"] in ("pass", "fail", "noisy") and bars["backlog_pause"]["value"] > 0
    assert set(report["hygiene"]["sections"]) == {"backlog 3", "backlog 6", "backlog"}
    assert "Backlog: a Gatehouse (default) runtime per size" in proc.stdout


def test_bar_one_is_measured_in_the_floors_rounds(tmp_path: Path) -> None:
    """``--only held`` with the default target: the floors' rounds each end with Gatehouse pause+approve pairs on a
    server of their own (``floors["gatehouse"]``), and bar 1 is judged on those; each held round is measured beside a
    library ceiling round, and bar 4 is judged on those pairs."""
    out = tmp_path / "results"
    cmd = [sys.executable, "-m", "bench.run", "--only", "held", "--targets", "gatehouse", "--iterations", "4",
           "--warmup", "0", "--rounds", "2", "--paused", "4", "--concurrency", "2", "--settle", "0.1",
           "--hygiene-seconds", "0.1", "--out", str(out), "--work", str(tmp_path / "work"), "--no-plot"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads((out / "latest.json").read_text())
    ours = report["floors"]["gatehouse"]
    assert ours["errors"] == {} and ours["pause_ms"]["n"] == ours["resume_ms"]["n"] == 4  # 2 rounds of 2
    assert 0 < ours["pause_ms"]["p50"] and 0 < ours["resume_ms"]["p50"]
    bars = {b["key"]: b for b in report["bars"]}
    share = ours["pause_ms"]["p50"] - report["floors"]["pause_floor_ms"]
    assert bars["share_pause"]["value"] == pytest.approx(share, abs=0.01)
    assert bars["share_pause"]["sections"] == ["floors"] and "in the floors' rounds" in bars["share_pause"]["measured"]
    assert "pause+approve pairs (bar 1)" in proc.stdout
    # bar 4: each held round of the default target beside a ceiling round of the composed libraries, judged in pairs
    held = report["results"]["gatehouse"]["held"]
    ceilings = held["decisions_per_second_ceiling_rounds"]
    assert len(ceilings) == len(held["decisions_per_second_rounds"]) == 2 and all(c > 0 for c in ceilings)
    ratio = statistics.median(r / c for r, c in zip(held["decisions_per_second_rounds"], ceilings, strict=True))
    assert bars["throughput"]["value"] == pytest.approx(ratio, abs=0.001) and bars["throughput"]["sections"] == ["held"]
    assert bars["throughput"]["measured"].startswith("median of 2 rounds, each beside its own ceiling: ")


class _NeverReady(GatehouseTarget):
    """The ``gatehouse`` target, its server exiting at once."""

    def command(self, port: int, state_dir: Path, tools_url: str, work: Path) -> list[str]:
        return [sys.executable, "-c", "raise SystemExit(3)"]


def test_the_floors_stand_when_the_bar_one_server_does_not_start(tmp_path: Path) -> None:
    """The Gatehouse server of bar 1's pairs failing to start costs bar 1's pairs (why is kept), not the floors."""
    from bench import run

    settings = Settings(iterations=2, warmup=0, rounds=1)
    broken = _NeverReady(key="gatehouse")
    _, floor = asyncio.run(run.measure([broken], {"gatehouse": ""}, settings, tmp_path, {"floors"}, run.Quiet(0.1, 0.25)))
    assert floor["pause_floor_ms"] > 0 and floor["tight"]["resume_floor_ms"] > 0
    assert "gatehouse" not in floor and "exited with 3" in floor["gatehouse_error"]
