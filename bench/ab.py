"""An interleaved A/B of two source trees of the runtime: is a change faster, measured so that noise hits both alike.

Both trees are served at once (``gatehouse-runtime serve`` as the bench's default target: authentication on, sqlite
state), each with its tree first on ``PYTHONPATH``, against one demo-tools server; one client alternates between them:

- **latency**: a pause and its approval on A, then on B (the order flips every round): p50 of each, and each server's
  CPU per pause+resume (psutil, the server process only);
- **decision paths** (``--paths N``): bar 4's REST/A2A ratio: N conversations per tree and channel, each paused over
  A2A and approved over A2A or REST (``bench.scenarios.decision_step``: timed to the tool having run, from the
  demo-tools journal), the trees and the channels alternating: p50 of each and REST over A2A;
- **throughput**: rounds of ``--decisions`` held conversations decided at concurrency 20, on A then B (order
  flipping): decisions/s of each round, the median of the rounds.

    python -m bench.ab --a /tmp/tree-before --b . --pairs 300 --rounds 4

A tree is a checkout of this repository (``git worktree add /tmp/tree-before HEAD``, or ``git archive HEAD | tar -x``).
The last line is a one-line verdict for a commit message.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import secrets
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil

from bench.gatehouse_adapter import GatehouseTarget
from bench.protocols import approve, pause
from bench.scenarios import JournalClock, _decide, _hold, client, decision_step
from bench.targets import Server, running, tools_server

CONCURRENCY = 20


@dataclass
class _Side:
    name: str
    server: Server
    pauses: list[float] = field(default_factory=list)
    resumes: list[float] = field(default_factory=list)
    cpu: float = 0.0
    pairs: int = 0
    rates: list[float] = field(default_factory=list)
    paths: dict[str, list[float]] = field(default_factory=lambda: {"a2a": [], "rest": []})

    @property
    def proc(self) -> psutil.Process:
        return psutil.Process(self.server.pid)

    def cpu_seconds(self) -> float:
        return float(sum(self.proc.cpu_times()[:2]))


@contextlib.contextmanager
def _served(tree: Path, name: str, work: Path, tools_url: str) -> Iterator[Server]:
    target = GatehouseTarget(key=f"ab-{name}", label=f"tree {name}", api_token=secrets.token_urlsafe(32))
    env = {"PYTHONPATH": os.pathsep.join([str(tree.resolve()), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    with running(target, work, tools_url, f"ab-{name}", env_extra=env) as server:
        yield server


async def _pair(side: _Side, http: httpx.AsyncClient, text: str) -> None:
    start = time.perf_counter()
    paused = await pause(http, side.server.endpoint, text)
    middle = time.perf_counter()
    await approve(http, side.server.endpoint, paused)
    side.pauses.append(middle - start)
    side.resumes.append(time.perf_counter() - middle)


async def _latency(sides: list[_Side], touch: Callable[[list[str]], None], pairs: int, warmup: int) -> None:
    async with client() as http:
        for i in range(warmup + pairs):
            order = sides if i % 2 == 0 else list(reversed(sides))
            for side in order:
                name = f"ab-{side.name}-lat-{i}.txt"
                touch([name])
                if i == warmup:
                    side.pauses.clear()
                    side.resumes.clear()
                    side.cpu = -side.cpu_seconds()
                await _pair(side, http, f"delete {name}")
        for side in sides:
            side.cpu += side.cpu_seconds()
            side.pairs = pairs


async def _paths(sides: list[_Side], touch: Callable[[list[str]], None], journal: Path, n: int, warmup: int) -> None:
    ran_at = JournalClock(journal, poll=0.002).ran_at
    async with client() as http:
        for i in range(warmup + n):
            for side in sides if i % 2 == 0 else list(reversed(sides)):
                for channel in ("a2a", "rest") if (i // 2) % 2 == 0 else ("rest", "a2a"):
                    name = f"ab-{side.name}-path-{channel}-{i}.txt"
                    touch([name])
                    to_tool, _ = await decision_step(http, side.server, ran_at, name, channel)
                    if i >= warmup:
                        side.paths[channel].append(to_tool)


async def _round(side: _Side, http: httpx.AsyncClient, names: list[str]) -> float:
    """Hold one conversation per name, then decide them all at concurrency 20: decisions per second."""
    held, errors = await _hold(http, side.server.endpoint, names, CONCURRENCY)
    decided, decision_errors, seconds = await _decide(http, side.server.endpoint, held, CONCURRENCY)
    if errors or decision_errors:
        raise RuntimeError(f"tree {side.name}: pauses failed {dict(errors)}, decisions failed {dict(decision_errors)}")
    return decided / seconds


async def _throughput(sides: list[_Side], touch: Callable[[list[str]], None], rounds: int, n: int) -> None:
    async with client(CONCURRENCY) as http:
        for r in range(rounds):
            for side in sides if r % 2 == 0 else list(reversed(sides)):
                names = [f"ab-{side.name}-tp-{r}-{i}.txt" for i in range(n)]
                touch(names)
                side.rates.append(await _round(side, http, names))


def _ms(values: list[float]) -> float:
    return statistics.median(values) * 1000 if values else float("nan")


async def main_async(args: argparse.Namespace) -> int:
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()[0]
    with tools_server(work) as tools, _served(Path(args.a), "A", work, tools.url) as a, \
            _served(Path(args.b), "B", work, tools.url) as b:
        sides = [_Side("A", a), _Side("B", b)]
        await _latency(sides, tools.touch, args.pairs, args.warmup)
        if args.paths:
            await _paths(sides, tools.touch, tools.journal, args.paths, min(args.warmup, 10))
        if args.rounds:
            await _throughput(sides, tools.touch, args.rounds, args.decisions)
    print(f"load average at start {load:.2f}; A = {args.a}, B = {args.b}")
    for side in sides:
        rate = f", decisions/s {statistics.median(side.rates):.1f} ({', '.join(f'{r:.0f}' for r in side.rates)})" \
            if side.rates else ""
        paths = (f", decision to tool ran p50 A2A {_ms(side.paths['a2a']):.2f} ms, REST {_ms(side.paths['rest']):.2f} ms "
                 f"(REST/A2A {_ms(side.paths['rest']) / _ms(side.paths['a2a']):.3f})") if side.paths["a2a"] else ""
        print(f"{side.name}: pause p50 {_ms(side.pauses):.2f} ms, resume p50 {_ms(side.resumes):.2f} ms, "
              f"server CPU {side.cpu / max(side.pairs, 1) * 1000:.2f} ms per pause+resume{rate}{paths}")
    a_side, b_side = sides
    verdict = (f"interleaved A/B ({args.pairs} pairs, load {load:.2f}): pause {_ms(a_side.pauses):.2f} -> "
               f"{_ms(b_side.pauses):.2f} ms, resume {_ms(a_side.resumes):.2f} -> {_ms(b_side.resumes):.2f} ms, CPU/pair "
               f"{a_side.cpu / max(a_side.pairs, 1) * 1000:.2f} -> {b_side.cpu / max(b_side.pairs, 1) * 1000:.2f} ms")
    if a_side.rates and b_side.rates:
        verdict += f", decisions/s {statistics.median(a_side.rates):.1f} -> {statistics.median(b_side.rates):.1f}"
    if args.paths:
        verdict += (f", REST/A2A decision to tool ran {_ms(a_side.paths['rest']) / _ms(a_side.paths['a2a']):.3f} -> "
                    f"{_ms(b_side.paths['rest']) / _ms(b_side.paths['a2a']):.3f}")
    print(verdict)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.ab", description=__doc__.splitlines()[0])
    p.add_argument("--a", required=True, help="the tree before (a checkout of this repository)")
    p.add_argument("--b", default=".", help="the tree after (default: this one)")
    p.add_argument("--pairs", type=int, default=300, help="pause+resume pairs per tree (default 300)")
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--paths", type=int, default=0,
                   help="decisions per tree and channel timed to the tool having run, A2A vs REST (bar 4; default 0: none)")
    p.add_argument("--rounds", type=int, default=4, help="throughput rounds per tree (0: none)")
    p.add_argument("--decisions", type=int, default=200, help="decisions per throughput round (default 200)")
    p.add_argument("--work", default=f"/tmp/gatehouse-ab-{os.getpid()}")
    return asyncio.run(main_async(p.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
