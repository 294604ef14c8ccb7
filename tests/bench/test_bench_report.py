"""The table's rows from fabricated results: ratios, targets and pass/fail are judged on the Gatehouse (default)
column; the authentication overhead bar compares the two Gatehouse columns (default - local mode); a row measured in
a noisy section says so instead of pass or fail."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from bench.operator_hook import operator_results
from bench.report import AUTH_BAR_MS, auth_overhead, auth_overhead_line, build_rows

ALL_RAN = {"gatehouse": "", "gatehouse_local": "", "adk_durable": "", "adk_memory": ""}
KINDS = ["Secret", "ServiceAccount", "Role", "RoleBinding", "Deployment", "Service"]


def result(pause: float, resume: float, calls: float, rss: float, seconds: float, lost: float) -> dict[str, Any]:
    return {
        "latency": {"pause_ms": {"p50": pause, "p99": pause * 2}, "resume_ms": {"p50": resume, "p99": resume * 2},
                    "model_calls_per_approved_call": calls, "tool_runs_per_approval": 1.0},
        "held": {"rss_paused_mb": rss, "decisions_seconds": seconds, "decisions_per_second": 1000 / seconds},
        "loss": {"20": {"lost_percent": 0.0}, "60": {"lost_percent": lost}},
        "cold_start": {"ready_seconds": 2.0, "rss_at_rest_mb": 120.0},
    }


def rows_by_metric(results: dict[str, Any], available: dict[str, str], noisy: tuple[str, ...] = (),
                   operator: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    operator = operator or {"available": False, "reason": "operator not available yet", "agents": 500}
    return {r["metric"]: r for r in build_rows(results, available, operator, 1000, (20, 60), noisy, KINDS)}


def test_gatehouse_judged_against_targets_with_ratio_to_adk_durable() -> None:
    results = {
        "gatehouse": result(pause=10.0, resume=20.0, calls=2.0, rss=150.0, seconds=4.0, lost=0.0),
        "adk_durable": result(pause=80.0, resume=60.0, calls=2.0, rss=230.0, seconds=80.0, lost=0.2),
        "adk_memory": result(pause=15.0, resume=15.0, calls=2.0, rss=200.0, seconds=40.0, lost=0.0),
    }
    rows = rows_by_metric(results, {**ALL_RAN, "gatehouse_local": "not run (--targets)"})
    pause = rows["pause p50 (ms)"]
    assert (pause["gatehouse"], pause["adk_durable"], pause["ratio"], pause["pass"]) == (10.0, 80.0, 0.125, "pass")
    resume = rows["resume p50 (ms)"]  # ratio 0.333 > 0.25
    assert (resume["ratio"], resume["pass"]) == (0.333, "fail")
    assert rows["model calls per approved call"]["pass"] == "pass"
    assert rows["RSS with 1,000 paused (MB)"]["pass"] == "pass"
    assert rows["1,000 decisions (s)"]["pass"] is None  # restated as bar 2, a ratio to the library ceiling
    assert rows["lost at 60 concurrent (%)"]["pass"] == "pass"
    assert rows["lost at 60 concurrent (%)"]["ratio"] is None
    assert rows["lost at 20 concurrent (%)"]["pass"] is None  # no target at 20
    assert rows["operator: writes on a no-op resync"]["gatehouse"] == "operator not available yet"


def test_a_noisy_section_is_neither_pass_nor_fail() -> None:
    results = {"gatehouse": result(10.0, 20.0, 2.0, 250.0, 4.0, 0.0), "adk_durable": result(80.0, 60.0, 2.0, 230.0, 80.0, 0.2)}
    rows = rows_by_metric(results, ALL_RAN, noisy=("latency", "held"))
    assert rows["pause p50 (ms)"]["pass"] == rows["resume p50 (ms)"]["pass"] == "noisy"
    assert rows["RSS with 1,000 paused (MB)"]["pass"] == "noisy"  # 250 MB would fail: not judged on a busy machine
    assert rows["model calls per approved call"]["pass"] == "pass"  # a count, not a timing: judged anyway
    assert rows["lost at 60 concurrent (%)"]["pass"] == "pass"


def test_operator_rows_are_judged_by_bar_6() -> None:
    operator = {"available": True, "reason": "", "agents": 2000, "agents_to_accepted_seconds": 45.0,
                "api_requests_per_reconcile": 15.0, "writes_on_noop_resync": 0}
    rows = rows_by_metric({}, ALL_RAN, operator=operator)
    accepted = rows["operator: 2,000 Agents to Accepted (s)"]
    assert (accepted["gatehouse"], accepted["pass"]) == (45.0, "pass")
    per = rows["operator: API requests per reconcile"]
    assert (per["gatehouse"], per["target"], per["pass"]) == (15.0, "<= 8 + 0 child kinds added since the issue = 8", "fail")
    assert rows["operator: writes on a no-op resync"]["gatehouse"] == 0
    few = rows_by_metric({}, ALL_RAN, operator={**operator, "agents": 50, "agents_to_accepted_seconds": 3.0})
    assert few["operator: 50 Agents to Accepted (s)"]["pass"] is None  # judged at 2,000
    noisy = rows_by_metric({}, ALL_RAN, noisy=("operator",), operator=operator)
    assert noisy["operator: 2,000 Agents to Accepted (s)"]["pass"] == "noisy"
    assert noisy["operator: writes on a no-op resync"]["pass"] == "pass"  # a count that must be 0 whatever the load


def test_unavailable_gatehouse_keeps_adk_rows_and_says_why() -> None:
    results = {"adk_durable": result(80.0, 60.0, 2.0, 230.0, 80.0, 0.2)}
    available = {"gatehouse": "gatehouse runtime not available yet", "gatehouse_local": "gatehouse runtime not available yet",
                 "adk_durable": "", "adk_memory": "not run (--targets)"}
    rows = rows_by_metric(results, available)
    pause = rows["pause p50 (ms)"]
    assert pause["gatehouse"] == "gatehouse runtime not available yet"
    assert pause["adk_durable"] == 80.0 and pause["adk_memory"] == "not run (--targets)"
    assert pause["ratio"] is None and pause["pass"] is None


def latency_only(pause: float, resume: float) -> dict[str, Any]:
    return {"latency": {"pause_ms": {"p50": pause, "p99": pause * 2}, "resume_ms": {"p50": resume, "p99": resume * 2}}}


def test_auth_overhead_within_the_bar_passes() -> None:
    results = {"gatehouse_local": latency_only(17.9, 28.3), "gatehouse": latency_only(18.4, 28.1)}  # +0.5, -0.2
    overhead = auth_overhead(results, ALL_RAN)
    assert overhead == {"pause_p50_ms": 0.5, "resume_p50_ms": -0.2, "bar_ms": AUTH_BAR_MS, "pass": True,
                        "noisy": False, "reason": ""}
    assert auth_overhead_line(overhead) == (
        "authentication overhead: pause p50 +0.50 ms, resume p50 -0.20 ms (gatehouse - gatehouse_local, same run), "
        "bar ≤ 0.5 ms: PASS")
    rows = rows_by_metric(results, ALL_RAN)
    pause, resume = rows["auth overhead: pause p50 (ms)"], rows["auth overhead: resume p50 (ms)"]
    assert (pause["gatehouse"], pause["gatehouse_local"], pause["ratio"], pause["pass"]) == (0.5, None, None, "pass")
    assert (resume["gatehouse"], resume["pass"]) == (-0.2, "pass")
    assert pause["target"].startswith("<= 0.5 ms")
    order = list(rows)  # the bar's rows follow the latency rows
    assert order.index("auth overhead: pause p50 (ms)") == order.index("resume p99 (ms)") + 1
    assert rows["pause p50 (ms)"]["gatehouse_local"] == 17.9  # the local-mode column has every metric too


def test_auth_overhead_over_the_bar_on_either_phase_fails() -> None:
    results = {"gatehouse_local": latency_only(17.9, 28.3), "gatehouse": latency_only(18.1, 28.9)}  # +0.2, +0.6
    overhead = auth_overhead(results, ALL_RAN)
    assert (overhead["pause_p50_ms"], overhead["resume_p50_ms"], overhead["pass"]) == (0.2, 0.6, False)
    assert auth_overhead_line(overhead).endswith("pause p50 +0.20 ms, resume p50 +0.60 ms "
                                                 "(gatehouse - gatehouse_local, same run), bar ≤ 0.5 ms: FAIL")
    rows = rows_by_metric(results, ALL_RAN)
    assert rows["auth overhead: pause p50 (ms)"]["pass"] == "pass"
    assert rows["auth overhead: resume p50 (ms)"]["pass"] == "fail"

    slower_pause = {"gatehouse_local": latency_only(17.9, 28.3), "gatehouse": latency_only(19.0, 28.3)}
    assert auth_overhead(slower_pause, ALL_RAN)["pass"] is False

    noisy = auth_overhead(results, ALL_RAN, noisy=("latency",))
    assert (noisy["pass"], noisy["noisy"]) == (None, True)
    assert auth_overhead_line(noisy).endswith("bar ≤ 0.5 ms: noisy (not judged)")
    assert rows_by_metric(results, ALL_RAN, noisy=("latency",))["auth overhead: resume p50 (ms)"]["pass"] == "noisy"


def test_auth_overhead_not_measured_says_why() -> None:
    available = {**ALL_RAN, "gatehouse_local": "not run (--targets)"}
    overhead = auth_overhead({"gatehouse": latency_only(17.9, 28.3)}, available)
    assert overhead["pass"] is None and overhead["pause_p50_ms"] is None
    assert overhead["reason"] == "gatehouse_local: not run (--targets)"
    assert auth_overhead_line(overhead) == (
        "authentication overhead: not measured (gatehouse_local: not run (--targets)), bar ≤ 0.5 ms")
    rows = rows_by_metric({"gatehouse": latency_only(17.9, 28.3)}, available)
    row = rows["auth overhead: pause p50 (ms)"]
    assert (row["gatehouse_local"], row["gatehouse"], row["pass"]) == ("not run (--targets)", None, None)

    errored = {"gatehouse_local": latency_only(17.9, 28.3), "gatehouse": {"latency": {"pause_ms": {"p50": None}}}}
    overhead = auth_overhead(errored, ALL_RAN)  # ran, but every iteration failed (e.g. 401s)
    assert overhead["pass"] is None and "no pause/resume p50" in overhead["reason"]


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
@pytest.mark.long  # `make soak`: the operator's rows end to end; test_operator_hook_measures_a_few_agents stays
def test_only_operator_runs_just_the_operator_rows(tmp_path: Path) -> None:
    from bench import run

    assert run.main(["--only", "operator", "--operator-agents", "2", "--out", str(tmp_path), "--no-plot",
                     "--hygiene-seconds", "0.1"]) == 0
    report = json.loads((tmp_path / "latest.json").read_text())
    assert list(report["hygiene"]["sections"]) == ["operator"]  # sampled before its one section
    assert report["results"] == {} and set(report["available"].values()) == {"not run (--only operator)"}
    rows = {r["metric"]: r for r in report["rows"]}
    assert rows["operator: 2 Agents to Accepted (s)"]["gatehouse"] > 0
    assert rows["operator: 2 Agents to Accepted (s)"]["pass"] is None  # judged at 2,000 Agents
    assert rows["operator: writes on a no-op resync"]["gatehouse"] == 0
    others = [r for r in report["rows"] if not r["metric"].startswith("operator:")]
    assert others and all(r["gatehouse"] == "not run (--only operator)" for r in others)
