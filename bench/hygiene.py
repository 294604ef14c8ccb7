"""Bench hygiene: is the machine quiet enough to judge a section?

Just before each section the bench samples the machine's CPU use for a few seconds from ``/proc/stat`` (not the
1-minute load average, which still carries the bench's own previous section), subtracts what the bench's own
process tree used meanwhile (the bench process, its threads and every process it started: the servers under test,
the demo-tools server; psutil), and marks the section ``noisy`` when the other processes used more than
:data:`NOISY_CORES` of a core. A noisy section's rows and bars are reported ``noisy``: no pass, no fail.

The arithmetic is pure (:func:`busy_ticks`, :func:`others_cores`, :func:`verdict`); :func:`sample` reads the clock,
``/proc/stat`` and psutil.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["NOISY_CORES", "QUIET_HINT", "busy_ticks", "noisy_sections", "others_cores", "own_cpu_seconds", "sample",
           "verdict"]

NOISY_CORES = 0.25  # other processes using more than this many cores make a section noisy
PROC_STAT = Path("/proc/stat")
QUIET_HINT = ("for a quiet run, stop other work on this machine (test runs, builds, browsers, other benches) until "
              "`cat /proc/loadavg` stays under 1 and `top` shows nothing else busy, then run `make bench-quick` (or "
              "one section alone, e.g. `python -m bench.run --only backlog`) again")


def busy_ticks(stat_text: str) -> tuple[int, int]:
    """``(busy, total)`` clock ticks of all CPUs from the text of ``/proc/stat`` (its first ``cpu`` line).

    Busy is everything but ``idle`` and ``iowait`` (user, nice, system, irq, softirq, steal; guest time is already
    counted in user and nice, so it is not added again)."""
    for line in stat_text.splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            values = [int(x) for x in fields[1:]]
            values += [0] * (8 - len(values))
            user, nice, system, idle, iowait, irq, softirq, steal = values[:8]
            busy = user + nice + system + irq + softirq + steal
            return busy, busy + idle + iowait
    raise ValueError("no aggregate 'cpu' line in /proc/stat")


def others_cores(busy_before: int, busy_after: int, own_before: Mapping[int, float], own_after: Mapping[int, float],
                 wall_seconds: float, ticks_per_second: float) -> float:
    """Cores the machine's other processes used on average over ``wall_seconds``.

    ``busy_*`` are the machine's busy ticks (:func:`busy_ticks`) at either end; ``own_*`` map each pid of the
    bench's process tree to its CPU seconds so far (user + system). A pid only in ``own_after`` started during the
    sample: all its CPU seconds count as the bench's. A pid gone by the end is not subtracted (its last CPU seconds
    are unknown), which can only make the machine look busier, never quieter. Never below 0."""
    if wall_seconds <= 0:
        raise ValueError("wall_seconds must be positive")
    machine = (busy_after - busy_before) / ticks_per_second
    own = sum(max(0.0, cpu - own_before.get(pid, 0.0)) for pid, cpu in own_after.items())
    return max(0.0, (machine - own) / wall_seconds)


def verdict(cores: float, threshold: float = NOISY_CORES) -> str:
    """``"noisy"`` when other processes used more than ``threshold`` cores, else ``"quiet"``."""
    return "noisy" if cores > threshold else "quiet"


def noisy_sections(samples: Mapping[str, Mapping[str, Any]], sections: tuple[str, ...]) -> list[str]:
    """Which of ``sections`` were sampled noisy (a section never sampled is not noisy: it did not run)."""
    return [s for s in sections if (samples.get(s) or {}).get("verdict") == "noisy"]


def own_cpu_seconds() -> dict[int, float]:
    """CPU seconds (user + system) of this process and every process below it, by pid."""
    import psutil

    me = psutil.Process()
    out: dict[int, float] = {}
    for proc in [me, *me.children(recursive=True)]:
        try:
            t = proc.cpu_times()
            out[proc.pid] = t.user + t.system
        except psutil.Error:
            pass
    return out


def sample(seconds: float, threshold: float = NOISY_CORES) -> dict[str, Any]:
    """Sample the machine for ``seconds`` (nothing of the bench should run meanwhile) and judge it.

    ``{"seconds", "machine_cores", "own_cores", "others_cores", "threshold_cores", "verdict"}``; without
    ``/proc/stat`` (not Linux) or with ``seconds`` <= 0 the verdict is ``"unknown"`` (judged as quiet)."""
    if seconds <= 0 or not PROC_STAT.exists():
        return {"seconds": 0.0, "machine_cores": None, "own_cores": None, "others_cores": None,
                "threshold_cores": threshold, "verdict": "unknown"}
    hz = float(os.sysconf("SC_CLK_TCK"))
    own_before = own_cpu_seconds()
    busy_before, _ = busy_ticks(PROC_STAT.read_text())
    start = time.monotonic()
    time.sleep(seconds)
    busy_after, _ = busy_ticks(PROC_STAT.read_text())
    wall = time.monotonic() - start
    own_after = own_cpu_seconds()
    others = others_cores(busy_before, busy_after, own_before, own_after, wall, hz)
    machine = (busy_after - busy_before) / hz / wall
    own = sum(max(0.0, cpu - own_before.get(pid, 0.0)) for pid, cpu in own_after.items()) / wall
    return {"seconds": round(wall, 2), "machine_cores": round(machine, 3), "own_cores": round(own, 3),
            "others_cores": round(others, 3), "threshold_cores": threshold, "verdict": verdict(others, threshold)}
