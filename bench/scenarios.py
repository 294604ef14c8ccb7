"""The measurements. Each takes running servers (or starts fresh ones) and returns plain JSON-able dicts.

- :func:`latency` — pause and resume latency, targets interleaved (the order rotates every iteration), plus
  model calls per approved call (the server's own counter, before and after) and tool runs per approval.
- :func:`loss` — N conversations (pause + approve) at a fixed concurrency; a conversation is lost if a request
  failed (HTTP, JSON-RPC), the task ended in the wrong state, or the tool ran zero or two times (the journal).
- :func:`paused_then_decided` — a fresh server holds N paused conversations (RSS), then N decisions over HTTP
  at a fixed concurrency (decisions/s).
- :func:`cold_start` — seconds from spawn to ready, and RSS at rest.

Every conversation deletes its own file (``<target>-<scenario>-<i>.txt``), so the demo-tools journal tells how
often each approved call really ran.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench.protocols import Paused, StepError, approve, pause
from bench.targets import Server, Target, ToolsServer, running

__all__ = ["Settings", "cold_start", "latency", "loss", "paused_then_decided", "percentile", "stats"]

REQUEST_TIMEOUT = 120.0


@dataclass(frozen=True)
class Settings:
    iterations: int = 200
    warmup: int = 5
    paused: int = 1000
    concurrency: int = 20
    loss_levels: tuple[int, ...] = (20, 40, 60)
    loss_conversations: int = 500
    cold_starts: int = 3
    settle: float = 1.0  # seconds a server idles before its RSS is read


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


def _names(key: str, scenario: str, n: int) -> list[str]:
    return [f"{key}-{scenario}-{i}.txt" for i in range(n)]


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


async def paused_then_decided(
    target: Target, work: Path, tools: ToolsServer, n: int, concurrency: int, settle: float = 1.0
) -> dict[str, Any]:
    """A fresh server holds ``n`` paused conversations (RSS), then ``n`` decisions at ``concurrency`` (rate)."""
    names = _names(target.key, "held", n)
    tools.touch(names)
    with running(target, work, tools.url, f"{target.key}-held") as server:
        await asyncio.sleep(settle / 2)
        rss_before = server.rss_mb()
        gate = asyncio.Semaphore(concurrency)
        held: list[Paused | None] = [None] * n
        pause_errors: Counter[str] = Counter()
        decision_errors: Counter[str] = Counter()
        async with client(concurrency) as http:

            async def hold(i: int) -> None:
                async with gate:
                    try:
                        held[i] = await pause(http, server.endpoint, f"delete {names[i]}")
                    except StepError as exc:
                        pause_errors[exc.kind] += 1

            start = time.perf_counter()
            await asyncio.gather(*(hold(i) for i in range(n)))
            pause_seconds = time.perf_counter() - start
            await asyncio.sleep(settle)
            rss_paused = server.rss_mb()

            async def decide(p: Paused) -> None:
                async with gate:
                    try:
                        await approve(http, server.endpoint, p)
                    except StepError as exc:
                        decision_errors[exc.kind] += 1

            ready = [p for p in held if p is not None]
            start = time.perf_counter()
            await asyncio.gather(*(decide(p) for p in ready))
            decision_seconds = time.perf_counter() - start
    runs = journal_runs(tools.journal)
    decided = len(ready) - sum(decision_errors.values())
    return {
        "n": n,
        "concurrency": concurrency,
        "paused": len(ready),
        "pause_errors": dict(pause_errors),
        "pause_seconds": round(pause_seconds, 2),
        "rss_at_rest_mb": round(rss_before, 1),
        "rss_paused_mb": round(rss_paused, 1),
        "decisions": decided,
        "decision_errors": dict(decision_errors),
        "decisions_seconds": round(decision_seconds, 3),
        "decisions_per_second": round(decided / decision_seconds, 2) if decision_seconds > 0 else None,
        "tool_ran_once": sum(1 for p in names if runs[p] == 1),
        "tool_ran_twice": sum(1 for p in names if runs[p] > 1),
    }


def cold_start(server: Server, settle: float = 1.0) -> dict[str, float]:
    """Seconds from spawn to ready, and RSS at rest ``settle`` seconds later."""
    time.sleep(settle)
    return {"ready_seconds": round(server.ready_seconds, 3), "rss_at_rest_mb": round(server.rss_mb(), 1)}
