"""Reading a process's Prometheus ``/metrics`` in tests: each sample by name, summed over its labels."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

__all__ = ["scrape"]


def scrape(port: int) -> dict[str, float]:
    """Each sample of ``http://127.0.0.1:<port>/metrics`` by name (summed over labels); empty while nothing answers
    (a process starting, stopped or killed)."""
    try:
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2, trust_env=False).text
    except httpx.HTTPError:
        return {}
    samples: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[sample.name] = samples.get(sample.name, 0.0) + sample.value
    return samples
