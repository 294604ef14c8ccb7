"""The Deployment controller's decisions, as pure functions: which pods to start and stop, and the status to write.

There are no ReplicaSets: a pod carries its template's hash (label ``pod-template-hash``, as the real controller
sets it), pods of the current template are "new", the rest "old". :func:`plan` is one step of a rollout, called again
whenever anything changes:

- ``Recreate``: stop every old pod; start new ones only once no old pod is left (stopped, not just stopping);
- ``RollingUpdate`` (``maxSurge``/``maxUnavailable``, numbers or percentages, default 25%/25% as in Kubernetes;
  both 0 is taken as surge 1): start new pods while the total stays within ``replicas + maxSurge``; stop old pods
  (unavailable ones first) while the available pods stay at least ``replicas - maxUnavailable``. With surge 1 and
  unavailable 0 that is: start one, wait until it is Ready, stop one old, and so on;
- scaling: extra new pods go, not-ready and youngest first.

``minReadySeconds`` delays "available" after Ready. ``paused``, ``progressDeadlineSeconds`` and revision history are
not emulated. :func:`deployment_status` is what ``kubectl rollout status`` and the operator read.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Plan", "PodView", "deployment_status", "plan", "rolling_limits", "template_hash"]


def template_hash(template: Mapping[str, Any]) -> str:
    """A stable 10-character hash of a pod template (what ``pod-template-hash`` holds)."""
    digest = hashlib.sha256(json.dumps(template, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    return digest[:10]


@dataclass(frozen=True)
class PodView:
    """What the controller needs to know about one pod."""

    name: str
    hash: str
    ready: bool = False
    available: bool = False
    terminating: bool = False
    created: float = 0.0


@dataclass(frozen=True)
class Plan:
    start: int = 0
    stop: tuple[str, ...] = ()


def _scaled(value: Any, replicas: int, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        exact = replicas * float(value[:-1]) / 100
        return math.ceil(exact) if round_up else math.floor(exact)
    return int(value)


def rolling_limits(spec: Mapping[str, Any]) -> tuple[int, int]:
    """(maxSurge, maxUnavailable) as pod counts."""
    replicas = int(spec.get("replicas", 1) if spec.get("replicas") is not None else 1)
    rolling = (spec.get("strategy") or {}).get("rollingUpdate") or {}
    surge = _scaled(rolling.get("maxSurge", "25%"), replicas, round_up=True)
    unavailable = _scaled(rolling.get("maxUnavailable", "25%"), replicas, round_up=False)
    if surge == 0 and unavailable == 0:
        surge = 1
    return surge, unavailable


def _order_to_stop(pods: Sequence[PodView]) -> list[PodView]:
    """Not-ready first, then the youngest (as the ReplicaSet controller picks)."""
    return sorted(pods, key=lambda p: (p.ready, -p.created))


def plan(spec: Mapping[str, Any], current: str, pods: Sequence[PodView]) -> Plan:
    desired = int(spec.get("replicas", 1) if spec.get("replicas") is not None else 1)
    live = [p for p in pods if not p.terminating]
    new = [p for p in live if p.hash == current]
    old = [p for p in live if p.hash != current]
    if len(new) > desired:
        return Plan(stop=tuple(p.name for p in _order_to_stop(new)[: len(new) - desired]))
    strategy = (spec.get("strategy") or {}).get("type", "RollingUpdate")
    if strategy == "Recreate":
        if old:
            return Plan(stop=tuple(p.name for p in old))
        if any(p.terminating and p.hash != current for p in pods):
            return Plan()  # wait until the old pods are gone
        return Plan(start=desired - len(new))
    if not old:
        return Plan(start=desired - len(new))
    surge, unavailable = rolling_limits(spec)
    start = max(0, min(desired - len(new), desired + surge - len(live)))
    room = sum(p.available for p in live) - (desired - unavailable)
    stop = [p.name for p in old if not p.available]
    for p in sorted((p for p in old if p.available), key=lambda p: p.created):
        if room <= 0:
            break
        stop.append(p.name)
        room -= 1
    return Plan(start=start, stop=tuple(stop))


def _condition(type_: str, ok: bool, reason: str, message: str, previous: Mapping[str, Any] | None, now: str) -> dict[str, Any]:
    status = "True" if ok else "False"
    same = previous is not None and previous.get("status") == status
    unchanged = same and previous is not None and previous.get("reason") == reason and previous.get("message") == message
    return {
        "type": type_, "status": status, "reason": reason, "message": message,
        "lastUpdateTime": previous.get("lastUpdateTime", now) if unchanged and previous else now,
        "lastTransitionTime": previous.get("lastTransitionTime", now) if same and previous else now,
    }


def deployment_status(deployment: Mapping[str, Any], current: str, pods: Sequence[PodView], now: str) -> dict[str, Any]:
    """The Deployment's ``.status`` (zero counts omitted, as the API server's JSON omits them)."""
    spec = deployment.get("spec") or {}
    name = deployment["metadata"]["name"]
    desired = int(spec.get("replicas", 1) if spec.get("replicas") is not None else 1)
    live = [p for p in pods if not p.terminating]
    updated = [p for p in live if p.hash == current]
    available = sum(p.available for p in live)
    _, max_unavailable = rolling_limits(spec) if (spec.get("strategy") or {}).get("type", "RollingUpdate") != "Recreate" \
        else (0, 0)
    previous = {c.get("type"): c for c in ((deployment.get("status") or {}).get("conditions") or [])}
    ok = available >= desired - max_unavailable
    conditions = [
        _condition("Available", ok, "MinimumReplicasAvailable" if ok else "MinimumReplicasUnavailable",
                   "Deployment has minimum availability." if ok else "Deployment does not have minimum availability.",
                   previous.get("Available"), now),
    ]
    complete = len(updated) == desired and len(live) == desired and available >= desired
    reason = "NewReplicaSetAvailable" if complete else "ReplicaSetUpdated"
    verb = "has successfully progressed" if complete else "is progressing"
    conditions.append(_condition("Progressing", True, reason, f'ReplicaSet "{name}-{current}" {verb}.',
                                 previous.get("Progressing"), now))
    counts = {
        "replicas": len(live), "updatedReplicas": len(updated), "readyReplicas": sum(p.ready for p in live),
        "availableReplicas": available, "unavailableReplicas": max(0, desired - available),
    }
    status: dict[str, Any] = {"observedGeneration": deployment["metadata"].get("generation", 1)}
    status.update({k: v for k, v in counts.items() if v})
    status["conditions"] = conditions
    return status
