"""Interleaved cold starts of two source trees of the runtime (and plain ADK beside them): is a start-up change
quicker and lighter, measured so that a shared machine's noise hits every side alike.

Each round starts ``gatehouse-runtime serve`` from tree A, from tree B and ``python -m bench.adk_baseline`` (durable,
the bench's ``adk_durable``) one after the other, the order rotating every round, each with a fresh state directory
against one demo-tools server, exactly as ``bench.run`` starts them (``bench.targets.running``; the Gatehouse sides
as the default target: authentication on). Per start: seconds from spawn to ready, and RSS ``--settle`` seconds
later, and the CPU seconds the server used to get to ready (user + system: less moved by other processes than the
wall time on a busy machine). Printed: the median of each side, B/A and B/ADK (the medians' ratios) and the
machine's load average.

    python -m bench.cold_ab --a /tmp/tree-before --b . --rounds 10

A tree is a checkout of this repository (``git archive HEAD | tar -x -C /tmp/tree-before``). ``--modules FILE``
writes, once, the modules tree B's runtime has imported when it is ready (``PYTHONPROFILEIMPORTTIME``'s log, sorted
by cumulative time): what a profile of start-up starts from.
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import sys
import time
from pathlib import Path

import psutil

from bench.gatehouse_adapter import GatehouseTarget
from bench.targets import AdkTarget, Target, running, tools_server


def _tree_env(tree: Path) -> dict[str, str]:
    return {"PYTHONPATH": os.pathsep.join([str(tree.resolve()), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}


def _start(target: Target, work: Path, tools_url: str, name: str, env: dict[str, str],
           settle: float) -> tuple[float, float, float]:
    """Seconds to ready, the CPU seconds the server spent to get there, RSS at rest."""
    with running(target, work, tools_url, name, env_extra=env) as server:
        times = psutil.Process(server.pid).cpu_times()
        cpu = times.user + times.system
        time.sleep(settle)
        return server.ready_seconds, cpu, server.rss_mb()


def _modules(tree: Path, work: Path, tools_url: str, out: Path) -> None:
    """One start of tree B with the import-time profile on; its log, sorted by cumulative microseconds, to ``out``."""
    target = GatehouseTarget(key="cold-modules", label="tree B (profiled)", api_token=secrets.token_urlsafe(32))
    env = {**_tree_env(tree), "PYTHONPROFILEIMPORTTIME": "1"}
    with running(target, work, tools_url, "cold-modules", env_extra=env) as server:
        log = server.log
    rows = []
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("import time:") and "self [us]" not in line:
            _, self_us, cumulative, name = (part.strip() for part in line.replace("import time:", "|").split("|"))
            rows.append((int(cumulative), int(self_us), name))
    rows.sort(reverse=True)
    out.write_text("".join(f"{c:>9} {s:>9} {n}\n" for c, s, n in rows))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.cold_ab", description=__doc__.splitlines()[0])
    p.add_argument("--a", required=True, help="the tree before (a checkout of this repository)")
    p.add_argument("--b", default=".", help="the tree after (default: this one)")
    p.add_argument("--rounds", type=int, default=10, help="cold starts per side (default 10)")
    p.add_argument("--settle", type=float, default=1.0, help="seconds idle before RSS is read (default 1)")
    p.add_argument("--no-adk", action="store_true", help="leave plain ADK out")
    p.add_argument("--modules", type=Path, help="write tree B's import profile at ready here")
    p.add_argument("--work", default=f"/tmp/gatehouse-cold-ab-{os.getpid()}")
    args = p.parse_args(argv)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    sides: list[tuple[str, Target, dict[str, str]]] = [
        ("A", GatehouseTarget(key="cold-a", label="tree A", api_token=token), _tree_env(Path(args.a))),
        ("B", GatehouseTarget(key="cold-b", label="tree B", api_token=token), _tree_env(Path(args.b))),
    ]
    if not args.no_adk:
        sides.append(("ADK", AdkTarget(key="adk_durable", label="ADK durable", durable=True), {}))
    ready: dict[str, list[float]] = {name: [] for name, _, _ in sides}
    cpu: dict[str, list[float]] = {name: [] for name, _, _ in sides}
    rss: dict[str, list[float]] = {name: [] for name, _, _ in sides}
    loads = []
    with tools_server(work) as tools:
        if args.modules:
            _modules(Path(args.b), work, tools.url, args.modules)
        for i in range(args.rounds):
            k = i % len(sides)
            loads.append(os.getloadavg()[0])
            for name, target, env in sides[k:] + sides[:k]:
                seconds, used, mb = _start(target, work, tools.url, f"cold-{name}-{i}", env, args.settle)
                ready[name].append(seconds)
                cpu[name].append(used)
                rss[name].append(mb)
            print(f"round {i + 1}: " + ", ".join(f"{n} {ready[n][-1]:.2f} s (CPU {cpu[n][-1]:.2f} s) {rss[n][-1]:.0f} MB"
                                                 for n, _, _ in sides),
                  file=sys.stderr, flush=True)
    med = {n: (statistics.median(ready[n]), statistics.median(rss[n]), statistics.median(cpu[n])) for n in ready}
    for n, (s, mb, used) in med.items():
        print(f"{n:>3}: ready p50 {s:.3f} s (min {min(ready[n]):.3f}), CPU to ready p50 {used:.3f} s "
              f"(min {min(cpu[n]):.3f}), RSS at rest p50 {mb:.1f} MB")

    def ratios(x: str, y: str) -> str:
        return (f"{x}/{y}: ready {med[x][0] / med[y][0]:.3f}, CPU to ready {med[x][2] / med[y][2]:.3f}, "
                f"RSS {med[x][1] / med[y][1]:.3f}")

    print(ratios("B", "A"))
    if "ADK" in med:
        print(f"{ratios('A', 'ADK')}; {ratios('B', 'ADK')}")
    print(f"load average (1 min) at each round's start: {min(loads):.2f}-{max(loads):.2f}, {args.rounds} rounds, "
          f"interleaved (order rotating)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
