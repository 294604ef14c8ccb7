"""``make bench``: Gatehouse vs google-adk's own confirmation over its own ``to_a2a``, side by side in one run.

    python -m bench.run [--quick] [--targets gatehouse,gatehouse_local,adk_durable,adk_memory] [--out bench/results] ...
    python -m bench.run --only operator [--operator-agents 2000] --out /tmp/op   # just the operator rows
    python -m bench.run --only backlog --quick                                    # just the backlog (bar 3)
    python -m bench.run --only held --quick                                       # floors + held decisions (bar 2)
    python -m bench.run --only kubectl --quick                                    # kubectl decisions, mirror lag
    python -m bench.run --only gateway --quick                                    # the MCP gateway's two ratios
    python -m bench.run --only kubernetes                                         # kubectl, mirror, operator: emulated and real

Order of a run (one demo-tools MCP server, with a journal, serves every target):

0. the library floors: a2a-sdk, google-adk and the MCP client alone, on this machine, in rounds, each round ending
   with as many pause+approve pairs on a ``gatehouse`` server of its own (``bench/floors.py``; bar 1 compares the
   two);
1. start one long-lived server per target (each start is also a cold-start sample);
2. pause/resume latency, targets interleaved; model calls and tool runs per approved call; then, ``gatehouse`` only,
   a decision to the tool having run over A2A and over REST, interleaved (bar 4's second half);
3. loss at each concurrency level, one target after the other (order rotates per level);
4. stop them; extra cold starts (``--cold-starts``), interleaved;
5. per target, a fresh server holds N paused conversations (RSS); then the N decisions in ``--rounds`` rounds, the
   targets taking turns (decisions/s: the median of the rounds); each ``gatehouse`` round right after a library
   ceiling round (bar 2: the median of the rounds' ratios);
6. ``gatehouse`` only: the backlog, one fresh server per size holding 100, 1,000 and 10,000 paused conversations,
   probed in turn (bar 3);
7. ``gatehouse`` only: restarts, start to the first pause served, against the import floor (bar 5);
8. ``gatehouse`` only: kubectl decisions, a ToolApproval patch to the tool having run over the emulated API, and the
   mirror's creation lag at 10,000 paused (``bench/kubectl_path.py``; bar 4's kubectl half); then the same on the real
   control plane, the chart installed and its operator running (``bench/kubectl_cp.py``; issue 40, bar 5);
9. ``gatehouse`` only: the MCP gateway, an ungated call through it against a direct one, and a REST decision on a
   held call to the client's result against an A2A decision, interleaved (``bench/gateway_path.py``; issue 38);
10. operator rows (``bench/operator_hook.py``; bar 6); then on the real control plane, one node cordoned
   (``bench/operator_cp.py``; issue 40, bar 5: the two runs' Kubernetes figures are printed side by side);
11. with ``--real-model``: pause and resume with a real model behind the gate, split into model time and the rest
   (``bench/real_model.py``; needs what ``make e2e-llm`` fetches and builds).

``gatehouse`` is the product as configured by default (authentication on, audit written, redaction on: see
``bench/gatehouse_adapter.py``); ``gatehouse_local`` is the same runtime in local mode (no credential), for
comparison: the report's authentication overhead is the difference of their p50s in step 2, interleaved in the same
run.

Before each section the bench samples the machine's CPU for a few seconds (``bench/hygiene.py``); a section where
other processes used more than a quarter of a core is ``noisy``, and its rows and bars (``bench/bars.py``) are
reported as such, without pass or fail.

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
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack, ExitStack
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from bench import bars, floors, gateway_path, hygiene, kubectl_cp, kubectl_path, real_model, report, scenarios
from bench.gatehouse_adapter import DEFAULT_CONFIGURATION, availability, gatehouse_targets
from bench.operator_cp import not_run as operator_cp_not_run
from bench.operator_cp import operator_cp_results
from bench.operator_hook import not_run, operator_results
from bench.protocols import StepError
from bench.targets import Server, Target, adk_targets, running, tools_server

RESULTS = Path(__file__).resolve().parent / "results"
LABELS_DEFAULT = "Gatehouse (default)"
ALL = ("gatehouse", "gatehouse_local", "adk_durable", "adk_memory")
GATEHOUSE = ("gatehouse", "gatehouse_local")
SECTIONS = ("floors", "latency", "decisions", "loss", "cold_start", "held", "backlog", "restart", "kubectl", "mirror",
            "kubectl_cp", "mirror_cp", "gateway", "operator", "operator_cp")
ONLY = ("operator", "real-model", "backlog", "restart", "kubectl", "held", "gateway", "kubectl-cp", "operator-cp",
        "kubernetes")
KUBECTL = ("kubectl", "mirror")  # what --only kubectl runs
KUBECTL_CP = ("kubectl_cp", "mirror_cp")  # --only kubectl-cp: the same on the real control plane (bench/kubectl_cp.py)
CONTROL_PLANE = (*KUBECTL_CP, "operator_cp")  # what --no-control-plane leaves out
CEILINGS = "decisions_per_second_ceiling_rounds"  # in the held result of the target the ceilings were beside
HELD_CEILING_WARMUP = 10  # unrecorded composed pairs before the held section's first ceiling round (a fresh server)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true",
                   help="30 iterations, 200 paused, 100 conversations per loss level, backlog 100,300,1000, 50 Agents")
    p.add_argument("--iterations", type=int, help="latency iterations per target (default 200, quick 30)")
    p.add_argument("--warmup", type=int, help="unrecorded iterations first (default 5, quick 3)")
    p.add_argument("--paused", type=int, help="conversations held paused, then decided (default 1000, quick 200)")
    p.add_argument("--concurrency", type=int, default=20, help="concurrency of the paused/decisions scenario")
    p.add_argument("--rounds", type=int,
                   help="rounds of bar 2's figures: the held decisions (the targets in turn) and the library floors' "
                        "iterations (the ceiling per round); each reported as the median of its rounds (default 5, "
                        "quick 4)")
    p.add_argument("--loss-levels", default="20,40,60", help="concurrency levels of the loss scenario")
    p.add_argument("--loss-conversations", type=int, help="conversations per loss level (default 500, quick 100)")
    p.add_argument("--cold-starts", type=int, help="cold-start samples per target, interleaved (default 7, quick 1)")
    p.add_argument("--settle", type=float, default=1.0, help="seconds a server idles before its RSS is read")
    p.add_argument("--targets", default=",".join(ALL), help=f"comma list of {', '.join(ALL)}")
    p.add_argument("--backlog", help="paused conversations one runtime holds, ascending (default 100,1000,10000; "
                                     "quick 100,300,1000; 0 skips the backlog)")
    p.add_argument("--backlog-probes", type=int, help="timed pauses, resumes and GET /approvals per backlog size "
                                                      "(default 100, quick 30)")
    p.add_argument("--backlog-decisions", type=int, help="decisions at --concurrency per backlog size (default 200, "
                                                         "quick 100)")
    p.add_argument("--restarts", type=int, help="restart and import-floor samples (default 3, quick 2; 0 skips them)")
    p.add_argument("--kubectl-iterations", type=int,
                   help="kubectl votes timed to the tool having run, each beside an A2A decision (default 50, quick 20; "
                        "0 skips the kubectl section)")
    p.add_argument("--mirror-held", type=int, help="paused conversations whose ToolApproval creation lag is measured "
                                                   "(default 10000, quick 1000; 0 skips it)")
    p.add_argument("--gateway-iterations", type=int,
                   help="MCP gateway: pass-through calls (each beside a direct one) and held-call REST decisions (each "
                        "beside an A2A decision) (default 100, quick 30; 0 skips the gateway section)")
    p.add_argument("--hygiene-seconds", type=float,
                   help="seconds of CPU sampling before each section (default 3, quick 2; 0: no sampling, nothing noisy)")
    p.add_argument("--noisy-cores", type=float, default=hygiene.NOISY_CORES,
                   help="other processes using more cores than this make a section noisy")
    p.add_argument("--operator-agents", type=int, help="Agents in the operator rows (default 2000, quick 50; 0 skips them)")
    p.add_argument("--no-control-plane", action="store_true",
                   help="leave out the Kubernetes rows on the real control plane (issue 40, bar 5: kubectl-cp, mirror-cp, "
                        "operator-cp; they run beside the emulator's with the same counts, and say why when the "
                        "control plane's binaries are not built: make cluster-bin)")
    p.add_argument("--out", type=Path, default=RESULTS, help="where latest.json / latest.png go")
    p.add_argument("--work", type=Path, help="keep servers' state and logs here (default: a temporary directory)")
    p.add_argument("--no-plot", action="store_true")
    p.add_argument("--real-model", action="store_true",
                   help="add the real-model row: the local model of `make e2e-llm` behind the gate (bench/real_model.py)")
    p.add_argument("--real-model-iterations", type=int, help="conversations in the real-model row (default 10, quick 5)")
    p.add_argument("--only", choices=ONLY,
                   help="run only these rows: 'operator' starts no runtime server, 'real-model' only the real-model "
                        "row, 'backlog', 'restart', 'kubectl' and 'gateway' only that section of the gatehouse target "
                        "(the other rows say so), 'held' the library floors and the held decisions of --targets (bar 2); "
                        "'kubectl-cp' and 'operator-cp' the kubectl (and mirror) and operator rows on the real control "
                        "plane, 'kubernetes' those and the emulator's, side by side (issue 40, bar 5)")
    args = p.parse_args(argv)
    wanted = [t.strip() for t in args.targets.split(",") if t.strip()]
    unknown = sorted(set(wanted) - set(ALL))
    if unknown:
        p.error(f"unknown targets {unknown}; choose from {', '.join(ALL)}")
    args.targets = wanted
    if args.operator_agents is None:
        args.operator_agents = 50 if args.quick else 2000
    if args.hygiene_seconds is None:
        args.hygiene_seconds = 2.0 if args.quick else 3.0
    if args.only == "real-model":
        args.real_model, args.operator_agents = True, 0
    if args.only in ("backlog", "restart", "kubectl", "gateway", "kubectl-cp"):
        args.targets, args.operator_agents = ["gatehouse"], 0
    if args.only == "kubernetes":
        args.targets = ["gatehouse"]
    if args.only == "held":  # every target of --targets: the rounds of bar 2 take turns between them
        args.operator_agents = 0
    return args


def sections_for(args: argparse.Namespace) -> set[str]:
    """The sections this run measures."""
    if args.only == "operator":
        return {"operator"} if args.operator_agents > 0 else set()
    if args.only in ("backlog", "restart", "gateway"):
        return {args.only}
    if args.only == "held":
        return {"floors", "held"}
    if args.only == "kubectl":
        return set(KUBECTL)
    if args.only == "kubectl-cp":
        return set(KUBECTL_CP)
    if args.only == "operator-cp":
        return {"operator_cp"} if args.operator_agents > 0 else set()
    if args.only == "real-model":
        return set()
    if args.only == "kubernetes":
        out = {*KUBECTL, *KUBECTL_CP} | ({"operator", "operator_cp"} if args.operator_agents > 0 else set())
    else:
        out = set(SECTIONS) - {"operator", "operator_cp"}
        if "gatehouse" in args.targets and args.operator_agents > 0:
            out |= {"operator", "operator_cp"}
    return out - set(CONTROL_PLANE) if args.no_control_plane else out


def settings_from(args: argparse.Namespace) -> scenarios.Settings:
    q = args.quick
    return scenarios.Settings(
        iterations=args.iterations or (30 if q else 200),
        warmup=args.warmup if args.warmup is not None else (3 if q else 5),
        paused=args.paused or (200 if q else 1000),
        concurrency=args.concurrency,
        rounds=args.rounds or (4 if q else 5),
        loss_levels=tuple(int(x) for x in args.loss_levels.split(",") if x.strip()),
        loss_conversations=args.loss_conversations or (100 if q else 500),
        cold_starts=args.cold_starts or (1 if q else 7),
        settle=args.settle,
        backlog=tuple(sorted(int(x) for x in (args.backlog or ("100,300,1000" if q else "100,1000,10000")).split(",")
                             if x.strip() and int(x) > 0)),
        backlog_probes=args.backlog_probes or (30 if q else 100),
        backlog_decisions=args.backlog_decisions or (100 if q else 200),
        restarts=args.restarts if args.restarts is not None else (2 if q else 3),
        kubectl_iterations=args.kubectl_iterations if args.kubectl_iterations is not None else (20 if q else 50),
        mirror_held=args.mirror_held if args.mirror_held is not None else (1000 if q else 10_000),
        gateway_iterations=args.gateway_iterations if args.gateway_iterations is not None else (30 if q else 100),
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


class Quiet:
    """The hygiene samples of a run: one before each section (``bench/hygiene.py``)."""

    def __init__(self, seconds: float, threshold: float) -> None:
        self.seconds, self.threshold = seconds, threshold
        self.samples: dict[str, dict[str, Any]] = {}

    def check(self, section: str) -> dict[str, Any]:
        """Sample the machine before ``section``; log the verdict (and how to get a quiet run when noisy)."""
        sample = hygiene.sample(self.seconds, self.threshold)
        self.samples[section] = sample
        if sample["verdict"] == "noisy":
            log(f"NOISY before {section}: other processes used {sample['others_cores']} cores (> {self.threshold}) "
                f"over {sample['seconds']}s, so its rows and bars are reported 'noisy', not judged; {hygiene.QUIET_HINT}")
        elif sample["verdict"] == "quiet":
            log(f"quiet before {section}: other processes used {sample['others_cores']} cores over {sample['seconds']}s")
        return sample

    def merge(self, section: str, parts: list[str]) -> None:
        """``section``'s verdict from its sub-samples (e.g. one before each backlog size): the busiest one."""
        samples = [self.samples[p] for p in parts if p in self.samples]
        if samples:
            self.samples[section] = max(samples, key=lambda x: x.get("others_cores") or 0.0)

    def noisy(self) -> list[str]:
        return hygiene.noisy_sections(self.samples, SECTIONS)

    def as_json(self) -> dict[str, Any]:
        return {"threshold_cores": self.threshold, "seconds": self.seconds, "noisy": self.noisy(),
                "quiet_run": hygiene.QUIET_HINT, "sections": self.samples}


async def measure(targets: list[Target], reasons: dict[str, str], s: scenarios.Settings, work: Path,
                  sections: set[str], quiet: Quiet) -> tuple[dict[str, Any], dict[str, Any]]:
    """The targets' results, and the library floors (``{}`` when not measured)."""
    results: dict[str, dict[str, Any]] = {t.key: {"loss": {}} for t in targets}
    cold: dict[str, list[dict[str, float]]] = {t.key: [] for t in targets}
    floor: dict[str, Any] = {}
    with tools_server(work) as tools:
        log(f"demo-tools at {tools.url}")
        if "floors" in sections:
            quiet.check("floors")
            share_target = next((t for t in targets if t.key == "gatehouse"), None)
            log(f"library floors: {s.iterations} iterations each of a2a-sdk, google-adk and the MCP client composed into "
                f"pause+resume pairs, and of each alone in a tight loop"
                + (f", in {s.rounds} rounds, each followed by as many {share_target.label} pause+approve pairs (bar 1)"
                   if share_target is not None else ""))
            try:
                with ExitStack() as stack:
                    ours, ours_error = None, ""
                    if share_target is not None:
                        try:  # without it the floors still stand (and bar 1 falls back to the latency section)
                            ours = scenarios.PairRounds(stack.enter_context(running(share_target, work, tools.url,
                                                                                    f"{share_target.key}-share")), tools)
                        except (RuntimeError, OSError, StepError) as exc:
                            ours_error = f"{type(exc).__name__}: {exc}"
                            log(f"  {share_target.label} for bar 1 did not start ({ours_error}); the floors alone")
                    floor = await floors.measure(tools, work, s.iterations, s.warmup, s.rounds, ours)
                if ours is not None:
                    floor["gatehouse"] = ours.results()
                elif ours_error:
                    floor["gatehouse_error"] = ours_error
                log(f"  pause floor {floor['pause_floor_ms']} ms, resume floor {floor['resume_floor_ms']} ms; ceiling "
                    f"{floor['decisions_per_second_ceiling']}/s (median of "
                    f"{', '.join(str(x) for x in floor['decisions_per_second_ceiling_rounds'])})"
                    + (f"; {share_target.label} in the same rounds: pause p50 {floor['gatehouse']['pause_ms']['p50']} ms, "
                       f"resume p50 {floor['gatehouse']['resume_ms']['p50']} ms, errors {floor['gatehouse']['errors']}"
                       if ours is not None else "")
                    + (f"; tight loops: pause floor {floor['tight']['pause_floor_ms']} ms, resume floor "
                       f"{floor['tight']['resume_floor_ms']} ms, ceiling {floor['tight']['decisions_per_second_ceiling']}/s"))
            except (RuntimeError, OSError, StepError) as exc:  # a reference point only: the targets still run
                floor = {"error": f"{type(exc).__name__}: {exc}"}
                log(f"  library floors not measured: {floor['error']}")
        if sections & {"latency", "loss"}:
            quiet.check("cold_start")
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
                if servers and "latency" in sections:
                    quiet.check("latency")
                    log(f"latency: {s.iterations} iterations (+{s.warmup} warm-up), interleaved")
                    for key, value in (await scenarios.latency(servers, tools, s)).items():
                        results[key]["latency"] = value
                        log(f"  {key}: pause p50 {value['pause_ms']['p50']} ms, resume p50 {value['resume_ms']['p50']} "
                            f"ms, model calls/approval {value['model_calls_per_approved_call']}, errors {value['errors']}")
                default_server = next((x for x in servers if x.target.key == "gatehouse"), None)
                if default_server is not None and "decisions" in sections:
                    quiet.check("decisions")
                    log(f"decisions: {s.iterations} iterations (+{s.warmup} warm-up), A2A and REST decision to the tool "
                        f"having run, interleaved")
                    value = await scenarios.decision_paths(default_server, tools, s.iterations, s.warmup)
                    results["gatehouse"]["decisions"] = value
                    log(f"  decision to tool ran p50: A2A {value['a2a_to_tool_ms']['p50']} ms, REST "
                        f"{value['rest_to_tool_ms']['p50']} ms; errors {value['errors'] or 0}")
                if servers and "loss" in sections:
                    quiet.check("loss")
                    for n, level in enumerate(s.loss_levels):
                        shift = n % len(servers)
                        for server in [*servers[shift:], *servers[:shift]]:
                            value = await scenarios.loss(server, tools, level, s.loss_conversations)
                            results[server.target.key]["loss"][str(level)] = value
                            log(f"  loss {server.target.key} @{level}: {value['lost']}/{value['conversations']} "
                                f"{value['kinds'] or ''} in {value['seconds']}s")
        live = [t for t in targets if not reasons[t.key]]
        if "cold_start" in sections and s.cold_starts > 1 and live:
            for k in range(s.cold_starts - 1):
                shift = k % len(live)
                for t in [*live[shift:], *live[:shift]]:
                    with running(t, work, tools.url, f"{t.key}-cold{k + 1}") as server:
                        cold[t.key].append(_cold(server, s.settle))
        if "held" in sections and live:
            quiet.check("held")
            log(f"held: a server per target holding {s.paused:,} paused, then {s.paused:,} decisions at concurrency "
                f"{s.concurrency} in {s.rounds} rounds, the targets in turn")
            async with AsyncExitStack() as held_stack:
                beside: Callable[[int], Awaitable[float]] | None = None
                if any(t.key == "gatehouse" for t in live):
                    try:  # without it the held rounds still stand (and bar 2 falls back to the floors' ceiling)
                        libs = await held_stack.enter_async_context(floors.libraries(tools, work, "a2a-floor-held"))
                        pairs = max(1, s.iterations // s.rounds)  # as many composed pairs as a floors round
                        log(f"  each gatehouse round beside a library ceiling round of {pairs} composed pairs "
                            f"(+{HELD_CEILING_WARMUP} warm-up before the first)")

                        async def ceiling_round(r: int, libs: floors.Libraries = libs, pairs: int = pairs) -> float:
                            return await libs.ceiling_round(pairs, HELD_CEILING_WARMUP if r == 0 else 0)

                        beside = ceiling_round
                    except (RuntimeError, OSError, StepError) as exc:
                        log(f"  the library ceiling beside the held rounds did not start ({type(exc).__name__}: {exc})")
                held = await scenarios.paused_then_decided(live, work, tools, s.paused, s.concurrency, s.rounds,
                                                           s.settle, ceiling=beside)
            for key, value in held.items():
                results[key]["held"] = value
                if value.get("reason"):
                    continue
                log(f"  {key}: RSS {value['rss_at_rest_mb']} → {value['rss_paused_mb']} MB; {value['decisions']} "
                    f"decisions in {value['decisions_seconds']}s, median {value['decisions_per_second']}/s of "
                    f"{', '.join(str(x) for x in value['decisions_per_second_rounds'])}; errors "
                    f"{value['pause_errors']} {value['decision_errors']}"
                    + (f"; library ceiling beside each round {', '.join(str(x) for x in value[CEILINGS])}/s"
                       if value.get(CEILINGS) else "")
                    + (f"; WARNING: {value['tool_not_run']} decided without the tool having run (the journal; see "
                       f"the server log under --work)" if value["tool_not_run"] else ""))
        default = next((t for t in live if t.key == "gatehouse"), None)
        if "backlog" in sections and default is not None and s.backlog:
            log(f"backlog: {default.label} runtimes holding {', '.join(f'{n:,}' for n in s.backlog)} paused "
                f"conversations, probed in turn; {s.backlog_probes} probes and {s.backlog_decisions} decisions each")
            try:
                results["gatehouse"]["backlog"] = await scenarios.backlog(
                    default, work, tools, s.backlog, s.backlog_probes, s.backlog_decisions, s.concurrency,
                    2 * s.concurrency, s.warmup, quiet.check)
            except (RuntimeError, OSError, StepError) as exc:
                results["gatehouse"]["backlog"] = {"reason": f"{type(exc).__name__}: {str(exc).splitlines()[0]}"}
                log(f"  backlog not measured: {results['gatehouse']['backlog']['reason']}")
            quiet.merge("backlog", [f"backlog {n:,}" for n in s.backlog])
        if "restart" in sections and default is not None and s.restarts > 0:
            quiet.check("restart")
            log(f"restart: {s.restarts} restarts of {default.label} to its first pause, against the import floor")
            try:
                value = await scenarios.restart(default, work, tools, s.restarts)
            except (RuntimeError, OSError, StepError) as exc:
                value = {"reason": f"{type(exc).__name__}: {str(exc).splitlines()[0]}"}
            results["gatehouse"]["restart"] = value
            log(f"  {value.get('reason') or ''}" if value.get("reason") else
                f"  start to first pause {value['first_pause_seconds']}s (ready {value['ready_seconds']}s), import floor "
                f"{value['import_floor_seconds']}s ({value['modules']} modules)")
        if "kubectl" in sections and default is not None and s.kubectl_iterations > 0:
            log(f"kubectl: {default.label} with the ToolApproval mirror on, against the emulated API: "
                f"{s.kubectl_iterations} kubectl votes (+{s.warmup} warm-up) to the tool having run, each beside an A2A "
                f"decision; then the creation lag of {s.mirror_held:,} ToolApprovals")
            held = s.mirror_held if "mirror" in sections else 0
            value = await kubectl_path.kubectl_results(default, work, tools, s.kubectl_iterations, s.warmup, held,
                                                       2 * s.concurrency, quiet.check)
            results["gatehouse"]["kubectl"] = value
            if value.get("reason"):
                log(f"  kubectl not measured: {value['reason']}")
        if "kubectl_cp" in sections and default is not None and s.kubectl_iterations > 0:
            log(f"kubectl (real control plane): {default.label} with the ToolApproval mirror on, against a real "
                f"kube-apiserver with the chart installed and its operator running: {s.kubectl_iterations} kubectl votes "
                f"(+{s.warmup} warm-up) to the tool having run, each beside an A2A decision; then the creation lag of "
                f"{s.mirror_held:,} ToolApprovals")
            held = s.mirror_held if "mirror_cp" in sections else 0
            value = await kubectl_cp.kubectl_cp_results(default, work, tools, s.kubectl_iterations, s.warmup, held,
                                                        2 * s.concurrency, quiet.check)
            results["gatehouse"]["kubectl_cp"] = value
            if value.get("reason"):
                log(f"  kubectl on the real control plane not measured: {value['reason']}")
        if "gateway" in sections and default is not None and s.gateway_iterations > 0:
            log(f"gateway: an MCPGateway in front of the demo tools; {s.gateway_iterations} ungated calls (+{s.warmup} "
                f"warm-up) each beside a direct one, and {s.gateway_iterations} held calls decided over REST each beside "
                f"an A2A decision on {default.label}, interleaved")
            value = await gateway_path.gateway_results(default, work, tools, s.gateway_iterations, s.warmup, quiet.check)
            results["gatehouse"]["gateway"] = value
            log(f"  {value['reason']}" if value.get("reason") else
                f"  ungated call p50: through {value['through_ms']['p50']} ms, direct {value['direct_ms']['p50']} ms "
                f"({value['passthrough_ratio']}x); decision to result p50: gateway {value['gateway_decision_ms']['p50']} "
                f"ms, A2A {value['a2a_decision_ms']['p50']} ms ({value['decision_ratio']}x); errors {value['errors'] or 0}")
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
    sections = sections_for(args)
    targets: list[Target]
    if args.only in ("operator", "real-model", "operator-cp"):
        targets, reasons = [], dict.fromkeys(ALL, f"not run (--only {args.only})")
    else:
        targets, reasons = choose_targets(args.targets)
        if args.only and args.only != "held":
            reasons = {k: v if k == "gatehouse" else f"not run (--only {args.only})" for k, v in reasons.items()}
    for key, reason in reasons.items():
        if reason and key in args.targets:
            log(f"{key}: {reason}")
    started = datetime.now(UTC)
    load_at_start = [round(x, 2) for x in os.getloadavg()]
    log(f"load average {load_at_start[0]} on {os.cpu_count()} CPUs before the run (anything else running skews timings)")
    log(f"'{LABELS_DEFAULT}' is {DEFAULT_CONFIGURATION}")
    quiet = Quiet(args.hygiene_seconds, args.noisy_cores)
    with ExitStack() as stack:
        if args.work:
            work = args.work.resolve()
            work.mkdir(parents=True, exist_ok=True)
        else:
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="gatehouse-bench-")))
        results, floor = asyncio.run(measure(targets, reasons, s, work, sections, quiet)) if targets else ({}, {})
        real = real_model.not_run("not run (no --real-model)")
        if args.real_model:
            count = args.real_model_iterations or (5 if args.quick else 10)
            log(f"real model: {count} conversations (+1 warm-up) with the local model of `make e2e-llm`")
            real = asyncio.run(real_model.measure(work, count))
            log(f"  {real.get('reason') or 'done'}")
    if "operator" in sections:
        quiet.check("operator")
        log(f"operator: {args.operator_agents} Agents against the emulated API")
        operator = operator_results(args.operator_agents)
    else:
        operator = not_run(args.operator_agents, "not run (--targets)" if "gatehouse" not in args.targets
                           else f"not run (--only {args.only})" if args.only else "not run (--operator-agents 0)")
    if "operator_cp" in sections:
        log(f"operator (real control plane): {args.operator_agents} Agents against a real kube-apiserver, the chart "
            f"installed, one node cordoned")
        with tempfile.TemporaryDirectory(prefix="gatehouse-bench-operator-cp-") as tmp:
            operator_cp = operator_cp_results(args.operator_agents, args.work.resolve() if args.work else Path(tmp),
                                              quiet.check)
        if operator_cp.get("reason"):
            log(f"  operator on the real control plane not measured: {operator_cp['reason']}")
    else:
        operator_cp = operator_cp_not_run(args.operator_agents, "not run (--no-control-plane)" if args.no_control_plane
                                          else f"not run (--only {args.only})" if args.only
                                          else "not run (--operator-agents 0)" if args.operator_agents <= 0
                                          else "not run (--targets)")
    noisy = quiet.noisy()
    rows = [] if args.only == "real-model" else report.build_rows(results, reasons, operator, s.paused, s.loss_levels,
                                                                   noisy)
    if args.real_model:
        rows += real_model.rows(real)
    overhead = report.auth_overhead(results, reasons, noisy)
    kinds = bars.child_kinds()
    judged = [] if args.only == "real-model" else bars.build_bars(results.get("gatehouse"), floor, operator, noisy, kinds,
                                                                   operator_cp, results.get(bars.ADK_TWIN))
    gatehouse = results.get("gatehouse") or {}
    compared = bars.emulator_differences({"kubectl": gatehouse.get("kubectl"), "operator": operator},
                                         {"kubectl": gatehouse.get("kubectl_cp"), "operator": operator_cp})
    stamp = started.strftime("%Y%m%dT%H%M%SZ")
    mode = "quick" if args.quick else "full"
    full: dict[str, Any] = {
        "meta": {"started": started.isoformat(), "seconds": round((datetime.now(UTC) - started).total_seconds(), 1),
                 "mode": "quick" if args.quick else "full", "argv": sys.argv[1:], "loadavg_at_start": load_at_start,
                 "machine": machine(), "configuration": {"gatehouse": DEFAULT_CONFIGURATION,
                                                         "gatehouse_local": "local mode: no credential, anonymous"},
                 "operator_child_kinds": kinds},
        "settings": {**s.__dict__, "loss_levels": list(s.loss_levels), "backlog": list(s.backlog)},
        "available": reasons,
        "hygiene": quiet.as_json(),
        "results": results,
        "operator": operator,
        "operator_cp": operator_cp,
        "control_plane_vs_emulator": compared,
        "floors": floor,
        "auth_overhead": overhead,
        "bars": judged,
        "real_model": real,
        "rows": rows,
    }
    report.print_table(rows, f"Gatehouse bench ({mode}, {stamp}); 'Gatehouse (default)' is "
                             f"{DEFAULT_CONFIGURATION}")
    report.print_auth_overhead(overhead)
    if "a2a" in floor:
        report.print_floors(floor, results.get("gatehouse"))
    backlog = (results.get("gatehouse") or {}).get("backlog") or {}
    if backlog.get("steps"):
        report.print_backlog(backlog)
    kubectl = (results.get("gatehouse") or {}).get("kubectl") or {}
    if kubectl.get("patch"):
        report.print_kubectl(kubectl)
    if (gatehouse.get("kubectl_cp") or {}).get("patch"):
        report.print_kubectl(gatehouse["kubectl_cp"], "kubectl: Gatehouse (default) with the ToolApproval mirror, on the "
                                                      "real control plane (the chart installed, its operator running)")
    if any(row["real"] is not None for row in compared):
        report.print_differences(compared)
    if judged:
        report.print_bars(judged, f"Bars (issue 19): ratios and differences to what this run measured"
                                  f"{' (quick counts)' if args.quick else ''}")
    report.print_hygiene(quiet.as_json())
    path = report.write_json(full, args.out, stamp)
    log(f"wrote {path}")
    if not args.no_plot:
        pngs = report.write_plot(full, args.out)
        log(f"wrote {', '.join(str(p) for p in pngs)}" if pngs
            else "no plot: matplotlib is not installed (pip install '.[bench]')")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
