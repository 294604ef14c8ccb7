"""The MCP gateway's speed section (``bench/gateway_path.py``, ``bars.gateway_bars``; issue 38 "Speed"): the two
ratios judged from fabricated results, then the section end to end with tiny counts against real processes (e2e):
the gateway, the runtime and the demo tools on 127.0.0.1, the MCP SDK's own client."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench import bars, run

REPO = Path(__file__).resolve().parents[2]


def section(through: float = 4.0, direct: float = 3.2, held: float = 15.0, a2a: float = 14.0) -> dict[str, Any]:
    return {"direct_ms": {"p50": direct}, "through_ms": {"p50": through}, "gateway_decision_ms": {"p50": held},
            "a2a_decision_ms": {"p50": a2a}, "passthrough_ratio": round(through / direct, 3),
            "decision_ratio": round(held / a2a, 3)}


def test_the_two_ratios_are_judged_on_their_p50s() -> None:
    passthrough, decision = bars.gateway_bars(section(), [])
    assert (passthrough["key"], passthrough["value"], passthrough["verdict"]) == ("gateway_passthrough", 1.25, "pass")
    assert passthrough["limit"] == "<= 1.3" and passthrough["measured"] == "4 / 3.2 ms"
    assert (decision["key"], decision["value"], decision["verdict"]) == ("gateway_decision", 1.071, "pass")
    assert bars.gateway_bars(section(through=6.4), [])[0]["verdict"] == "fail"  # 2x
    assert bars.gateway_bars(section(held=17.0), [])[1]["verdict"] == "fail"  # 1.21x
    assert {b["verdict"] for b in bars.gateway_bars(section(through=6.4), ["gateway"])} == {"noisy"}


def test_the_hops_floor_is_shown_beside_the_pass_through_not_judged() -> None:
    measured = {**section(through=6.0, direct=3.0), "bare_ms": {"p50": 3.9}, "bare_ratio": 1.3}
    passthrough, decision = bars.gateway_bars(measured, [])
    assert passthrough["measured"] == "6 / 3 ms; the hop alone (bench/bare_proxy.py): 3.9 ms, 1.3x"
    assert (passthrough["value"], passthrough["verdict"]) == (2.0, "fail")  # judged on the gateway alone, as before
    assert "bare" not in decision["measured"]
    # a results file from before the hop was measured (bench/results/20261127T165920Z.json) is judged as it was
    old = json.loads((REPO / "bench/results/20261127T165920Z.json").read_text())
    judged = bars.gateway_bars(old["results"]["gatehouse"]["gateway"], [])[0]
    assert (judged["value"], judged["measured"]) == (1.718, "4.93 / 2.87 ms")


def test_not_measured_says_why() -> None:
    assert [b["reason"] for b in bars.gateway_bars(None, [])] == ["not run"] * 2
    failed = bars.gateway_bars({"reason": "RuntimeError: MCPGateway (default) exited with 2 before ready"}, [])
    assert {b["verdict"] for b in failed} == {None} and failed[0]["reason"].startswith("RuntimeError")
    keys = [b["key"] for b in bars.build_bars({"gateway": section()}, None, {"available": False, "reason": "x",
                                                                             "agents": 0}, [], ["A"])]
    assert keys.count("gateway_passthrough") == 1 and keys.index("gateway_passthrough") + 1 == keys.index("gateway_decision")


def test_only_gateway_runs_the_gatehouse_target_and_its_section() -> None:
    args = run.parse_args(["--only", "gateway", "--quick"])
    assert args.targets == ["gatehouse"] and args.operator_agents == 0
    assert run.sections_for(args) == {"gateway"}
    assert run.settings_from(args).gateway_iterations == 30
    assert run.settings_from(run.parse_args([])).gateway_iterations == 100
    assert "gateway" in run.sections_for(run.parse_args(["--quick"]))  # part of the quick run too


@pytest.mark.e2e
def test_only_gateway_with_tiny_counts(tmp_path: Path) -> None:
    from bench.gatehouse_adapter import availability

    if not availability().ok:
        pytest.skip(availability().reason)
    out = tmp_path / "results"
    cmd = [sys.executable, "-m", "bench.run", "--only", "gateway", "--gateway-iterations", "3", "--warmup", "1",
           "--hygiene-seconds", "0.1", "--out", str(out), "--work", str(tmp_path / "work"), "--no-plot"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads((out / "latest.json").read_text())
    gateway = report["results"]["gatehouse"]["gateway"]
    assert "reason" not in gateway, gateway
    assert gateway["errors"] == {}
    for key in ("direct_ms", "through_ms", "bare_ms", "gateway_decision_ms", "a2a_decision_ms"):
        assert gateway[key]["n"] == 3 and gateway[key]["p50"] > 0, key
    assert (gateway["ran_once"], gateway["ran_twice"]) == (8, 0)  # 4 held + 4 A2A deletes (warm-up included), once each
    assert gateway["passthrough_ratio"] == pytest.approx(gateway["through_ms"]["p50"] / gateway["direct_ms"]["p50"],
                                                         abs=0.01)
    assert gateway["bare_ratio"] == pytest.approx(gateway["bare_ms"]["p50"] / gateway["direct_ms"]["p50"], abs=0.01)
    judged = {b["key"]: b for b in report["bars"]}
    assert judged["gateway_passthrough"]["verdict"] in ("pass", "fail", "noisy")
    assert judged["gateway_decision"]["verdict"] in ("pass", "fail", "noisy")
    assert set(report["hygiene"]["sections"]) == {"gateway"}
    assert "gateway: an MCPGateway in front of the demo tools" in proc.stdout
