"""``make bench``: Gatehouse vs google-adk's own confirmation over its own ``to_a2a``, side by side in one run.

    python -m bench.run [--quick] [--targets gatehouse,gatehouse_auth,adk_durable,adk_memory] [--out bench/results] ...
    python -m bench.run --only operator [--operator-agents 500] --out /tmp/op   # just the operator rows (steps 1-5 skipped)

Order of a run (one demo-tools MCP server, with a journal, serves every target):

0. the library floors: a2a-sdk, google-adk and the MCP client alone, on this machine (``bench/floors.py``);
1. start one long-lived server per target (each start is also a cold-start sample);
2. pause/resume latency, targets interleaved; model calls and tool runs per approved call;
3. loss at each concurrency level, one target after the other (order rotates per level);
4. stop them; extra cold starts (``--cold-starts``), interleaved;
5. per target, a fresh server holds N paused conversations (RSS), then N decisions (decisions/s);
6. operator rows (``bench/operator_hook.py``);
7. with ``--real-model``: pause and resume with a real model behind the gate, split into model time and the rest
   (``bench/real_model.py``; needs what ``make e2e-llm`` fetches and builds).

``gatehouse_auth`` is the Gatehouse runtime with authentication on (``--api-token-file``, the client sends a bearer
token): it runs every step beside ``gatehouse``, and the report's authentication overhead is the difference of
their p50s in step 2, interleaved in the same run.

Then a table, ``latest.json`` (+ a timestamped copy) and ``latest.png`` under ``--out``. A target that cannot
run (the Gatehouse runtime before it lands, or one that fails to start) gets its reason in every row.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from bench import floors, real_model, report, scenarios
from bench.gatehouse_adapter import availability, gatehouse_targets
from bench.operator_hook import not_run, operator_results
from bench.protocols import StepError
from bench.targets import Server, Target, adk_targets, running, tools_server

RESULTS = Path(__file__).resolve().parent / "results"
ALL = ("gatehouse", "gatehouse_auth", "adk_durable", "adk_memory")
GATEHOUSE = ("gatehouse", "gatehouse_auth")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="30 iterations, 200 paused, 100 conversations per loss level")
    p.add_argument("--iterations", type=int, help="latency iterations per target (default 200, quick 30)")
    p.add_argument("--warmup", type=int, help="unrecorded iterations first (default 5, quick 3)")
    p.add_argument("--paused", type=int, help="conversations held paused, then decided (default 1000, quick 200)")
    p.add_argument("--concurrency", type=int, default=20, help="concurrency of the paused/decisions scenario")
    p.add_argument("--loss-levels", default="20,40,60", help="concurrency levels of the loss scenario")
    p.add_argument("--loss-conversations", type=int, help="conversations per loss level (default 500, quick 100)")
    p.add_argument("--cold-starts", type=int, help="cold-start samples per target (default 3, quick 1)")
    p.add_argument("--settle", type=float, default=1.0, help="seconds a server idles before its RSS is read")
    p.add_argument("--targets", default=",".join(ALL), help=f"comma list of {', '.join(ALL)}")
    p.add_argument("--operator-agents", type=int, help="Agents in the operator rows (default 500, quick 50; 0 skips them)")
    p.add_argument("--out", type=Path, default=RESULTS, help="where latest.json / latest.png go")
    p.add_argument("--work", type=Path, help="keep servers' state and logs here (default: a temporary directory)")
    p.add_argument("--no-plot", action="store_true")
    p.add_argument("--real-model", action="store_true",
                   help="add the real-model row: the local model of `make e2e-llm` behind the gate (bench/real_model.py)")
    p.add_argument("--real-model-iterations", type=int, help="conversations in the real-model row (default 10, quick 5)")
    p.add_argument("--only", choices=("operator", "real-model"),
                   help="run only these rows: 'operator' starts no runtime server, 'real-model' only the real-model "
                        "row (the other rows say so)")
    args = p.parse_args(argv)
    wanted = [t.strip() for t in args.targets.split(",") if t.strip()]
    unknown = sorted(set(wanted) - set(ALL))
    if unknown:
        p.error(f"unknown targets {unknown}; choose from {', '.join(ALL)}")
    args.targets = wanted
    if args.operator_agents is None:
        args.operator_agents = 50 if args.quick else 500
    if args.only == "real-model":
        args.real_model, args.operator_agents = True, 0
    return args


def settings_from(args: argparse.Namespace) -> scenarios.Settings:
    q = args.quick
    return scenarios.Settings(
        iterations=args.iterations or (30 if q else 200),
        warmup=args.warmup if args.warmup is not None else (3 if q else 5),
        paused=args.paused or (200 if q else 1000),
        concurrency=args.concurrency,
        loss_levels=tuple(int(x) for x in args.loss_levels.split(",") if x.strip()),
        loss_conversations=args.loss_conversations or (100 if q else 500),
        cold_starts=args.cold_starts or (1 if q else 3),
        settle=args.settle,
    )


def choose_targets(wanted: list[str]) -> tuple[list[Target], dict[str, str]]:
    """The targets to run, and for each column either "" (runs) or why it does not."""
    reasons = {key: "" if key in wanted else "not run (--targets)" for key in ALL}
    targets: list[Target] = []
    if any(key in wanted for key in GATEHOUSE):
        avail = availability()
        for target in gatehouse_targets():
            if target.key not in wanted:
                continue
            if avail.ok:
                targets.append(target)
            else:
                reasons[target.key] = avail.reason
    targets += [t for t in adk_targets() if t.key in wanted]
    return targets, reasons


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", flush=True)


def _cold(server: Server, settle: float) -> dict[str, float]:
    sample = scenarios.cold_start(server, settle)
    log(f"  {server.target.label}: ready in {sample['ready_seconds']:.2f}s, RSS at rest {sample['rss_at_rest_mb']:.0f} MB")
    return sample


async def measure(targets: list[Target], reasons: dict[str, str], s: scenarios.Settings,
                  work: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The targets' results, and the library floors."""
    results: dict[str, dict[str, Any]] = {t.key: {"loss": {}} for t in targets}
    cold: dict[str, list[dict[str, float]]] = {t.key: [] for t in targets}
    with tools_server(work) as tools:
        log(f"demo-tools at {tools.url}")
        log(f"library floors: {s.iterations} iterations each (a2a-sdk, google-adk, MCP client alone)")
        try:
            floor = await floors.measure(tools, work, s.iterations, s.warmup)
            log(f"  pause floor {floor['pause_floor_ms']} ms, resume floor {floor['resume_floor_ms']} ms")
        except (RuntimeError, OSError, StepError) as exc:  # a reference point only: the targets still run
            floor = {"error": f"{type(exc).__name__}: {exc}"}
            log(f"  library floors not measured: {floor['error']}")
        with ExitStack() as stack:
            servers: list[Server] = []
            for t in targets:
                log(f"starting {t.label}")
                try:
                    server = stack.enter_context(running(t, work, tools.url, f"{t.key}-main"))
                except RuntimeError as exc:
                    reasons[t.key] = f"failed to start: {str(exc).splitlines()[0]}"
                    log(reasons[t.key])
                    continue
                cold[t.key].append(_cold(server, s.settle))
                servers.append(server)
            if servers:
                log(f"latency: {s.iterations} iterations (+{s.warmup} warm-up), interleaved")
                for key, value in (await scenarios.latency(servers, tools, s)).items():
                    results[key]["latency"] = value
                    log(f"  {key}: pause p50 {value['pause_ms']['p50']} ms, resume p50 {value['resume_ms']['p50']} ms, "
                        f"model calls/approval {value['model_calls_per_approved_call']}, errors {value['errors']}")
                for n, level in enumerate(s.loss_levels):
                    shift = n % len(servers)
                    for server in [*servers[shift:], *servers[:shift]]:
                        value = await scenarios.loss(server, tools, level, s.loss_conversations)
                        results[server.target.key]["loss"][str(level)] = value
                        log(f"  loss {server.target.key} @{level}: {value['lost']}/{value['conversations']} "
                            f"{value['kinds'] or ''} in {value['seconds']}s")
        live = [t for t in targets if not reasons[t.key]]
        for k in range(s.cold_starts - 1):
            shift = k % max(1, len(live))
            for t in [*live[shift:], *live[:shift]]:
                with running(t, work, tools.url, f"{t.key}-cold{k + 1}") as server:
                    cold[t.key].append(_cold(server, s.settle))
        for t in live:
            log(f"{t.label}: {s.paused} paused, then {s.paused} decisions at concurrency {s.concurrency}")
            value = await scenarios.paused_then_decided(t, work, tools, s.paused, s.concurrency, s.settle)
            results[t.key]["held"] = value
            log(f"  RSS {value['rss_at_rest_mb']} → {value['rss_paused_mb']} MB; {value['decisions']} decisions in "
                f"{value['decisions_seconds']}s ({value['decisions_per_second']}/s); errors "
                f"{value['pause_errors']} {value['decision_errors']}")
    for key, samples in cold.items():
        if samples:
            results[key]["cold_start"] = {
                "ready_seconds": round(statistics.median(x["ready_seconds"] for x in samples), 3),
                "rss_at_rest_mb": round(statistics.median(x["rss_at_rest_mb"] for x in samples), 1),
                "samples": samples,
            }
    return {k: v for k, v in results.items() if not reasons[k]}, floor


def machine() -> dict[str, Any]:
    info: dict[str, Any] = {"nproc": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
                            "loadavg_at_end": [round(x, 2) for x in os.getloadavg()]}
    try:
        import psutil

        info["memory_gib"] = round(psutil.virtual_memory().total / 2**30, 1)
    except ImportError:
        pass
    for dist in ("google-adk", "a2a-sdk", "gatehouse"):
        try:
            info[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            info[dist] = None
    return info


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    s = settings_from(args)
    if args.only:
        targets, reasons = [], dict.fromkeys(ALL, f"not run (--only {args.only})")
    else:
        targets, reasons = choose_targets(args.targets)
    for key, reason in reasons.items():
        if reason and key in args.targets:
            log(f"{key}: {reason}")
    started = datetime.now(UTC)
    load_at_start = [round(x, 2) for x in os.getloadavg()]
    log(f"load average {load_at_start[0]} on {os.cpu_count()} CPUs before the run (anything else running skews timings)")
    with ExitStack() as stack:
        if args.work:
            work = args.work.resolve()
            work.mkdir(parents=True, exist_ok=True)
        else:
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="gatehouse-bench-")))
        results, floor = asyncio.run(measure(targets, reasons, s, work)) if targets else ({}, {})
        real = real_model.not_run("not run (no --real-model)")
        if args.real_model:
            count = args.real_model_iterations or (5 if args.quick else 10)
            log(f"real model: {count} conversations (+1 warm-up) with the local model of `make e2e-llm`")
            real = asyncio.run(real_model.measure(work, count))
            log(f"  {real.get('reason') or 'done'}")
    if "gatehouse" in args.targets and args.operator_agents > 0:
        log(f"operator: {args.operator_agents} Agents against the emulated API")
        operator = operator_results(args.operator_agents)
    else:
        operator = not_run(args.operator_agents, "not run (--targets)" if "gatehouse" not in args.targets
                           else "not run (--operator-agents 0)")
    rows = [] if args.only == "real-model" else report.build_rows(results, reasons, operator, s.paused, s.loss_levels)
    if args.real_model:
        rows += real_model.rows(real)
    overhead = report.auth_overhead(results, reasons)
    stamp = started.strftime("%Y%m%dT%H%M%SZ")
    full = {
        "meta": {"started": started.isoformat(), "seconds": round((datetime.now(UTC) - started).total_seconds(), 1),
                 "mode": "quick" if args.quick else "full", "argv": sys.argv[1:], "loadavg_at_start": load_at_start,
                 "machine": machine()},
        "settings": {**s.__dict__, "loss_levels": list(s.loss_levels)},
        "available": reasons,
        "results": results,
        "operator": operator,
        "floors": floor,
        "auth_overhead": overhead,
        "real_model": real,
        "rows": rows,
    }
    report.print_table(rows, f"Gatehouse bench ({full['meta']['mode']}, {stamp})")
    report.print_auth_overhead(overhead)
    if "a2a" in floor:
        report.print_floors(floor, results.get("gatehouse"))
    path = report.write_json(full, args.out, stamp)
    log(f"wrote {path}")
    if not args.no_plot:
        png = report.write_plot(full, args.out)
        log(f"wrote {png}" if png else "no plot: matplotlib is not installed (pip install '.[bench]')")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
