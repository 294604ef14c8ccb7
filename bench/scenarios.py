"""The measurements. Each takes running servers (or starts fresh ones) and returns plain JSON-able dicts.

- :func:`latency` — pause and resume latency, targets interleaved (the order rotates every iteration), plus
  model calls per approved call (the server's own counter, before and after) and tool runs per approval.
- :func:`loss` — N conversations (pause + approve) at a fixed concurrency; a conversation is lost if a request
  failed (HTTP, JSON-RPC), the task ended in the wrong state, or the tool ran zero or two times (the journal).
- :func:`paused_then_decided` — a fresh server per target holds N paused conversations (RSS), then N decisions over
  HTTP at a fixed concurrency, in rounds, the targets taking turns (decisions/s: the median of the rounds).
- :func:`cold_start` — seconds from spawn to ready, and RSS at rest.
- :func:`backlog` — one server per backlog size of paused conversations (100, 1,000, 10,000), probed in turn: at each
  size RSS, pause/resume p50, ``GET /approvals`` p50 and decisions/s.
- :func:`decision_paths` — a decision to the tool having run (the journal's timestamp), over A2A and over REST.
- :func:`restart` — process start to the first pause served, against an import floor (a fresh interpreter
  importing the google-adk, a2a-sdk and mcp modules the runtime imports).

Every conversation deletes its own file (``<target>-<scenario>-<i>.txt``), so the demo-tools journal tells how
often each approved call really ran.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from bench.protocols import Endpoint, Paused, StepError, approve, pause
from bench.targets import Server, Target, ToolsServer, running

__all__ = ["JournalClock", "Settings", "backlog", "cold_start", "decision_paths", "import_floor_seconds",
           "imported_modules", "journal_times", "latency", "loss", "paused_then_decided", "percentile", "restart",
           "rotated", "split_rounds", "stats"]

REQUEST_TIMEOUT = 120.0
LISTING_PAGE = 100  # GET /approvals' default limit (agent_runtime.rest.paging.DEFAULT_LIMIT)


def _log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", flush=True)


@dataclass(frozen=True)
class Settings:
    iterations: int = 200
    warmup: int = 5
    paused: int = 1000
    concurrency: int = 20
    rounds: int = 5  # bar 2's figures in rounds: the held decisions (per target, in turn) and the library ceiling
    loss_levels: tuple[int, ...] = (20, 40, 60)
    loss_conversations: int = 500
    cold_starts: int = 3
    settle: float = 1.0  # seconds a server idles before its RSS is read
    backlog: tuple[int, ...] = (100, 1000, 10_000)  # paused conversations one runtime holds, ascending
    backlog_probes: int = 100  # pause+approve conversations and GET /approvals timed at each backlog size
    backlog_decisions: int = 200  # decisions at concurrency, at each backlog size
    restarts: int = 3  # restart and import floor samples
    kubectl_iterations: int = 50  # kubectl votes (and as many A2A decisions) timed to the tool having run
    mirror_held: int = 10_000  # paused conversations whose ToolApproval creation lag is measured
    gateway_iterations: int = 100  # MCP gateway: pass-through calls and held-call decisions, each beside its reference


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank-with-interpolation percentile (``q`` in 0..100)."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    pos = (len(ordered) - 1) * q / 100
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def stats(seconds: Sequence[float]) -> dict[str, float | int | None]:
    """p50/p99/mean/min/max in milliseconds."""
    if not seconds:
        return {"n": 0, "p50": None, "p99": None, "mean": None, "min": None, "max": None}
    ms = [s * 1000 for s in seconds]
    return {
        "n": len(ms),
        "p50": round(percentile(ms, 50), 2),
        "p99": round(percentile(ms, 99), 2),
        "mean": round(statistics.fmean(ms), 2),
        "min": round(min(ms), 2),
        "max": round(max(ms), 2),
    }


def client(concurrency: int = 1) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=max(10, concurrency * 2), max_keepalive_connections=max(10, concurrency * 2))
    return httpx.AsyncClient(timeout=REQUEST_TIMEOUT, limits=limits)


def journal_runs(journal: Path) -> Counter[str]:
    """How many times ``delete_file`` ran successfully, per path."""
    runs: Counter[str] = Counter()
    if journal.exists():
        for line in journal.read_text().splitlines():
            entry = json.loads(line)
            if entry.get("tool") == "delete_file" and entry.get("ok"):
                runs[entry["args"]["path"]] += 1
    return runs


def split_rounds(total: int, rounds: int) -> list[int]:
    """``total`` as ``rounds`` near-equal counts, the first ones larger by one; fewer rounds when ``total`` is smaller
    (none is empty), one round of 0 when it is 0."""
    rounds = max(1, min(rounds, total))
    base, extra = divmod(total, rounds)
    return [base + (1 if r < extra else 0) for r in range(rounds)]


def _names(key: str, scenario: str, n: int) -> list[str]:
    return [f"{key}-{scenario}-{i}.txt" for i in range(n)]


@dataclass
class PairRounds:
    """Rounds of sequential pause+approve pairs on one server (bar 1, measured in the floors' rounds: see
    ``bench/floors.py``): ``await rounds(count, warmup)`` runs ``warmup`` unrecorded pairs then ``count`` recorded
    ones, adding to ``pauses`` / ``resumes`` (seconds); a failed recorded pair is counted in ``errors``, not timed."""

    server: Server
    tools: ToolsServer
    pauses: list[float] = field(default_factory=list)
    resumes: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    done: int = 0

    async def __call__(self, count: int, warmup: int) -> None:
        names = [f"{self.server.target.key}-share-{self.done + i}.txt" for i in range(warmup + count)]
        self.done += len(names)
        self.tools.touch(names)
        async with client() as http:
            for i, name in enumerate(names):
                try:
                    paused = await pause(http, self.server.endpoint, f"delete {name}")
                    resume = await approve(http, self.server.endpoint, paused)
                except StepError as exc:
                    if i >= warmup:
                        self.errors[exc.kind] += 1
                    continue
                if i >= warmup:
                    self.pauses.append(paused.seconds)
                    self.resumes.append(resume)

    def results(self) -> dict[str, Any]:
        return {"pause_ms": stats(self.pauses), "resume_ms": stats(self.resumes), "errors": dict(self.errors)}


async def latency(servers: Sequence[Server], tools: ToolsServer, settings: Settings) -> dict[str, dict[str, Any]]:
    """Pause/resume latency with the servers interleaved; model calls and tool runs per approved call."""
    total = settings.warmup + settings.iterations
    files = {s.target.key: _names(s.target.key, "lat", total) for s in servers}
    for names in files.values():
        tools.touch(names)
    pauses: dict[str, list[float]] = {s.target.key: [] for s in servers}
    resumes: dict[str, list[float]] = {s.target.key: [] for s in servers}
    errors: dict[str, Counter[str]] = {s.target.key: Counter() for s in servers}
    approved: dict[str, int] = dict.fromkeys(pauses, 0)
    calls_before: dict[str, float | None] = {}
    async with client() as http:
        for i in range(total):
            if i == settings.warmup:
                for s in servers:
                    calls_before[s.target.key] = await s.target.model_calls(http, s.url)
            shift = i % len(servers)
            for server in [*servers[shift:], *servers[:shift]]:
                key = server.target.key
                try:
                    paused = await pause(http, server.endpoint, f"delete {files[key][i]}")
                    resume = await approve(http, server.endpoint, paused)
                except StepError as exc:
                    if i >= settings.warmup:
                        errors[key][exc.kind] += 1
                    continue
                if i >= settings.warmup:
                    pauses[key].append(paused.seconds)
                    resumes[key].append(resume)
                    approved[key] += 1
        calls_after = {s.target.key: await s.target.model_calls(http, s.url) for s in servers}
    runs = journal_runs(tools.journal)
    out: dict[str, dict[str, Any]] = {}
    for s in servers:
        key = s.target.key
        measured = files[key][settings.warmup :]
        before, after = calls_before.get(key), calls_after[key]
        per_call = None
        if before is not None and after is not None and approved[key]:
            per_call = round((after - before) / approved[key], 3)
        out[key] = {
            "pause_ms": stats(pauses[key]),
            "resume_ms": stats(resumes[key]),
            "errors": dict(errors[key]),
            "approved": approved[key],
            "model_calls_per_approved_call": per_call,
            "tool_runs_per_approval": round(sum(runs[n] for n in measured) / approved[key], 3) if approved[key] else None,
        }
    return out


async def _conversations(server: Server, names: Sequence[str], concurrency: int) -> tuple[list[str], float]:
    """Pause and approve one conversation per name, ``concurrency`` at a time; per-name outcome and wall seconds."""
    gate = asyncio.Semaphore(concurrency)
    outcomes: list[str] = ["ok"] * len(names)

    async def one(i: int, http: httpx.AsyncClient) -> None:
        async with gate:
            step = "pause"
            try:
                paused = await pause(http, server.endpoint, f"delete {names[i]}")
                step = "approve"
                await approve(http, server.endpoint, paused)
            except StepError as exc:
                outcomes[i] = f"{step}:{exc.kind}"

    start = time.perf_counter()
    async with client(concurrency) as http:
        await asyncio.gather(*(one(i, http) for i in range(len(names))))
    return outcomes, time.perf_counter() - start


def _judge(outcomes: list[str], names: Sequence[str], runs: Counter[str]) -> Counter[str]:
    """Outcome kinds, with the journal's verdict added: a call must run exactly once (only when approved)."""
    kinds: Counter[str] = Counter()
    for outcome, name in zip(outcomes, names, strict=True):
        ran = runs[name]
        if ran > 1:
            kinds["tool-ran-twice"] += 1
        elif outcome == "ok" and ran == 0:
            kinds["tool-not-run"] += 1
        else:
            kinds[outcome] += 1
    return kinds


async def loss(server: Server, tools: ToolsServer, level: int, conversations: int) -> dict[str, Any]:
    """``conversations`` pause+approve conversations, ``level`` at a time; how many were lost and how."""
    names = _names(server.target.key, f"loss{level}", max(conversations, level))
    tools.touch(names)
    outcomes, seconds = await _conversations(server, names, level)
    kinds = _judge(outcomes, names, journal_runs(tools.journal))
    lost = sum(v for k, v in kinds.items() if k != "ok")
    return {
        "concurrency": level,
        "conversations": len(names),
        "lost": lost,
        "lost_percent": round(100 * lost / len(names), 3),
        "kinds": {k: v for k, v in kinds.items() if k != "ok"},
        "seconds": round(seconds, 2),
    }


async def paused_then_decided(targets: Sequence[Target], work: Path, tools: ToolsServer, n: int, concurrency: int,
                              rounds: int, settle: float = 1.0,
                              ceiling: Callable[[int], Awaitable[float]] | None = None,
                              beside: str = "gatehouse") -> dict[str, dict[str, Any]]:
    """A fresh server per target holds ``n`` paused conversations (RSS), then they are decided at ``concurrency`` in
    ``rounds`` rounds of about ``n / rounds``, the targets taking turns (the order rotating every round, so a slow
    stretch of the machine falls on one round of each target rather than on one target's whole figure).

    ``decisions_per_second`` is the median of the rounds' rates (bar 2's numerator), ``decisions_per_second_rounds``
    each round's in order, ``decisions_per_second_overall`` every decision over the rounds' summed seconds; a target
    whose server does not start gets ``reason``.

    ``ceiling(r)``, when given, measures the library ceiling of round ``r`` (``floors.Libraries.ceiling_round``)
    immediately before target ``beside`` decides its round ``r``, so both sides of bar 2's ratio come from the same
    minute of the machine: ``decisions_per_second_ceiling_rounds`` of ``beside``'s result, one per entry of its
    ``decisions_per_second_rounds``."""
    keys = [t.key for t in targets]
    names = {t.key: _names(t.key, "held", n) for t in targets}
    out: dict[str, dict[str, Any]] = {}
    servers: dict[str, Server] = {}
    clients: dict[str, httpx.AsyncClient] = {}
    held: dict[str, list[Paused]] = {}
    async with contextlib.AsyncExitStack() as stack:
        for target in targets:
            tools.touch(names[target.key])
            try:
                server = stack.enter_context(running(target, work, tools.url, f"{target.key}-held"))
            except RuntimeError as exc:
                out[target.key] = {"reason": f"failed to start: {str(exc).splitlines()[0]}"}
                _log(f"  {target.label}: {out[target.key]['reason']}")
                continue
            http = await stack.enter_async_context(client(concurrency))
            await asyncio.sleep(settle / 2)
            rss_before = server.rss_mb()
            start = time.perf_counter()
            paused, pause_errors = await _hold(http, server.endpoint, names[target.key], concurrency)
            pause_seconds = time.perf_counter() - start
            await asyncio.sleep(settle)
            servers[target.key], clients[target.key], held[target.key] = server, http, paused
            out[target.key] = {"n": n, "concurrency": concurrency, "paused": len(paused),
                               "pause_errors": dict(pause_errors), "pause_seconds": round(pause_seconds, 2),
                               "rss_at_rest_mb": round(rss_before, 1), "rss_paused_mb": round(server.rss_mb(), 1)}
            _log(f"  {target.label}: {len(paused):,} paused in {pause_seconds:.1f}s, RSS {rss_before:.1f} → "
                 f"{out[target.key]['rss_paused_mb']} MB")
        live = [k for k in keys if k in servers]
        chunks: dict[str, list[list[Paused]]] = {}
        for key in live:
            counts, rest = split_rounds(len(held[key]), rounds), held[key]
            chunks[key] = []
            for count in counts:
                chunks[key].append(rest[:count])
                rest = rest[count:]
        rates: dict[str, list[float]] = {k: [] for k in live}
        sizes: dict[str, list[int]] = {k: [] for k in live}
        seconds: dict[str, list[float]] = {k: [] for k in live}
        errors: dict[str, Counter[str]] = {k: Counter() for k in live}
        ceilings: list[float] = []
        for r in range(max((len(c) for c in chunks.values()), default=0)):
            for key in rotated(live, r):
                if r >= len(chunks[key]) or not chunks[key][r]:
                    continue
                if ceiling is not None and key == beside:
                    ceilings.append(await ceiling(r))
                done, decision_errors, took = await _decide(clients[key], servers[key].endpoint, chunks[key][r],
                                                            concurrency)
                errors[key].update(decision_errors)
                sizes[key].append(done)
                seconds[key].append(round(took, 3))
                rates[key].append(round(done / took, 2) if took > 0 else 0.0)
            _log(f"  round {r + 1}: " + ", ".join(f"{k} {rates[k][-1]}/s" for k in rotated(live, r)
                                                   if len(rates[k]) > r)
                 + (f"; library ceiling beside {beside} {ceilings[-1]}/s" if ceiling is not None and ceilings else ""))
    runs = journal_runs(tools.journal)
    for key in live:
        result = out[key]
        decided, total = sum(sizes[key]), sum(seconds[key])
        result.update({
            "decisions": decided,
            "decision_errors": dict(errors[key]),
            "decisions_seconds": round(total, 3),
            "rounds": len(rates[key]),
            "interleaved": len(live) > 1,
            "decisions_per_second": round(statistics.median(rates[key]), 2) if rates[key] else None,
            "decisions_per_second_rounds": rates[key],
            "decisions_per_second_overall": round(decided / total, 2) if total > 0 else None,
            "round_decisions": sizes[key],
            "round_seconds": seconds[key],
            "tool_ran_once": sum(1 for p in names[key] if runs[p] == 1),
            "tool_ran_twice": sum(1 for p in names[key] if runs[p] > 1),
        })
        # decided without an error, yet the journal has no run (e.g. the runtime's MCP call failed): counted, not hidden
        result["tool_not_run"] = max(0, decided - result["tool_ran_once"] - result["tool_ran_twice"])
        if ceiling is not None and key == beside:
            result["decisions_per_second_ceiling_rounds"] = ceilings
    return out


def cold_start(server: Server, settle: float = 1.0) -> dict[str, float]:
    """Seconds from spawn to ready, and RSS at rest ``settle`` seconds later."""
    time.sleep(settle)
    return {"ready_seconds": round(server.ready_seconds, 3), "rss_at_rest_mb": round(server.rss_mb(), 1)}


async def _hold(http: httpx.AsyncClient, endpoint: Endpoint, names: Sequence[str],
                concurrency: int) -> tuple[list[Paused], Counter[str]]:
    """Pause one new conversation per name, ``concurrency`` at a time; the pauses and the errors by kind."""
    gate = asyncio.Semaphore(concurrency)
    held: list[Paused] = []
    errors: Counter[str] = Counter()

    async def one(name: str) -> None:
        async with gate:
            try:
                held.append(await pause(http, endpoint, f"delete {name}"))
            except StepError as exc:
                errors[exc.kind] += 1

    await asyncio.gather(*(one(n) for n in names))
    return held, errors


async def _decide(http: httpx.AsyncClient, endpoint: Endpoint, held: Sequence[Paused],
                  concurrency: int) -> tuple[int, Counter[str], float]:
    """Approve every paused conversation, ``concurrency`` at a time: decided, errors by kind, wall seconds."""
    gate = asyncio.Semaphore(concurrency)
    errors: Counter[str] = Counter()

    async def one(p: Paused) -> None:
        async with gate:
            try:
                await approve(http, endpoint, p)
            except StepError as exc:
                errors[exc.kind] += 1

    start = time.perf_counter()
    await asyncio.gather(*(one(p) for p in held))
    return len(held) - sum(errors.values()), errors, time.perf_counter() - start


async def _listing(http: httpx.AsyncClient, server: Server, expected: int) -> float:
    """One ``GET /approvals`` (pending, the default limit: the first page); its seconds. The page must hold
    ``expected`` requests."""
    start = time.perf_counter()
    try:
        response = await http.get(server.url + "/approvals", headers=server.endpoint.headers)
    except httpx.HTTPError as exc:
        raise StepError("http", f"GET /approvals: {type(exc).__name__}: {exc}") from None
    seconds = time.perf_counter() - start
    if response.status_code != 200:
        raise StepError("http", f"GET /approvals: HTTP {response.status_code}: {response.text[:200]}")
    shown = len(response.json().get("approvals") or [])
    if shown != expected:
        raise StepError("shape", f"GET /approvals listed {shown} pending requests, not {expected}")
    return seconds


async def backlog(target: Target, work: Path, tools: ToolsServer, sizes: Sequence[int], probes: int, decisions: int,
                  concurrency: int, fill_concurrency: int, warmup: int,
                  quiet: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
    """One fresh server per backlog size (``sizes``, ascending), each holding that many paused conversations (created
    ``fill_concurrency`` at a time and never decided), all running at once; after each fill, ``quiet`` (the hygiene
    sample, which also lets the server settle) and the server's RSS (and its children's). Then, interleaved — the
    servers take turns, the order rotating every round, so the machine's noise falls on every size alike:

    - pause and resume p50 of ``probes`` conversations per server (pause, then approve at once; ``warmup`` rounds
      unrecorded first);
    - ``GET /approvals`` (pending, default limit: the first page) ``probes`` times per server, p50;
    - decisions/s: two rounds of ``decisions / 2`` more pauses per server, decided at ``concurrency`` (the second
      round in the reverse order); each backlog is back to its size afterwards.
    """
    key = target.key
    held: dict[int, int] = {}
    fills: dict[int, dict[str, Any]] = {}
    pauses: dict[int, list[float]] = {n: [] for n in sizes}
    resumes: dict[int, list[float]] = {n: [] for n in sizes}
    listings: dict[int, list[float]] = {n: [] for n in sizes}
    decided: dict[int, int] = dict.fromkeys(sizes, 0)
    decision_seconds: dict[int, float] = dict.fromkeys(sizes, 0.0)
    errors: dict[int, Counter[str]] = {n: Counter() for n in sizes}
    with contextlib.ExitStack() as stack:
        servers = {n: stack.enter_context(running(target, work, tools.url, f"{key}-backlog-{n}")) for n in sizes}
        async with client(max(concurrency, fill_concurrency)) as http:
            for size, server in servers.items():
                start = time.perf_counter()
                new, fill_errors = await _hold(http, server.endpoint, _names(key, f"backlog{size}-held", size),
                                               fill_concurrency)
                seconds = time.perf_counter() - start
                held[size] = len(new)
                sample = await asyncio.to_thread(quiet, f"backlog {size:,}")
                fills[size] = {"fill_seconds": round(seconds, 2), "fill_errors": dict(fill_errors), "hygiene": sample,
                               "fill_per_second": round(len(new) / seconds, 1) if seconds > 0 else None,
                               "rss_mb": round(server.rss_mb(), 1)}
                _log(f"  backlog {held[size]:,}: filled in {fills[size]['fill_seconds']}s "
                     f"({fills[size]['fill_per_second']}/s), RSS {fills[size]['rss_mb']} MB")
            for i in range(warmup + probes):
                for size in rotated(sizes, i):
                    server = servers[size]
                    name = _names(key, f"backlog{size}-probe", warmup + probes)[i]
                    tools.touch([name])
                    try:
                        paused = await pause(http, server.endpoint, f"delete {name}")
                        resume = await approve(http, server.endpoint, paused)
                        listing = await _listing(http, server, min(held[size], LISTING_PAGE))
                    except StepError as exc:
                        errors[size][f"probe:{exc.kind}"] += 1
                        continue
                    if i >= warmup:
                        pauses[size].append(paused.seconds)
                        resumes[size].append(resume)
                        listings[size].append(listing)
            for r in range(2):
                for size in sizes if r == 0 else list(reversed(sizes)):
                    server = servers[size]
                    names = _names(key, f"backlog{size}-decision{r}", max(decisions // 2, 1))
                    tools.touch(names)
                    extra, pause_errors = await _hold(http, server.endpoint, names, concurrency)
                    done, decision_errors, seconds = await _decide(http, server.endpoint, extra, concurrency)
                    decided[size] += done
                    decision_seconds[size] += seconds
                    errors[size].update({f"decision-pause:{k}": v for k, v in pause_errors.items()})
                    errors[size].update({f"decision:{k}": v for k, v in decision_errors.items()})
    steps: list[dict[str, Any]] = []
    for size in sizes:
        seconds = decision_seconds[size]
        step: dict[str, Any] = {
            "backlog": held[size], **fills[size],
            "pause_ms": stats(pauses[size]), "resume_ms": stats(resumes[size]), "listing_ms": stats(listings[size]),
            "decisions": decided[size], "decisions_seconds": round(seconds, 3),
            "decisions_per_second": round(decided[size] / seconds, 2) if seconds > 0 and decided[size] else None,
            "errors": dict(errors[size]),
        }
        steps.append(step)
        _log(f"  backlog {held[size]:,}: pause p50 {step['pause_ms']['p50']} ms, resume p50 {step['resume_ms']['p50']} "
             f"ms, GET /approvals p50 {step['listing_ms']['p50']} ms, {step['decisions_per_second']} decisions/s, "
             f"errors {step['errors'] or 0}")
    return {"sizes": list(sizes), "probes": probes, "decisions": decisions, "concurrency": concurrency,
            "fill_concurrency": fill_concurrency, "interleaved": True, "steps": steps}


def rotated(items: Sequence[Any], i: int) -> list[Any]:
    """``items`` starting at position ``i`` (mod its length): who goes first changes every round."""
    k = i % len(items)
    return [*items[k:], *items[:k]]


IMPORT_PREFIXES = ("google.adk", "a2a", "mcp")
_IMPORT_LINE = re.compile(r"^import time:\s+\d+\s+\|\s+\d+\s+\|\s*(\S+)\s*$", re.MULTILINE)
# A fresh interpreter imports what the runtime imported of google-adk, a2a-sdk and mcp: a2a-sdk's server first with
# grpc hidden, as the runtime does (agent_runtime.app.factory), then the rest in the order the runtime imported them.
IMPORT_FLOOR_SCRIPT = """
import sys
names = open(sys.argv[1]).read().split()
sys.modules["grpc"] = None
try:
    import a2a.server.request_handlers, a2a.server.routes
finally:
    if "grpc" in sys.modules and sys.modules["grpc"] is None:
        del sys.modules["grpc"]
skipped = 0
for name in names:
    try:
        __import__(name)
    except ImportError:  # a name registered under another (e.g. google.adk.platform.internal): its parent imported it
        skipped += 1
print(skipped)
"""


def imported_modules(importtime_log: str, prefixes: Sequence[str] = IMPORT_PREFIXES) -> list[str]:
    """The modules of ``prefixes`` (a package and everything under it) in ``python -X importtime`` output, in the
    order they were imported, each once."""
    seen: dict[str, None] = {}
    for name in _IMPORT_LINE.findall(importtime_log):
        if any(name == p or name.startswith(p + ".") for p in prefixes):
            seen.setdefault(name, None)
    return list(seen)


def import_floor_seconds(modules: Sequence[str], work: Path) -> tuple[float, int]:
    """Wall seconds of a fresh interpreter (this venv's) importing ``modules``, from spawn to exit, and how many of
    them could not be imported by name (registered under another name by the module that imported them)."""
    listing = work / "import-floor-modules.txt"
    listing.write_text("\n".join(modules) + "\n")
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", IMPORT_FLOOR_SCRIPT, str(listing)], capture_output=True, text=True,
                          env=env, cwd=work, timeout=120)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"the import floor's interpreter exited {proc.returncode}: {proc.stderr[-600:]}")
    return seconds, int(proc.stdout.split()[-1])


async def restart(target: Target, work: Path, tools: ToolsServer, samples: int) -> dict[str, Any]:
    """Quick restarts: process start to the first pause served, against an import floor from the same run.

    A first start on a fresh state (``-X importtime``: which google-adk, a2a-sdk and mcp modules the runtime
    imports, up to and including its first pause and decision) leaves a few conversations behind; then
    ``samples`` times, interleaved: the import floor (:func:`import_floor_seconds`), and the runtime restarted on
    that state, timed from spawn to the answer of its first pause (``/readyz`` first, then the pause)."""
    key = target.key
    state = work / f"{key}-restart" / "state"
    names = _names(key, "restart", 3 + samples)
    tools.touch(names)
    with running(target, work, tools.url, f"{key}-restart-census", state_dir=state,
                 env_extra={"PYTHONPROFILEIMPORTTIME": "1"}) as server:
        async with client() as http:
            for name in names[:3]:
                await approve(http, server.endpoint, await pause(http, server.endpoint, f"delete {name}"))
        log = server.log
    modules = imported_modules(log.read_text(errors="replace"))
    if not modules:
        return {"reason": "no google-adk, a2a-sdk or mcp module in the runtime's -X importtime output"}
    floors: list[float] = []
    firsts: list[float] = []
    readies: list[float] = []
    skipped = 0
    for k in range(samples):
        seconds, skipped = await asyncio.to_thread(import_floor_seconds, modules, work)
        floors.append(seconds)
        with running(target, work, tools.url, f"{key}-restart{k + 1}", state_dir=state) as server:
            async with client() as http:
                paused = await pause(http, server.endpoint, f"delete {names[3 + k]}")
                firsts.append(time.perf_counter() - server.started)
                await approve(http, server.endpoint, paused)
            readies.append(server.ready_seconds)
    return {
        "samples": samples, "modules": len(modules), "modules_not_importable_by_name": skipped,
        "import_floor_seconds": round(statistics.median(floors), 3),
        "first_pause_seconds": round(statistics.median(firsts), 3),
        "ready_seconds": round(statistics.median(readies), 3),
        "import_floor_samples": [round(x, 3) for x in floors],
        "first_pause_samples": [round(x, 3) for x in firsts],
        "ready_samples": [round(x, 3) for x in readies],
        "state": "the runtime's own sqlite state with a few finished conversations (a stop, then a start)",
    }


def journal_times(journal: Path, offset: int) -> tuple[dict[str, float], int]:
    """When ``delete_file`` ran, per path (the journal's ``ts``, as epoch seconds), from byte ``offset`` on; and the
    offset after the last complete line read."""
    times: dict[str, float] = {}
    if not journal.exists():
        return times, offset
    with journal.open("rb") as f:
        f.seek(offset)
        data = f.read()
    end = data.rfind(b"\n") + 1
    for line in data[:end].splitlines():
        entry = json.loads(line)
        if entry.get("tool") == "delete_file" and entry.get("ok"):
            times[entry["args"]["path"]] = datetime.fromisoformat(entry["ts"]).timestamp()
    return times, offset + end


class JournalClock:
    """When each ``delete_file`` call ran, read from the demo-tools journal as it grows (only lines written after this
    was made)."""

    def __init__(self, journal: Path, poll: float = 0.001) -> None:
        self._journal = journal
        self._offset = journal.stat().st_size if journal.exists() else 0
        self._seen: dict[str, float] = {}
        self._poll = poll

    async def ran_at(self, name: str, timeout: float = 30.0) -> float:
        """The journal's timestamp of the call that deleted ``name`` (epoch seconds), waiting up to ``timeout``."""
        deadline = time.monotonic() + timeout
        while name not in self._seen:
            new, self._offset = journal_times(self._journal, self._offset)
            self._seen.update(new)
            if name in self._seen:
                break
            if time.monotonic() > deadline:
                raise StepError("tool-not-run", f"{name} not in the journal {timeout:.0f}s after its decision")
            await asyncio.sleep(self._poll)
        return self._seen[name]


async def _rest_approve(http: httpx.AsyncClient, server: Server, request_id: str) -> None:
    """``POST /approvals/{id}/decision`` approve, as the runtime's REST clients do (an Idempotency-Key each)."""
    headers = {**server.endpoint.headers, "Idempotency-Key": uuid.uuid4().hex}
    try:
        response = await http.post(f"{server.url}/approvals/{request_id}/decision", json={"decision": "approve"},
                                   headers=headers)
    except httpx.HTTPError as exc:
        raise StepError("http", f"REST decision: {type(exc).__name__}: {exc}") from None
    if response.status_code != 200:
        raise StepError("http", f"REST decision: HTTP {response.status_code}: {response.text[:200]}")


async def _until_completed(http: httpx.AsyncClient, server: Server, task_id: str, timeout: float = 30.0) -> None:
    """Poll ``GetTask`` until the task is completed (the run a REST decision resumed has finished)."""
    deadline = time.monotonic() + timeout
    while True:
        body = {"jsonrpc": "2.0", "id": uuid.uuid4().hex, "method": "GetTask", "params": {"id": task_id}}
        response = await http.post(server.url + "/", json=body, headers=server.endpoint.headers)
        state = ((response.json().get("result") or {}).get("status") or {}).get("state")
        if state == "TASK_STATE_COMPLETED":
            return
        if time.monotonic() > deadline:
            raise StepError("state", f"task not completed {timeout:.0f}s after the REST decision ({state})")
        await asyncio.sleep(0.005)


async def decision_step(http: httpx.AsyncClient, server: Server, ran_at: Callable[[str], Awaitable[float]], name: str,
                        channel: str) -> tuple[float, float | None]:
    """One conversation paused over A2A (``delete name``), then approved over ``channel`` (``a2a`` or ``rest``): the
    seconds from the decision sent to the tool having run (``ran_at``: the demo-tools journal), and the A2A resume's
    round trip (None over REST). Over REST it returns once the task completed. Raises :class:`StepError`."""
    paused = await pause(http, server.endpoint, f"delete {name}")
    sent = time.time()
    if channel == "a2a":
        resume = await approve(http, server.endpoint, paused)
        return await ran_at(name) - sent, resume
    await _rest_approve(http, server, paused.token)
    ran = await ran_at(name)
    await _until_completed(http, server, paused.task_id)
    return ran - sent, None


async def decision_paths(server: Server, tools: ToolsServer, iterations: int, warmup: int) -> dict[str, Any]:
    """Decision to the tool having run, over A2A and over REST, interleaved (the order alternating every iteration).

    Each conversation pauses over A2A; then either an A2A decision (the ``approve`` call, which returns once the task
    completed) or ``POST /approvals/{id}/decision`` (which returns once decided; the run resumes meanwhile, and the
    bench waits for the task to complete before the next conversation). The tool having run is the demo-tools
    journal's timestamp of that call, so both channels are timed to the same event (:func:`decision_step`)."""
    key = server.target.key
    names = _names(key, "paths", 2 * (warmup + iterations))
    tools.touch(names)
    ran_at = JournalClock(tools.journal, poll=0.002).ran_at
    times: dict[str, list[float]] = {"a2a": [], "rest": [], "a2a_resume": []}
    errors: Counter[str] = Counter()

    async with client() as http:
        for i in range(warmup + iterations):
            for channel in (("a2a", "rest") if i % 2 == 0 else ("rest", "a2a")):
                name = names[2 * i + (channel == "rest")]
                try:
                    to_tool, resume = await decision_step(http, server, ran_at, name, channel)
                except StepError as exc:
                    errors[f"{channel}:{exc.kind}"] += 1
                    continue
                if i >= warmup:
                    times[channel].append(to_tool)
                    if resume is not None:
                        times["a2a_resume"].append(resume)
    return {"iterations": iterations, "a2a_to_tool_ms": stats(times["a2a"]), "rest_to_tool_ms": stats(times["rest"]),
            "a2a_resume_ms": stats(times["a2a_resume"]), "errors": dict(errors)}
