"""Turn a run's results into rows (metric, Gatehouse (default), Gatehouse local mode, ADK durable, ADK in-memory, ratio,
target, pass/fail), rich tables (the rows, the library floors, the bars of ``bench/bars.py``, the backlog, the
hygiene samples), ``bench/results/latest.json`` (+ a timestamped copy), ``bench/results/latest.png`` and
``bench/results/latest-backlog.png``.

The targets are judged on the Gatehouse (default) column, the product as configured by default (authentication
on, audit written, redaction on); the ratio is Gatehouse (default) / ADK durable. One bar compares the two Gatehouse
columns instead: authentication's overhead (:func:`auth_overhead`), Gatehouse (default)'s pause and resume p50 minus
Gatehouse local mode's, both from the same run's interleaved latency scenario, at most 0.5 ms each. A row or bar
measured in a section the hygiene sample found noisy (``bench/hygiene.py``) says ``noisy`` instead of pass or fail.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import bars

__all__ = ["AUTH_BAR_MS", "COLUMNS", "auth_overhead", "auth_overhead_line", "build_rows", "print_auth_overhead",
           "print_backlog", "print_bars", "print_floors", "print_hygiene", "print_kubectl", "print_table", "write_backlog_plot",
           "write_json", "write_plot"]

COLUMNS = ("gatehouse", "gatehouse_local", "adk_durable", "adk_memory")
LABELS = {"gatehouse": "Gatehouse (default)", "gatehouse_local": "Gatehouse local mode", "adk_durable": "ADK durable",
          "adk_memory": "ADK in-memory"}
FULL_HELD = 1000
AUTH_BAR_MS = 0.5  # authentication adds at most this to pause and to resume p50
AUTH_TARGET = f"<= {AUTH_BAR_MS} ms (default - local mode, same run)"
VERDICT_STYLE = {"pass": "green", "fail": "red", "noisy": "yellow"}


@dataclass(frozen=True)
class Metric:
    name: str
    get: Callable[[dict[str, Any]], float | None]
    target: str = "—"
    passes: Callable[[float, float | None], bool] | None = None  # (gatehouse value, ratio) -> pass
    ratio: bool = True
    sections: tuple[str, ...] = ()  # where it is measured: a noisy one makes the verdict "noisy"


def _path(*keys: Any) -> Callable[[dict[str, Any]], float | None]:
    def get(result: dict[str, Any]) -> float | None:
        value: Any = result
        for key in keys:
            if not isinstance(value, dict) or value.get(key) is None:
                return None
            value = value[key]
        return value if isinstance(value, int | float) else None

    return get


def _ratio_ok(value: float, ratio: float | None) -> bool:
    return ratio is not None and ratio <= 0.25


def metrics(held: int, levels: tuple[int, ...]) -> list[Metric]:
    full = held >= FULL_HELD
    lat, hld = ("latency",), ("held",)
    out = [
        Metric("pause p50 (ms)", _path("latency", "pause_ms", "p50"), "ratio <= 0.25 (bar 1: see Bars)", _ratio_ok,
               sections=lat),
        Metric("pause p99 (ms)", _path("latency", "pause_ms", "p99")),
        Metric("resume p50 (ms)", _path("latency", "resume_ms", "p50"), "ratio <= 0.25 (bar 1: see Bars)", _ratio_ok,
               sections=lat),
        Metric("resume p99 (ms)", _path("latency", "resume_ms", "p99")),
        Metric("model calls per approved call", _path("latency", "model_calls_per_approved_call"), "2",
               lambda v, r: v == 2),
        Metric("tool runs per approval", _path("latency", "tool_runs_per_approval"), "1", lambda v, r: v == 1),
        Metric(f"RSS with {held:,} paused (MB)", _path("held", "rss_paused_mb"),
               "< 200 MB" if full else f"(< 200 MB at {FULL_HELD:,})", (lambda v, r: v < 200) if full else None,
               sections=hld),
        Metric(f"{held:,} decisions (s)", _path("held", "decisions_seconds")),
        Metric("decisions/s", _path("held", "decisions_per_second"), "(median of rounds; bar 2: see Bars)"),
    ]
    out += [
        Metric(f"lost at {level} concurrent (%)", _path("loss", str(level), "lost_percent"),
               "0" if level == 60 else "—", (lambda v, r: v == 0) if level == 60 else None, ratio=False)
        for level in levels
    ]
    out += [
        Metric("cold start to ready (s)", _path("cold_start", "ready_seconds")),
        Metric("RSS at rest (MB)", _path("cold_start", "rss_at_rest_mb")),
        Metric("restart to first pause (s)", _path("restart", "first_pause_seconds"), "(bar 5: see Bars)"),
    ]
    return out


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return round(a / b, 3)


def _minus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else round(a - b, 2)


def auth_overhead(results: dict[str, dict[str, Any]], available: dict[str, str],
                  noisy: Sequence[str] = ()) -> dict[str, Any]:
    """What authentication adds to pause and resume p50: ``gatehouse`` (authentication on, the default) -
    ``gatehouse_local`` (local mode), both measured in the same run's interleaved latency scenario. ``pass``: both
    differences at most :data:`AUTH_BAR_MS` (None when either is missing, ``reason`` then says why, or when the
    latency section was noisy, ``noisy`` then says so)."""
    reason = next((f"{key}: {available[key]}" for key in ("gatehouse", "gatehouse_local") if available.get(key)), "")
    auth, local = results.get("gatehouse", {}), results.get("gatehouse_local", {})
    pause = _minus(_path("latency", "pause_ms", "p50")(auth), _path("latency", "pause_ms", "p50")(local))
    resume = _minus(_path("latency", "resume_ms", "p50")(auth), _path("latency", "resume_ms", "p50")(local))
    verdict: bool | None = None
    is_noisy = "latency" in noisy
    if pause is not None and resume is not None:
        verdict = None if is_noisy else (pause <= AUTH_BAR_MS and resume <= AUTH_BAR_MS)
    elif not reason:
        reason = "no pause/resume p50 for both Gatehouse targets"
    return {"pause_p50_ms": pause, "resume_p50_ms": resume, "bar_ms": AUTH_BAR_MS, "pass": verdict,
            "noisy": is_noisy and pause is not None and resume is not None, "reason": reason}


def auth_overhead_line(overhead: dict[str, Any]) -> str:
    """``authentication overhead: pause p50 +X ms, resume p50 +Y ms (gatehouse - gatehouse_local, same run), bar ≤
    0.5 ms: PASS``."""
    bar = f"bar ≤ {overhead['bar_ms']} ms"
    if overhead.get("noisy"):
        verdict = "noisy (not judged)"
    elif overhead["pass"] is None:
        return f"authentication overhead: not measured ({overhead['reason']}), {bar}"
    else:
        verdict = "PASS" if overhead["pass"] else "FAIL"
    return (f"authentication overhead: pause p50 {overhead['pause_p50_ms']:+.2f} ms, resume p50 "
            f"{overhead['resume_p50_ms']:+.2f} ms (gatehouse - gatehouse_local, same run), {bar}: {verdict}")


def _auth_rows(overhead: dict[str, Any], available: dict[str, str]) -> list[dict[str, Any]]:
    """The bar as table rows: the difference in the Gatehouse (default) column, judged on its own."""
    rows = []
    for phase in ("pause", "resume"):
        value = overhead[f"{phase}_p50_ms"]
        verdict = None if value is None else "noisy" if overhead.get("noisy") else (
            "pass" if value <= AUTH_BAR_MS else "fail")
        rows.append({"metric": f"auth overhead: {phase} p50 (ms)", "gatehouse": available.get("gatehouse") or value,
                     "gatehouse_local": available.get("gatehouse_local") or None, "adk_durable": None,
                     "adk_memory": None, "ratio": None, "target": AUTH_TARGET, "pass": verdict})
    return rows


def build_rows(results: dict[str, dict[str, Any]], available: dict[str, str], operator: dict[str, Any],
               held: int, levels: tuple[int, ...], noisy: Sequence[str] = (),
               kinds: list[str] | None = None) -> list[dict[str, Any]]:
    """One dict per metric. A target that did not run has its reason (a string) instead of a value. The
    authentication overhead's rows follow the latency rows; the operator rows are judged by bar 6
    (:func:`bench.bars.operator_bars`)."""
    rows = []
    for metric in metrics(held, levels):
        values: dict[str, Any] = {}
        for col in COLUMNS:
            values[col] = available[col] or metric.get(results.get(col, {}))
        gh = values["gatehouse"] if isinstance(values["gatehouse"], int | float) else None
        adk = values["adk_durable"] if isinstance(values["adk_durable"], int | float) else None
        ratio = _ratio(gh, adk) if metric.ratio else None
        verdict = None
        if metric.passes is not None and gh is not None:
            verdict = "pass" if metric.passes(gh, ratio) else "fail"
            if any(section in noisy for section in metric.sections):
                verdict = "noisy"
        rows.append({"metric": metric.name, **values, "ratio": ratio, "target": metric.target, "pass": verdict})
        if metric.name == "resume p99 (ms)":
            rows += _auth_rows(auth_overhead(results, available, noisy), available)
    judged = bars.operator_bars(operator, bars.child_kinds() if kinds is None else kinds, list(noisy))
    for bar in judged:
        value = bar["value"] if operator.get("available") else operator.get("reason")
        if bar["key"] == "operator_noop_writes" and isinstance(value, float) and value.is_integer():
            value = int(value)
        rows.append({"metric": bar["bar"], "gatehouse": value, "gatehouse_local": None, "adk_durable": None,
                     "adk_memory": None, "ratio": None, "target": bar["limit"], "pass": bar["verdict"]})
    return rows


def _cell(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:,.3f}".rstrip("0").rstrip(".") if abs(value) < 10 else f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def print_table(rows: list[dict[str, Any]], title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for header in ("metric", *(LABELS[c] for c in COLUMNS), "ratio GH/ADK", "target", "pass/fail"):
        table.add_column(header, overflow="fold")
    seen_reasons: set[str] = set()
    for row in rows:
        cells = []
        for col in ("metric", *COLUMNS, "ratio", "target", "pass"):
            value = row[col]
            if isinstance(value, str) and col in COLUMNS:  # a reason: say it once, then abbreviate
                value = value if value not in seen_reasons else "n/a"
                seen_reasons.add(row[col])
            cells.append(_cell(value))
        style = VERDICT_STYLE.get(row["pass"] or "", "")
        table.add_row(*cells, style=style)
    Console(width=170).print(table)


def print_auth_overhead(overhead: dict[str, Any]) -> None:
    """The bar's one line, under the table (green when it passes, red when it fails)."""
    from rich.console import Console

    style = "yellow" if overhead.get("noisy") else {True: "green", False: "red"}.get(overhead["pass"], "")
    Console(width=170).print(auth_overhead_line(overhead), style=style, highlight=False)


def print_floors(floors: dict[str, Any], gatehouse: dict[str, Any] | None) -> None:
    """The libraries alone on this machine (``bench/floors.py``): composed into pauses and resumes (the floors the
    bars use) and each alone in a tight loop (the best case, when measured); and how far above them Gatehouse is."""
    from rich.console import Console
    from rich.table import Table

    tight = floors.get("tight") or {}

    def alone(part: str, key: str) -> str:
        return _cell(_path(part, key)(tight))

    a2a, adk, mcp = floors["a2a"], floors["adk"], floors["mcp"]
    table = Table(title="Library floors on this machine (nothing of Gatehouse: no durability, no gate): composed into "
                        "pauses and resumes, and each library alone in a tight loop")
    for header in ("part", "pause (ms p50)", "resume (ms p50)", "CPU per request (ms)",
                   "alone: pause", "alone: resume", "alone: CPU"):
        table.add_column(header)
    table.add_row("a2a-sdk JSON-RPC over HTTP, executor answers at once", _cell(a2a["pause_ms"]), _cell(a2a["reply_ms"]),
                  f"{_cell(a2a['server_cpu_ms_per_request'])} (server)",
                  alone("a2a", "pause_ms"), alone("a2a", "reply_ms"), alone("a2a", "server_cpu_ms_per_request"))
    table.add_row("google-adk turn with its own confirmation, in memory", _cell(adk["pause_turn_ms"]),
                  _cell(adk["resume_turn_ms"]), "", alone("adk", "pause_turn_ms"), alone("adk", "resume_turn_ms"), "")
    table.add_row("MCP tools/call over streamable HTTP", "", _cell(mcp["call_ms"]),
                  f"{_cell(mcp['client_cpu_ms_per_call'])} (client)", "", alone("mcp", "call_ms"),
                  alone("mcp", "client_cpu_ms_per_call"))
    table.add_row("floor (sum)", _cell(floors["pause_floor_ms"]), _cell(floors["resume_floor_ms"]), "",
                  _cell(tight.get("pause_floor_ms")), _cell(tight.get("resume_floor_ms")), "", style="bold")
    rounds = floors.get("decisions_per_second_ceiling_rounds") or []
    table.add_row("decisions/s one process could reach on the libraries' CPU alone"
                  + (f" (median of {len(rounds)} rounds)" if len(rounds) > 1 else ""),
                  "", _cell(floors["decisions_per_second_ceiling"]), "", "",
                  _cell(tight.get("decisions_per_second_ceiling")), "", style="bold")
    in_rounds = floors.get("gatehouse")
    latency = in_rounds or (gatehouse or {}).get("latency")
    if latency:
        pause, resume = _path("pause_ms", "p50")(latency), _path("resume_ms", "p50")(latency)
        table.add_row("Gatehouse (default)" + (", in the floors' rounds" if in_rounds else ", for comparison"),
                      _cell(pause), _cell(resume), "")
        table.add_row("Gatehouse above the floor", _cell(_difference(pause, floors["pause_floor_ms"])),
                      _cell(_difference(resume, floors["resume_floor_ms"])), "",
                      _cell(_difference(pause, tight.get("pause_floor_ms"))),
                      _cell(_difference(resume, tight.get("resume_floor_ms"))), "")
    Console(width=200).print(table)


def print_bars(judged: list[dict[str, Any]], title: str) -> None:
    """The bars of ``bench/bars.py``: each with what it compares, its value (a ratio or a difference), its limit and
    its verdict (pass, fail, noisy, or — with the reason when not measured)."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for header in ("bar", "measured", "value", "limit", "verdict"):
        table.add_column(header, overflow="fold")
    for bar in judged:
        verdict = bar["verdict"] or f"— ({bar['reason']})"
        if bar["verdict"] == "noisy":
            verdict = f"noisy ({bar['reason'].removeprefix('noisy: ')})"
        table.add_row(bar["bar"], bar["measured"] or "", _cell(bar["value"]), bar["limit"], verdict,
                      style=VERDICT_STYLE.get(bar["verdict"] or "", ""))
    Console(width=170).print(table)


def print_differences(compared: list[dict[str, Any]]) -> None:
    """The Kubernetes figures on the emulator and on the real control plane side by side (``bars.emulator_differences``),
    each that differs by more than 2x marked."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Kubernetes rows: the emulated API against the real control plane (same counts, same run)")
    for header in ("figure", "emulator", "real control plane", "real / emulator", "more than 2x apart"):
        table.add_column(header, overflow="fold")
    for row in compared:
        table.add_row(row["figure"], _cell(row["emulator"]), _cell(row["real"]), _cell(row["ratio"]),
                      "yes" if row["differs"] else "", style="yellow" if row["differs"] else "")
    Console(width=170).print(table)


def print_backlog(backlog: dict[str, Any]) -> None:
    """One Gatehouse (default) runtime holding a growing backlog: each size's figures (``scenarios.backlog``)."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Backlog: a Gatehouse (default) runtime per size holding N paused conversations, probed in turn")
    for header in ("paused", "created/s", "RSS (MB)", "pause p50 (ms)", "resume p50 (ms)", "GET /approvals p50 (ms)",
                   "decisions/s", "errors", "machine"):
        table.add_column(header)
    for step in backlog.get("steps") or []:
        table.add_row(_cell(step["backlog"]), _cell(step["fill_per_second"]), _cell(step["rss_mb"]),
                      _cell(step["pause_ms"]["p50"]), _cell(step["resume_ms"]["p50"]), _cell(step["listing_ms"]["p50"]),
                      _cell(step["decisions_per_second"]), _cell(sum(step["errors"].values()) or 0),
                      step["hygiene"]["verdict"])
    Console(width=170).print(table)


def print_kubectl(kubectl: dict[str, Any],
                  title: str = "kubectl: Gatehouse (default) with the ToolApproval mirror, over the emulated Kubernetes API",
                  ) -> None:
    """The kubectl section (``bench/kubectl_path.py``, or ``bench/kubectl_cp.py`` on the real control plane): a kubectl
    vote and an A2A decision to the tool having run on the runtime with the ToolApproval mirror on (with nothing held,
    then with the mirror's M held), and the mirror's creation lag."""
    from rich.console import Console
    from rich.table import Table

    console = Console(width=170)
    table = Table(title=title)
    for header in ("held", "kubectl vote → tool ran p50 / p90 (ms)", "A2A decision → tool ran p50 / p90 (ms)",
                   "PATCH round trip p50 (ms)", "PATCH → status Approved p50 (ms)", "pause → Pending p50 (ms)", "errors"):
        table.add_column(header)
    mirror = kubectl.get("mirror") or {}
    for held, key in ((0, "patch"), (mirror.get("paused", kubectl.get("held", 0)), "patch_at_held")):
        part = kubectl.get(key) or {}
        if not part:
            continue
        k, a = part["kubectl_to_tool_ms"], part["a2a_to_tool_ms"]
        table.add_row(_cell(held), f"{_cell(k['p50'])} / {_cell(k['p90'])}", f"{_cell(a['p50'])} / {_cell(a['p90'])}",
                      _cell(part["patch_roundtrip_ms"]["p50"]), _cell(part["patch_to_approved_status_ms"]["p50"]),
                      _cell(part["pause_to_pending_ms"]["p50"]), _cell(sum(part["errors"].values()) or 0))
    console.print(table)
    if mirror:
        lag = mirror["lag_ms"]
        console.print(f"mirror: {mirror['paused']:,} paused ({mirror['fill_per_second']}/s, {mirror['concurrency']} at a "
                      f"time), {mirror['mirrored']:,} ToolApprovals created ({mirror['missing']:,} missing), creation lag "
                      f"p50 {_cell(lag['p50'])} ms, p99 {_cell(lag['p99'])} ms, max {_cell(lag['max'])} ms; all created "
                      f"{_cell(mirror['all_mirrored_seconds'])} s after the first pause ({mirror['mirrored_per_second']}/s), "
                      f"{mirror['missing_when_last_paused']:,} still to create when the last pause was answered",
                      highlight=False)
        steps = mirror.get("steps") or {}
        if steps:
            console.print("mirror, per ToolApproval (p50): " + "; ".join(
                f"{phase.replace('_', ' ')}: created → Pending {_cell(v['created_to_pending_ms'])} ms, Pending → next "
                f"created {_cell(v['pending_to_next_created_ms'])} ms" for phase, v in steps.items())
                + f"; cores while pausing {mirror['cores_while_pausing']}, after {mirror['cores_after']}",
                highlight=False)


def print_hygiene(hygiene: dict[str, Any]) -> None:
    """One line per sampled section: how busy the rest of the machine was, and the verdict; the quiet-run hint when
    any was noisy."""
    from rich.console import Console

    console = Console(width=170, highlight=False)
    parts = []
    for name, sample in hygiene["sections"].items():
        if sample["verdict"] == "unknown":
            parts.append(f"{name} not sampled")
        else:
            parts.append(f"{name} {sample['others_cores']:.2f}" + (" NOISY" if sample["verdict"] == "noisy" else ""))
    console.print(f"machine before each section (cores used by other processes; noisy above "
                  f"{hygiene['threshold_cores']}): " + ("; ".join(parts) or "not sampled"))
    if hygiene["noisy"]:
        console.print(f"noisy sections, not judged: {', '.join(hygiene['noisy'])}; {hygiene['quiet_run']}",
                      style="yellow")


def _difference(value: float | None, floor: float | None) -> float | None:
    return None if value is None or floor is None else round(value - floor, 2)


def write_json(report: dict[str, Any], out_dir: Path, stamp: str) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    latest = out_dir / "latest.json"
    tmp = out_dir / "latest.json.tmp"
    tmp.write_text(json.dumps(report, indent=2, sort_keys=False) + "\n")
    tmp.replace(latest)
    shutil.copyfile(latest, out_dir / f"{stamp}.json")
    return latest


def write_plot(report: dict[str, Any], out_dir: Path) -> list[Path]:
    """``latest.png``: latency, decisions/s, memory and loss per target; ``latest-backlog.png`` when the backlog ran
    (:func:`write_backlog_plot`). Empty if matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    results = report["results"]
    cols = [c for c in COLUMNS if c in results]
    labels = [LABELS[c] for c in cols]
    fig, axes = plt.subplots(2, 2, figsize=(12, 8))
    ax = axes[0][0]
    series = [("pause p50", "pause_ms", "p50"), ("pause p99", "pause_ms", "p99"),
              ("resume p50", "resume_ms", "p50"), ("resume p99", "resume_ms", "p99")]
    width = 0.8 / len(series)
    for j, (name, key, q) in enumerate(series):
        values = [_path("latency", key, q)(results[c]) or 0 for c in cols]
        ax.bar([i + j * width for i in range(len(cols))], values, width, label=name)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(cols))], labels)
    ax.set_ylabel("ms")
    ax.set_title("pause / resume latency (lower is better)")
    ax.legend(fontsize=8)
    ax = axes[0][1]
    ax.bar(labels, [_path("held", "decisions_per_second")(results[c]) or 0 for c in cols], color="tab:green")
    ax.set_title(f"decisions/s over HTTP, concurrency {report['settings']['concurrency']} (higher is better)")
    ax = axes[1][0]
    rest = [_path("held", "rss_at_rest_mb")(results[c]) or 0 for c in cols]
    held = [_path("held", "rss_paused_mb")(results[c]) or 0 for c in cols]
    ax.bar([i - 0.2 for i in range(len(cols))], rest, 0.4, label="at rest")
    ax.bar([i + 0.2 for i in range(len(cols))], held, 0.4, label=f"{report['settings']['paused']:,} paused")
    ax.set_xticks(range(len(cols)), labels)
    ax.set_ylabel("MB RSS")
    ax.set_title("memory (lower is better)")
    ax.axhline(200, color="grey", linestyle="--", linewidth=0.8)
    ax.legend(fontsize=8)
    ax = axes[1][1]
    levels = report["settings"]["loss_levels"]
    for c in cols:
        ax.plot(levels, [_path("loss", str(level), "lost_percent")(results[c]) or 0 for level in levels],
                marker="o", label=LABELS[c])
    ax.set_xticks(levels)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("concurrent conversations")
    ax.set_ylabel("% lost")
    ax.set_title("lost conversations (lower is better)")
    ax.legend(fontsize=8)
    missing = [f"{LABELS[c]}: {reason}" for c, reason in report["available"].items() if reason]
    fig.suptitle("Gatehouse vs plain ADK confirmation over to_a2a" + ("\n" + "; ".join(missing) if missing else ""),
                 fontsize=10)
    fig.tight_layout()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "latest.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    backlog = write_backlog_plot(report, out_dir)
    return [path] if backlog is None else [path, backlog]


def write_backlog_plot(report: dict[str, Any], out_dir: Path) -> Path | None:
    """``latest-backlog.png``: pause and resume p50, decisions/s, RSS and ``GET /approvals`` p50 against the number
    of paused conversations one Gatehouse (default) runtime holds, each with its bar. None without a backlog."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = ((report["results"].get("gatehouse") or {}).get("backlog") or {}).get("steps") or []
    if not steps:
        return None
    sizes = [step["backlog"] for step in steps]
    fig, axes = plt.subplots(2, 2, figsize=(12, 8))

    def panel(ax: Any, title: str, ylabel: str, series: list[tuple[str, list[float | None]]],
              bar: float | None = None, bar_label: str = "") -> None:
        for label, values in series:
            ax.plot(sizes, [v if v is not None else float("nan") for v in values], marker="o", label=label)
        if bar is not None:
            ax.axhline(bar, color="grey", linestyle="--", linewidth=0.8, label=bar_label)
        ax.set_xscale("log")
        ax.set_xticks(sizes, [f"{n:,}" for n in sizes])
        ax.minorticks_off()
        ax.set_xlabel("paused conversations held by one runtime")
        ax.set_ylabel(ylabel)
        ax.set_ylim(bottom=0)
        ax.set_title(title)
        ax.legend(fontsize=8)

    pause = [step["pause_ms"]["p50"] for step in steps]
    resume = [step["resume_ms"]["p50"] for step in steps]
    panel(axes[0][0], "pause / resume p50 (bar: 1.2x the smallest backlog's)", "ms",
          [("pause p50", pause), ("resume p50", resume)])
    limits = [values[0] * bars.BACKLOG_LATENCY_RATIO for values in (pause, resume) if values[0] is not None]
    for limit in limits:
        axes[0][0].axhline(limit, color="grey", linestyle=":", linewidth=0.8)
    axes[0][0].set_ylim(0, max([*limits, *(v for v in pause + resume if v is not None), 1.0]) * 1.1)
    rates = [step["decisions_per_second"] for step in steps]
    panel(axes[0][1], f"decisions/s, concurrency {report['settings']['concurrency']}", "decisions/s",
          [("decisions/s", rates)], None if rates[0] is None else rates[0] * bars.BACKLOG_RATE_RATIO,
          f"{bars.BACKLOG_RATE_RATIO}x the smallest backlog's")
    panel(axes[1][0], "memory", "MB RSS", [("RSS", [step["rss_mb"] for step in steps])], bars.BACKLOG_RSS_MB,
          f"{bars.BACKLOG_RSS_MB:g} MB")
    panel(axes[1][1], "GET /approvals, first page (default limit)", "ms p50",
          [("GET /approvals p50", [step["listing_ms"]["p50"] for step in steps])], bars.LISTING_MS,
          f"{bars.LISTING_MS:g} ms")
    fig.suptitle(f"Gatehouse (default): cost against the backlog ({report['meta']['mode']} run)", fontsize=10)
    fig.tight_layout()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "latest-backlog.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
