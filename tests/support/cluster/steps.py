"""The steps the real-cluster tests take again and again: apply documents with ``kubectl``, wait for a condition,
find a Ready pod."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any, TypeVar

from tests.support.cluster.launcher import Cluster

__all__ = ["apply", "ready_pod", "ready_pods", "wait"]

T = TypeVar("T")


def wait(what: str, check: Callable[[], T], timeout: float = 60, every: float = 0.3) -> T:
    """``check()``'s first truthy value; an AssertionError naming ``what`` once ``timeout`` seconds have passed."""
    deadline = time.monotonic() + timeout
    while not (value := check()):
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(every)
    return value


def apply(cluster: Cluster, *docs: dict[str, Any]) -> None:
    proc = cluster.kubectl("apply", "-f", "-", stdin="\n---\n".join(json.dumps(d) for d in docs))
    assert proc.returncode == 0, proc.stderr


def ready_pods(cluster: Cluster, namespace: str, selector: str, *, ready: bool = True) -> list[dict[str, Any]]:
    """The pods matching ``selector`` that are not being deleted and (with ``ready``) are Ready."""
    got = cluster.kubectl("get", "pods", "-n", namespace, "-l", selector, "-o", "json")
    pods = json.loads(got.stdout)["items"] if got.returncode == 0 else []
    return [pod for pod in pods if pod["metadata"].get("deletionTimestamp") is None and (not ready or {
        c["type"]: c["status"] for c in pod.get("status", {}).get("conditions", [])}.get("Ready") == "True")]


def ready_pod(cluster: Cluster, namespace: str, selector: str, *, ready: bool = True) -> dict[str, Any] | None:
    """The first of :func:`ready_pods`; None while there is none."""
    return next(iter(ready_pods(cluster, namespace, selector, ready=ready)), None)
