"""The operator rows on the real control plane (issue 40, bar 5), beside the emulator's (``bench/operator_hook.py``).

On a fresh real control plane (``bench/control_plane.py``: the chart installed, one node registered and cordoned),
the operator runs as in the emulator's rows (a process of its own, ``--all-namespaces --standalone``, resyncs and
Secret checks an hour away), with the chart's operator ServiceAccount token as its only credential. Then:

1. the bench, as the cluster's admin, creates the example ModelConfig and RemoteMCPServer and ``agents`` Agents
   (``bench-agent-<i>``), ``CREATORS`` at a time, as fast as the API server answers;
2. **agents_to_accepted_seconds**: from the first create until every Agent has ``Accepted=True``, as a watch of
   Agents in the bench sees them (no polling);
3. **api_requests_per_reconcile**: the operator's requests (its ServiceAccount's, in the API server's audit log;
   watches excluded) from the first create until it has sent nothing for 1.5 s, divided by the number of Agents. The
   same count as the emulator's rows: everything the operator sent, kopf's bookkeeping and Events included; here also
   what it does when the real controllers change what it made (a Deployment's status, the ReplicaSet and Pod the
   Deployment controller makes; ``deployment_event`` in the operator's handlers), which the emulator never does.

Not measured here: the writes on a no-op resync (the emulator's rows have them; the issue's bar 5 does not ask).
Beside the figures: the requests every other user of the API server sent in the same window (the controllers, the
scheduler, the node) and the cores each component used, to tell where the time went.
"""

from __future__ import annotations

import time
import traceback
from pathlib import Path
from typing import Any

import httpx

from bench import control_plane as cpl
from bench.operator_hook import GROUP, NS, VERSION, create_agents

__all__ = ["OPERATOR_CP_METRICS", "not_run", "operator_cp_results", "run_operator_cp"]

OPERATOR_CP_METRICS = ("agents_to_accepted_seconds", "api_requests_per_reconcile")


def _log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", flush=True)


class _Accepted:
    """When each Agent was first seen ``Accepted=True`` (a watch's callback, on its thread)."""

    def __init__(self) -> None:
        self.at: dict[str, float] = {}

    def __call__(self, item: tuple[float, dict[str, Any]]) -> None:
        arrived, event = item
        obj = event.get("object") or {}
        name = (obj.get("metadata") or {}).get("name")
        conditions = (obj.get("status") or {}).get("conditions") or []
        if name and name not in self.at and any(c.get("type") == "Accepted" and c.get("status") == "True"
                                                 for c in conditions):
            self.at[name] = arrived


def run_operator_cp(agents: int, work: Path, timeout: float = 900.0,
                    quiet: Any = None) -> dict[str, Any]:
    """Start a real control plane and the operator, create ``agents`` Agents, measure (the module docstring).
    ``quiet(section)`` is the bench's hygiene check, run once the cluster is up and the operator idle."""
    work.mkdir(parents=True, exist_ok=True)
    with cpl.control_plane() as cp:
        audit = cpl.EventLog(cp.cluster.layout.audit_log)
        accepted = _Accepted()
        watch = cpl.Watch(cp.cluster.kubeconfig(), f"/apis/{GROUP}/{VERSION}/namespaces/{NS}/agents", accepted)
        operator = cpl.Operator(cp, work / "operator-cp.log",
                                {"GATEHOUSE_RESYNC_SECONDS": "3600", "GATEHOUSE_SECRET_CHECK_INTERVAL": "1h"})
        try:
            operator.wait_watching(audit)
            cpl.settle(audit, operator.user, [], quiet=1.0, timeout=60)
            if quiet is not None:
                quiet("operator_cp")
            audit.read()  # the mark: what came before is not counted
            cores = cpl.Cores({**cp.pids(), "operator": operator.proc.pid})
            cpu_start = cores.read()
            start = time.perf_counter()
            throttled: list[int] = []
            with cp.admin() as admin:
                admin.headers["Content-Type"] = "application/json"

                def create(item: tuple[str, dict[str, Any]]) -> None:
                    plural, doc = item
                    while True:  # as client-go does, a 429 (API Priority and Fairness) is waited out, then sent again
                        reply = admin.post(f"/apis/{GROUP}/{VERSION}/namespaces/{NS}/{plural}", json=doc)
                        if reply.status_code != 429:
                            break
                        throttled.append(1)
                        time.sleep(float(reply.headers.get("Retry-After") or 1))
                    reply.raise_for_status()

                create_agents(agents, create)
            created = time.perf_counter() - start
            _log(f"  operator (real control plane): {agents} Agents created in {created:.1f}s")
            deadline = time.monotonic() + timeout
            events: list[dict[str, Any]] = []
            while len(accepted.at) < agents:
                if watch.error is not None:
                    raise RuntimeError(f"the watch of Agents failed: {watch.error}")
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{len(accepted.at)}/{agents} Agents Accepted after {timeout:.0f}s")
                events.extend(audit.read())  # read as it grows: the log is long by the end
                time.sleep(0.2)
            to_accepted = time.perf_counter() - start
            cpu_accepted = cores.read()
            _log(f"  operator (real control plane): {agents} Agents Accepted in {to_accepted:.1f}s")
            cpl.settle(audit, operator.user, events, timeout=timeout)
            settled = time.perf_counter() - start
            cpu_settled = cores.read()
        finally:
            operator.stop()
            watch.close()
        mine = cpl.by_user(events, operator.user)
        writes = [e for e in mine if e.get("verb") in ("create", "update", "patch", "delete")]
        pods = _count(cp, "/api/v1/namespaces/default/pods")
    return {
        "agents_to_accepted_seconds": round(to_accepted, 2),
        "api_requests_per_reconcile": round(len(mine) / agents, 2),
        "create_seconds": round(created, 2),
        "settled_seconds": round(settled, 2),
        "api_requests_applied": len(mine),
        "api_writes_applied": len(writes),
        "api_requests_applied_by_verb": cpl.breakdown(mine),
        "api_requests_by_user": cpl.users(events),
        "cores_until_accepted": cpl.Cores.used(cpu_start, cpu_accepted, to_accepted),
        "cores_until_settled": cpl.Cores.used(cpu_start, cpu_settled, settled),
        "pods": pods,
        "creates_throttled": len(throttled),
        "watch_retries": watch.retries,
        "node": f"{cpl.NODE}: registered, Ready, cordoned (spec.unschedulable); no pod runs",
    }


def _count(cp: cpl.ControlPlane, path: str) -> dict[str, int]:
    """Pods by phase (what the real controllers made of the Agents' Deployments)."""
    with cp.admin() as admin:
        try:
            items = admin.get(path).json().get("items") or []
        except (httpx.HTTPError, ValueError):
            return {}
    phases: dict[str, int] = {}
    for item in items:
        phase = (item.get("status") or {}).get("phase") or "?"
        phases[phase] = phases.get(phase, 0) + 1
    return phases


def not_run(agents: int, reason: str) -> dict[str, Any]:
    """The rows when they do not run, with why."""
    return {"available": False, "reason": reason, "agents": agents, **dict.fromkeys(OPERATOR_CP_METRICS)}


def operator_cp_results(agents: int, work: Path, quiet: Any = None) -> dict[str, Any]:
    """``{"available": bool, "reason": str, "agents": n, <metric>: value | None, ...}``; never raises."""
    reason = cpl.unavailable()
    if reason:
        return not_run(agents, reason)
    try:
        return {"available": True, "reason": "", "agents": agents, **run_operator_cp(agents, work, quiet=quiet)}
    except Exception as exc:  # a reference row: the rest of the bench runs on, the row says why
        _log("operator bench on the real control plane failed:\n" + "".join(traceback.format_exc(limit=8)))
        return not_run(agents, f"operator bench on the real control plane failed: {type(exc).__name__}: "
                               f"{str(exc).splitlines()[0] if str(exc) else ''}")
