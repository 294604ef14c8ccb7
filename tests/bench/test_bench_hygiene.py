"""Bench hygiene's arithmetic (``bench/hygiene.py``): the machine's busy ticks from ``/proc/stat``, minus the bench's
own process tree, per core, against a quarter of a core. Pure functions, fabricated inputs."""

from __future__ import annotations

import pytest

from bench import hygiene

STAT = """cpu  1000 50 300 8000 200 10 20 5 0 0
cpu0 500 25 150 4000 100 5 10 3 0 0
cpu1 500 25 150 4000 100 5 10 2 0 0
intr 12345
"""


def test_busy_ticks_count_everything_but_idle_and_iowait() -> None:
    busy, total = hygiene.busy_ticks(STAT)
    assert busy == 1000 + 50 + 300 + 10 + 20 + 5  # user nice system irq softirq steal; guest already in user
    assert total == busy + 8000 + 200
    assert hygiene.busy_ticks("cpu  1 2 3 4\n") == (6, 10)  # an old kernel's four fields
    with pytest.raises(ValueError):
        hygiene.busy_ticks("cpu0 1 2 3 4\n")


def test_others_cores_subtracts_the_benchs_own_tree() -> None:
    # 2 s, 100 ticks/s: the machine was busy 300 ticks = 3 CPU seconds = 1.5 cores; the bench used 2.5 of them.
    before, after = {1: 10.0, 2: 5.0}, {1: 11.0, 2: 6.5}
    assert hygiene.others_cores(1000, 1300, before, after, 2.0, 100.0) == pytest.approx(0.25)
    # a server started during the sample: all its CPU is the bench's
    assert hygiene.others_cores(1000, 1300, before, {**after, 3: 0.5}, 2.0, 100.0) == pytest.approx(0.0)
    # a process gone by the end is not subtracted: the machine can only look busier
    assert hygiene.others_cores(1000, 1300, before, {1: 11.0}, 2.0, 100.0) == pytest.approx(1.0)
    # never negative (ticks and CPU seconds are sampled a moment apart)
    assert hygiene.others_cores(1000, 1100, {1: 0.0}, {1: 5.0}, 1.0, 100.0) == 0.0
    with pytest.raises(ValueError):
        hygiene.others_cores(0, 0, {}, {}, 0.0, 100.0)


def test_more_than_a_quarter_of_a_core_is_noisy() -> None:
    assert hygiene.verdict(0.25) == "quiet"
    assert hygiene.verdict(0.26) == "noisy"
    assert hygiene.verdict(0.1, threshold=0.05) == "noisy"
    samples = {"floors": {"verdict": "quiet"}, "latency": {"verdict": "noisy"}, "held": {"verdict": "unknown"}}
    assert hygiene.noisy_sections(samples, ("floors", "latency", "held", "backlog")) == ["latency"]


def test_sample_without_seconds_judges_nothing() -> None:
    sample = hygiene.sample(0)
    assert sample["verdict"] == "unknown" and sample["others_cores"] is None


def test_sample_reads_this_machine() -> None:
    sample = hygiene.sample(0.05)
    if sample["verdict"] != "unknown":  # Linux: /proc/stat
        assert sample["verdict"] in ("quiet", "noisy") and sample["others_cores"] >= 0 and sample["own_cores"] >= 0
