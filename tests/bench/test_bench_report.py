"""The table's rows from fabricated results: ratios, targets and pass/fail are judged on the Gatehouse column."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from bench.operator_hook import operator_results
from bench.report import build_rows


def result(pause: float, resume: float, calls: float, rss: float, seconds: float, lost: float) -> dict[str, Any]:
    return {
        "latency": {"pause_ms": {"p50": pause, "p99": pause * 2}, "resume_ms": {"p50": resume, "p99": resume * 2},
                    "model_calls_per_approved_call": calls, "tool_runs_per_approval": 1.0},
        "held": {"rss_paused_mb": rss, "decisions_seconds": seconds, "decisions_per_second": 1000 / seconds},
        "loss": {"20": {"lost_percent": 0.0}, "60": {"lost_percent": lost}},
        "cold_start": {"ready_seconds": 2.0, "rss_at_rest_mb": 120.0},
    }


def rows_by_metric(results: dict[str, Any], available: dict[str, str]) -> dict[str, dict[str, Any]]:
    operator = {"available": False, "reason": "operator not available yet", "agents": 500}
    return {r["metric"]: r for r in build_rows(results, available, operator, 1000, (20, 60))}


def test_gatehouse_judged_against_targets_with_ratio_to_adk_durable() -> None:
    results = {
        "gatehouse": result(pause=10.0, resume=20.0, calls=2.0, rss=150.0, seconds=4.0, lost=0.0),
        "adk_durable": result(pause=80.0, resume=60.0, calls=2.0, rss=230.0, seconds=80.0, lost=0.2),
        "adk_memory": result(pause=15.0, resume=15.0, calls=2.0, rss=200.0, seconds=40.0, lost=0.0),
    }
    rows = rows_by_metric(results, {"gatehouse": "", "adk_durable": "", "adk_memory": ""})
    pause = rows["pause p50 (ms)"]
    assert (pause["gatehouse"], pause["adk_durable"], pause["ratio"], pause["pass"]) == (10.0, 80.0, 0.125, "pass")
    resume = rows["resume p50 (ms)"]  # 20 ms: over 15 ms, and ratio 0.333 > 0.25
    assert (resume["ratio"], resume["pass"]) == (0.333, "fail")
    assert rows["model calls per approved call"]["pass"] == "pass"
    assert rows["RSS with 1,000 paused (MB)"]["pass"] == "pass"
    assert rows["1,000 decisions (s)"]["pass"] == "pass"
    assert rows["lost at 60 concurrent (%)"]["pass"] == "pass"
    assert rows["lost at 60 concurrent (%)"]["ratio"] is None
    assert rows["lost at 20 concurrent (%)"]["pass"] is None  # no target at 20
    assert rows["operator: writes on a no-op resync"]["gatehouse"] == "operator not available yet"


def test_unavailable_gatehouse_keeps_adk_rows_and_says_why() -> None:
    results = {"adk_durable": result(80.0, 60.0, 2.0, 230.0, 80.0, 0.2)}
    available = {"gatehouse": "gatehouse runtime not available yet", "adk_durable": "", "adk_memory": "not run (--targets)"}
    rows = rows_by_metric(results, available)
    pause = rows["pause p50 (ms)"]
    assert pause["gatehouse"] == "gatehouse runtime not available yet"
    assert pause["adk_durable"] == 80.0 and pause["adk_memory"] == "not run (--targets)"
    assert pause["ratio"] is None and pause["pass"] is None


def test_operator_hook_reports_not_available_without_the_operator(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "gatehouse_operator" else real(name, *a))
    out = operator_results(500)
    assert out["agents"] == 500 and out["available"] is False
    assert "gatehouse_operator" in out["reason"] and out["agents_to_accepted_seconds"] is None


@pytest.mark.e2e
def test_operator_hook_measures_a_few_agents() -> None:
    out = operator_results(3)
    assert out["available"] is True, out["reason"]
    assert out["agents_to_accepted_seconds"] > 0 and out["api_requests_per_reconcile"] > 0
    assert out["writes_on_noop_resync"] == 0 and out["noop_reconciles"] >= 6


@pytest.mark.e2e
def test_only_operator_runs_just_the_operator_rows(tmp_path: Path) -> None:
    from bench import run

    assert run.main(["--only", "operator", "--operator-agents", "2", "--out", str(tmp_path), "--no-plot"]) == 0
    report = json.loads((tmp_path / "latest.json").read_text())
    assert report["results"] == {} and set(report["available"].values()) == {"not run (--only operator)"}
    rows = {r["metric"]: r for r in report["rows"]}
    assert rows["operator: 2 Agents to Accepted (s)"]["gatehouse"] > 0
    assert rows["operator: writes on a no-op resync"]["gatehouse"] == 0
    others = [r for r in report["rows"] if not r["metric"].startswith("operator:")]
    assert others and all(r["gatehouse"] == "not run (--only operator)" for r in others)
