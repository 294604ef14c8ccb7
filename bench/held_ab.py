"""Interleaved RSS with N paused of two source trees of the runtime: is a memory change lighter, measured so that a
shared machine's noise hits both sides alike.

Each round starts ``gatehouse-runtime serve`` from tree A and from tree B (the order alternating every round), each
with a fresh state directory against one demo-tools server, exactly as ``bench.run``'s held section starts and fills
them (``bench.targets.running``, the default target: authentication on; ``bench.scenarios._hold``: ``--paused`` new
conversations paused at ``--concurrency``). Per start: RSS at rest (half a second after ready, as the held section
reads it) and RSS one second after the last pause. Printed: the median of each side and B - A.

    python -m bench.held_ab --a /tmp/tree-before --b . --rounds 4

``--trace DIR`` instead starts tree B once, turns ``tracemalloc`` on (25 frames) at rest and writes, at rest and
after the fill, ``/proc/self/status`` and pymalloc's statistics (``DIR/rest.*``, ``DIR/paused.*``) and after the fill
a snapshot of every allocation made since rest and still alive, then prints the top ones by line and by traceback:
what the paused conversations keep. The probe is a
``sitecustomize`` module put on the server's path (bench-only: nothing in the runtime knows of it); the server dumps
on ``SIGUSR1``. RSS under ``tracemalloc`` is not the product's: the traced run is for where, not how much.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import signal
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

from bench.cold_ab import _tree_env
from bench.gatehouse_adapter import GatehouseTarget
from bench.scenarios import _hold, _names, client
from bench.targets import running, tools_server

PROBE = '''
import os, signal, sys, tracemalloc

def _dump(signum, frame):
    import gc, io
    out = os.environ["GATEHOUSE_PROBE_OUT"]
    with open("/proc/self/status") as f:
        rss = next(line for line in f if line.startswith("VmRSS"))
    traced = tracemalloc.get_traced_memory()[0]
    counts = gc.get_count()
    gc.set_debug(gc.DEBUG_SAVEALL)
    found = gc.collect()  # what is garbage at this moment, not yet collected (the serving thresholds are high)
    gc.set_debug(0)
    import collections
    kinds = collections.Counter(type(o).__qualname__ for o in gc.garbage)
    where = collections.Counter(
        f"{o.f_code.co_filename.rsplit('site-packages/', 1)[-1]}:{o.f_code.co_name}" for o in gc.garbage
        if type(o).__name__ == "frame")
    coros = collections.Counter(
        getattr(o, "__qualname__", "?") for o in gc.garbage if type(o).__name__ in ("coroutine", "async_generator"))
    gc.garbage.clear()
    with open(out + ".gc", "w") as g:
        g.write(f"before the collection: {rss.strip()}, young counts {counts}; a full collection found {found} "
                f"objects, {(traced - tracemalloc.get_traced_memory()[0]) / 1e6:.2f} MB traced\\n")
        g.write(f"  by type: {kinds.most_common(25)}\\n  frames: {where.most_common(25)}\\n"
                f"  coroutines: {coros.most_common(15)}\\n")
    if tracemalloc.is_tracing():
        tracemalloc.take_snapshot().dump(out + ".snapshot")
    else:  # the first dump, at rest: from here on every allocation still alive at the next dump is traced
        tracemalloc.start(int(os.environ.get("GATEHOUSE_PROBE_FRAMES", "25")))
    with open("/proc/self/status") as f, open(out + ".status", "w") as g:
        g.write(f.read())
    buf = io.StringIO()
    err, sys.stderr = sys.stderr, buf
    try:
        sys._debugmallocstats()
    finally:
        sys.stderr = err
    with open(out + ".pymalloc", "w") as g:
        g.write(buf.getvalue())
    open(out + ".done", "w").close()

signal.signal(signal.SIGUSR1, _dump)
'''


async def _fill(server, names: list[str], concurrency: int) -> int:  # type: ignore[no-untyped-def]
    async with client(concurrency) as http:
        paused, errors = await _hold(http, server.endpoint, names, concurrency)
    if errors:
        print(f"  pause errors: {dict(errors)}", file=sys.stderr)
    return len(paused)


def _probe(server, out: Path) -> None:  # type: ignore[no-untyped-def]
    done = Path(str(out) + ".done")
    os.kill(server.pid, signal.SIGUSR1)
    deadline = time.monotonic() + 120
    while not done.exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"no probe dump at {out}")
        time.sleep(0.2)


def _trace(tree: Path, work: Path, tools, n: int, concurrency: int, out: Path) -> None:  # type: ignore[no-untyped-def]
    out.mkdir(parents=True, exist_ok=True)
    probe_dir = work / "probe"
    probe_dir.mkdir(parents=True, exist_ok=True)
    (probe_dir / "sitecustomize.py").write_text(PROBE)
    env = _tree_env(tree)
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(probe_dir)])
    target = GatehouseTarget(key="held-trace", label="tree B (traced)", api_token=secrets.token_urlsafe(32))
    names = _names("held-trace", "held", n)
    tools.touch(names)
    for stage in ("rest", "paused"):
        for suffix in ("snapshot", "status", "pymalloc", "gc", "done"):
            Path(f"{out / stage}.{suffix}").unlink(missing_ok=True)
    # The server dumps to one fixed name (its environment is set at spawn); each stage's files are renamed after.
    env["GATEHOUSE_PROBE_OUT"] = str(out / "stage")
    with running(target, work, tools.url, "held-trace", env_extra=env) as server:
        time.sleep(0.5)
        _probe(server, out / "stage")
        for suffix in ("status", "pymalloc", "gc"):
            Path(f"{out / 'stage'}.{suffix}").rename(f"{out / 'rest'}.{suffix}")
        Path(f"{out / 'stage'}.done").unlink()
        paused = asyncio.run(_fill(server, names, concurrency))
        time.sleep(1.0)
        _probe(server, out / "stage")
        for suffix in ("snapshot", "status", "pymalloc", "gc"):
            Path(f"{out / 'stage'}.{suffix}").rename(f"{out / 'paused'}.{suffix}")
    print(f"{paused} paused")
    after = tracemalloc.Snapshot.load(str(out / "paused.snapshot"))
    stats = after.statistics("lineno")
    total = sum(s.size for s in stats)
    print(f"Python memory allocated since rest, alive: {total / 1e6:.2f} MB ({total / max(paused, 1):.0f} B per paused "
          f"conversation)")
    for s in stats[:30]:
        print(f"{s.size / 1e3:9.1f} kB {s.count:7d}  {s.traceback[0]}")
    print("\nby traceback (top 12):")
    for s in after.statistics("traceback")[:12]:
        print(f"{s.size / 1e3:9.1f} kB {s.count:7d}")
        for line in s.traceback.format(limit=12):
            print("    " + line)
    for stage in ("rest", "paused"):
        status = Path(f"{out / stage}.status").read_text()
        rss = next(line for line in status.splitlines() if line.startswith("VmRSS"))
        print(f"{stage}: {rss}; {Path(f'{out / stage}.gc').read_text().strip()}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.held_ab", description=__doc__.splitlines()[0])
    p.add_argument("--a", help="the tree before (a checkout of this repository)")
    p.add_argument("--b", default=".", help="the tree after (default: this one)")
    p.add_argument("--rounds", type=int, default=4, help="fills per side (default 4)")
    p.add_argument("--paused", type=int, default=1000, help="conversations paused per fill (default 1,000)")
    p.add_argument("--concurrency", type=int, default=20, help="pauses in flight (default 20, as bench.run's held)")
    p.add_argument("--env-b", action="append", default=[], metavar="KEY=VALUE",
                   help="set in tree B's environment only (e.g. an allocator setting to try); repeatable")
    p.add_argument("--trace", type=Path, help="one traced fill of tree B; the snapshots and their diff here")
    p.add_argument("--work", default=f"/tmp/gatehouse-held-ab-{os.getpid()}")
    args = p.parse_args(argv)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    with tools_server(work) as tools:
        if args.trace:
            _trace(Path(args.b), work, tools, args.paused, args.concurrency, args.trace)
            return 0
        if not args.a:
            p.error("--a is required without --trace")
        token = secrets.token_urlsafe(32)
        sides = [("A", _tree_env(Path(args.a))),
                 ("B", {**_tree_env(Path(args.b)), **dict(kv.split("=", 1) for kv in args.env_b)})]
        rest: dict[str, list[float]] = {"A": [], "B": []}
        held: dict[str, list[float]] = {"A": [], "B": []}
        loads = []
        for i in range(args.rounds):
            loads.append(os.getloadavg()[0])
            for name, env in sides[i % 2:] + sides[:i % 2]:
                target = GatehouseTarget(key=f"held-{name}", label=f"tree {name}", api_token=token)
                names = _names(f"held-{name}-{i}", "held", args.paused)
                tools.touch(names)
                with running(target, work, tools.url, f"held-{name}-{i}", env_extra=env) as server:
                    time.sleep(0.5)
                    rest[name].append(server.rss_mb())
                    paused = asyncio.run(_fill(server, names, args.concurrency))
                    time.sleep(1.0)
                    held[name].append(server.rss_mb())
                print(f"round {i + 1} {name}: {paused} paused, RSS {rest[name][-1]:.1f} → {held[name][-1]:.1f} MB",
                      file=sys.stderr, flush=True)
    for name in ("A", "B"):
        print(f"{name}: RSS at rest p50 {statistics.median(rest[name]):.1f} MB, with {args.paused:,} paused p50 "
              f"{statistics.median(held[name]):.1f} MB (each: {', '.join(f'{v:.1f}' for v in held[name])})")
    print(f"B - A: at rest {statistics.median(rest['B']) - statistics.median(rest['A']):+.1f} MB, paused "
          f"{statistics.median(held['B']) - statistics.median(held['A']):+.1f} MB")
    print(f"load average (1 min) at each round's start: {min(loads):.2f}-{max(loads):.2f}, {args.rounds} rounds, "
          f"interleaved (order alternating)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
