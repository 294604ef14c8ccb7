"""Issue 40, bar 5: the Kubernetes rows on the real control plane, beside the emulator's (``bench/control_plane.py``,
``bench/kubectl_cp.py``, ``bench/operator_cp.py``; bars in ``bench/bars.py``). The bars, the comparison with the
emulator and the audit-log arithmetic from fabricated data; the rows when the control plane's binaries are missing;
the ``--only`` names; then the sections end to end with tiny counts on the real control plane (e2e)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench import bars, control_plane, operator_cp, run

REPO = Path(__file__).resolve().parents[2]
OPERATOR_USER = "system:serviceaccount:gatehouse-system:gh-gatehouse-operator"


def kubectl(p50: float = 20.0, p99: float = 900.0, paused: int = 10_000, mirrored: int = 10_000) -> dict[str, Any]:
    return {"patch": {"kubectl_to_tool_ms": {"p50": p50, "p90": p50 + 5}, "a2a_to_tool_ms": {"p50": 10.0}},
            "mirror": {"held": paused, "paused": paused, "mirrored": mirrored, "all_mirrored_seconds": 120.0,
                       "lag_ms": {"p50": 300.0, "p99": p99}}}


def operator(seconds: float = 45.0, per: float = 9.5, agents: int = 2000) -> dict[str, Any]:
    return {"available": True, "reason": "", "agents": agents, "agents_to_accepted_seconds": seconds,
            "api_requests_per_reconcile": per}


def by_key(judged: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {b["key"]: b for b in judged}


KINDS = ["Secret", "ServiceAccount", "Role", "RoleBinding", "ClusterRoleBinding", "PersistentVolumeClaim", "Deployment",
         "Service"]  # limit 8 + 2 = 10 requests per reconcile


def test_the_real_control_plane_has_the_emulators_kubernetes_bars_with_the_same_limits() -> None:
    judged = by_key(bars.control_plane_bars(kubectl(), operator(per=12.0), KINDS, []))
    assert list(judged) == ["kubectl_cp", "mirror_lag_cp", "operator_accepted_cp", "operator_requests_cp"]
    assert all(b["bar"].startswith("real control plane: ") for b in judged.values())
    assert (judged["kubectl_cp"]["value"], judged["kubectl_cp"]["verdict"]) == (20.0, "pass")
    assert (judged["mirror_lag_cp"]["value"], judged["mirror_lag_cp"]["verdict"]) == (900.0, "pass")
    assert (judged["operator_accepted_cp"]["value"], judged["operator_accepted_cp"]["verdict"]) == (45.0, "pass")
    assert (judged["operator_requests_cp"]["value"], judged["operator_requests_cp"]["verdict"]) == (12.0, "fail")
    assert judged["operator_requests_cp"]["limit"].endswith("= 10")
    assert [judged[k]["sections"] for k in judged] == [["kubectl_cp"], ["mirror_cp"], ["operator_cp"], ["operator_cp"]]
    failing = by_key(bars.control_plane_bars(kubectl(p50=100.0, p99=2000.0), operator(seconds=60.0, per=10.0), KINDS, []))
    assert [failing[k]["verdict"] for k in failing] == ["fail", "fail", "fail", "pass"]
    assert by_key(bars.control_plane_bars(kubectl(mirrored=9_999), None, KINDS, []))["mirror_lag_cp"]["verdict"] == "fail"


def test_each_section_on_the_real_control_plane_is_noisy_on_its_own() -> None:
    """Noisy emulator sections do not touch the real control plane's bars, and the reverse."""
    assert {b["verdict"] for b in bars.control_plane_bars(kubectl(), operator(), KINDS, ["kubectl", "mirror",
                                                                                         "operator"])} == {"pass"}
    judged = by_key(bars.control_plane_bars(kubectl(), operator(), KINDS, ["mirror_cp", "operator_cp"]))
    assert [judged[k]["verdict"] for k in judged] == ["pass", "noisy", "noisy", "noisy"]
    assert [judged[k]["reason"] for k in judged] == ["", "noisy: mirror_cp", "noisy: operator_cp", "noisy: operator_cp"]
    emulator = by_key(bars.kubectl_bars(kubectl(), ["kubectl_cp", "mirror_cp"]))
    assert {b["verdict"] for b in emulator.values()} == {"pass"}


def test_small_runs_say_where_the_bars_are_judged() -> None:
    judged = by_key(bars.control_plane_bars(kubectl(paused=1000, mirrored=1000), operator(seconds=5.0, agents=50),
                                            KINDS, []))
    assert "(the bar is at 10,000)" in judged["mirror_lag_cp"]["bar"] and judged["mirror_lag_cp"]["verdict"] == "pass"
    assert judged["operator_accepted_cp"]["verdict"] is None
    assert judged["operator_accepted_cp"]["reason"] == "50 Agents: judged at 2,000 (make bench)"


def test_without_the_control_plane_every_row_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    """No binaries: the rows are — with the reason the launcher gives (never a silent gap), and nothing is started."""
    from tests.support.cluster import binaries

    def missing() -> None:
        raise binaries.ClusterUnavailable("not built yet (etcd missing in .cache/cluster/x/bin): run `make cluster-bin`")

    monkeypatch.setattr(binaries, "built", missing)
    reason = control_plane.unavailable()
    assert reason == "no real control plane: not built yet (etcd missing in .cache/cluster/x/bin): run `make cluster-bin`"
    rows = operator_cp.operator_cp_results(2000, Path("/nonexistent"))
    assert rows["available"] is False and rows["reason"] == reason and rows["agents_to_accepted_seconds"] is None
    judged = bars.build_bars({"kubectl_cp": {"reason": reason}}, None, {"available": False, "reason": "x", "agents": 0},
                             [], KINDS, rows)
    real = [b for b in judged if b["key"].endswith("_cp")]
    assert [b["key"] for b in real] == ["kubectl_cp", "mirror_lag_cp", "operator_accepted_cp", "operator_requests_cp"]
    assert {b["verdict"] for b in real} == {None} and {b["reason"] for b in real} == {reason}
    unrun = [b for b in bars.build_bars({}, None, {"available": False, "reason": "x", "agents": 0}, [], KINDS)
             if b["key"].endswith("_cp")]
    assert {b["reason"] for b in unrun} == {"not run"}


def test_figures_more_than_twice_apart_are_marked() -> None:
    emulator = {"kubectl": kubectl(p50=13.5, p99=478.0), "operator": operator(seconds=27.6, per=10.0)}
    real = {"kubectl": kubectl(p50=30.0, p99=1100.0), "operator": operator(seconds=50.0, per=22.1)}
    rows = {r["figure"]: r for r in bars.emulator_differences(emulator, real)}
    assert rows["operator: API requests per reconcile"] == {"figure": "operator: API requests per reconcile",
                                                            "emulator": 10.0, "real": 22.1, "ratio": 2.21,
                                                            "differs": True}
    assert rows["kubectl: patch -> tool ran p50 (ms)"]["differs"] and rows["mirror: creation lag p99 (ms)"]["differs"]
    assert not rows["operator: Agents to Accepted (s)"]["differs"]  # 1.81x
    assert not rows["mirror: creation lag p50 (ms)"]["differs"]  # the same in both
    quicker = bars.emulator_differences({"kubectl": kubectl(p50=50.0)}, {"kubectl": kubectl(p50=20.0)})
    assert next(r for r in quicker if r["figure"].startswith("kubectl: patch -> tool ran p50"))["differs"]  # 0.4x
    missing = {r["figure"]: r for r in bars.emulator_differences(emulator, {"kubectl": {"reason": "x"}})}
    assert missing["kubectl: patch -> tool ran p50 (ms)"] == {"figure": "kubectl: patch -> tool ran p50 (ms)",
                                                              "emulator": 13.5, "real": None, "ratio": None,
                                                              "differs": False}


def audit(verb: str, resource: str, user: str = OPERATOR_USER, stage: str = "ResponseComplete",
          subresource: str = "") -> dict[str, Any]:
    ref = {"resource": resource, "namespace": "default", **({"subresource": subresource} if subresource else {})}
    return {"kind": "Event", "stage": stage, "verb": verb, "user": {"username": user}, "objectRef": ref,
            "requestURI": f"/apis/x/{resource}"}


def test_the_operators_requests_are_its_service_accounts_in_the_audit_log_watches_excluded() -> None:
    events = [audit("create", "deployments"), audit("create", "deployments", stage="RequestReceived"),
              audit("watch", "agents", stage="ResponseStarted"), audit("watch", "agents"),
              audit("patch", "agents", subresource="status"), audit("get", "secrets"), audit("get", "secrets"),
              audit("create", "pods", user="system:serviceaccount:kube-system:replicaset-controller")]
    mine = control_plane.by_user(events, OPERATOR_USER)
    assert len(mine) == 4
    assert control_plane.breakdown(mine) == {"get secrets": 2, "create deployments": 1, "patch agents/status": 1}
    assert control_plane.users(events) == {OPERATOR_USER: 4, "system:serviceaccount:kube-system:replicaset-controller": 1}


def test_the_audit_log_is_read_as_it_grows_whole_lines_only(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    log = control_plane.EventLog(path)
    assert log.read() == []  # not there yet
    first, second = json.dumps(audit("get", "a")), json.dumps(audit("get", "b"))
    path.write_text(first + "\n" + second[:10])
    assert [e["objectRef"]["resource"] for e in log.read()] == ["a"]
    with path.open("a") as f:
        f.write(second[10:] + "\n")
    assert [e["objectRef"]["resource"] for e in log.read()] == ["b"]
    assert log.read() == []


def test_only_names_for_the_real_control_plane() -> None:
    args = run.parse_args(["--only", "kubectl-cp", "--quick"])
    assert args.targets == ["gatehouse"] and args.operator_agents == 0
    assert run.sections_for(args) == {"kubectl_cp", "mirror_cp"}
    assert (run.settings_from(args).kubectl_iterations, run.settings_from(args).mirror_held) == (20, 1000)
    operator_only = run.parse_args(["--only", "operator-cp", "--quick"])
    assert run.sections_for(operator_only) == {"operator_cp"} and operator_only.operator_agents == 50
    both = run.parse_args(["--only", "kubernetes"])
    assert both.targets == ["gatehouse"] and both.operator_agents == 2000
    assert run.sections_for(both) == {"kubectl", "mirror", "kubectl_cp", "mirror_cp", "operator", "operator_cp"}
    full = run.sections_for(run.parse_args([]))
    assert {"kubectl_cp", "mirror_cp", "operator_cp", "kubectl", "operator"} <= full
    assert not {"kubectl_cp", "mirror_cp", "operator_cp"} & run.sections_for(run.parse_args(["--no-control-plane"]))
    assert set(run.KUBECTL_CP) | {"operator_cp"} <= set(run.SECTIONS)  # each has its own hygiene sample


@pytest.mark.e2e
@pytest.mark.bench_cp
def test_only_kubernetes_with_tiny_counts_on_both(tmp_path: Path) -> None:
    """The emulator's and the real control plane's sections in one run, tiny counts: every figure measured on both,
    side by side, the real control plane's bars judged (pass, fail or noisy: never timings here)."""
    from bench.gatehouse_adapter import availability

    if not availability().ok:
        pytest.skip(availability().reason)
    if control_plane.unavailable():
        pytest.skip(control_plane.unavailable())
    out = tmp_path / "results"
    cmd = [sys.executable, "-m", "bench.run", "--only", "kubernetes", "--kubectl-iterations", "2", "--warmup", "0",
           "--mirror-held", "5", "--operator-agents", "3", "--hygiene-seconds", "0.1", "--out", str(out), "--no-plot"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads((out / "latest.json").read_text())
    real = report["results"]["gatehouse"]["kubectl_cp"]
    assert "reason" not in real, real
    assert real["patch"]["errors"] == {} and real["patch"]["kubectl_to_tool_ms"]["n"] == 2
    assert real["voter"]["username"] == "alice" and "sre" in real["voter"]["groups"]
    mirror = real["mirror"]
    assert (mirror["paused"], mirror["mirrored"], mirror["missing"]) == (5, 5, 0)
    assert mirror["api_requests"]["create toolapprovals"] == 5  # the runtime's own, from the audit log
    op = report["operator_cp"]
    assert op["available"] and op["agents"] == 3 and op["agents_to_accepted_seconds"] > 0
    assert op["api_requests_applied_by_verb"]["create deployments"] == 3
    assert op["pods"] == {"Pending": 3}  # the real controllers made them; the cordoned node runs none
    judged = {b["key"]: b for b in report["bars"]}
    for key in ("kubectl_cp", "mirror_lag_cp", "operator_requests_cp"):
        assert judged[key]["verdict"] in ("pass", "fail", "noisy"), judged[key]
    compared = {r["figure"]: r for r in report["control_plane_vs_emulator"]}
    assert all(compared[f]["emulator"] is not None and compared[f]["real"] is not None for f in (
        "operator: Agents to Accepted (s)", "kubectl: patch -> tool ran p50 (ms)", "mirror: creation lag p99 (ms)"))
    assert {"kubectl_cp", "mirror_cp", "operator_cp"} <= set(report["hygiene"]["sections"])
    assert "on the real control plane" in proc.stdout and "more than 2x apart" in proc.stdout
