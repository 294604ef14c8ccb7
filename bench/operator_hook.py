"""Hook for the operator rows: 500 Agents to Accepted, API requests per reconcile, writes on a no-op resync.

The operator (``operator/gatehouse_operator``) and the emulated Kubernetes API it is tested against live on
another branch. Until ``gatehouse_operator`` is importable here, :func:`operator_results` reports every row as
not available (with the reason), and the bench runs on. When it is, fill in :func:`run_operator_bench`: start the
emulated API, run the operator (``kopf.testing.KopfRunner`` in a thread), apply ``agents`` Agents and time until
every one is ``Accepted``; from the emulator's request log count API requests per reconcile and the writes
(POST/PATCH/PUT/DELETE) a no-op resync makes.
"""

from __future__ import annotations

import importlib.util
from typing import Any

__all__ = ["OPERATOR_METRICS", "operator_results", "run_operator_bench"]

OPERATOR_METRICS = ("agents_to_accepted_seconds", "api_requests_per_reconcile", "writes_on_noop_resync")


def run_operator_bench(agents: int) -> dict[str, Any]:
    """The operator measurements. Not written yet: the operator is not on this branch."""
    raise NotImplementedError("operator bench not written yet: fill in bench/operator_hook.run_operator_bench")


def operator_results(agents: int = 500) -> dict[str, Any]:
    """``{"available": bool, "reason": str, "agents": n, <metric>: value | None}``."""
    empty: dict[str, Any] = dict.fromkeys(OPERATOR_METRICS)
    if importlib.util.find_spec("gatehouse_operator") is None:
        return {"available": False, "reason": "operator not available yet (gatehouse_operator is not importable)",
                "agents": agents, **empty}
    try:
        return {"available": True, "reason": "", "agents": agents, **empty, **run_operator_bench(agents)}
    except NotImplementedError as exc:
        return {"available": False, "reason": str(exc), "agents": agents, **empty}
