"""Hold a switch of an Agent's state backend while its runtime holds pending requests.

Pending approvals and questions, and the tasks waiting on them, live in the runtime's one database
(:mod:`gatehouse_operator.storage`). A spec that moves it elsewhere -- sqlite to Postgres, Postgres to sqlite, another
Postgres Secret, to or from ``ephemeral`` -- starts pods on a database without them: their ToolApprovals turn
``Orphaned`` and their tasks "not found". Carrying them over would mean copying one database into another of another
kind while the old pods still write to it; so instead the operator holds the switch:

- the running Deployment's store (:func:`storage.store_of`) differs from the one the spec renders, and the runtime
  has pending requests -- its ``status.pendingApprovals`` (tool approvals, counted from its store) or Pending
  ToolApprovals of the Agent (questions included) -- so nothing of the new spec is applied:
  ``Accepted=False``, reason :data:`HELD`, a message that says why and how to go on; the old pods keep serving, and
  approvers decide what is pending there;
- it goes ahead by itself once nothing is pending (the runtime's recount of ``pendingApprovals`` triggers a reconcile;
  a decided question, the next resync);
- or at once with the annotation :data:`FORCE_ANNOTATION` set to the kind the spec switches to (``postgres``,
  ``sqlite``, ``ephemeral``): the pending requests are then orphaned, knowingly. A value naming another kind forces
  nothing, so an annotation left behind does not silently force a later switch elsewhere.

Only a spec change can switch (an Agent whose ``observedGeneration`` is its ``generation`` and that is not held costs
no extra request); a new URL in the same Secret key is taken as the same database (a rotated password).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from agent_runtime.contract.errors import Problem

__all__ = ["FORCE_ANNOTATION", "HELD", "held", "is_held", "pending_count", "worth_checking"]

FORCE_ANNOTATION = "gatehouse.dev/force-state-switch"
HELD = "StateSwitchHeld"


def is_held(body: Mapping[str, Any]) -> bool:
    """Whether the Agent's status says its state switch is held (a runtime status write may release it)."""
    conditions: list[dict[str, Any]] = (body.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Accepted" and c.get("reason") == HELD for c in conditions)


def worth_checking(body: Mapping[str, Any]) -> bool:
    """Whether a reconcile must compare stores: the spec changed since the status was written, or a switch is held."""
    meta, status = body.get("metadata") or {}, body.get("status") or {}
    return meta.get("generation") != status.get("observedGeneration") or is_held(body)


def held(body: Mapping[str, Any], running: str | None, wanted: str | None, target: str,
         pending: Callable[[], int]) -> Problem | None:
    """The Problem that holds the switch from the ``running`` store to the ``wanted`` one (of kind ``target``), or
    ``None`` when there is no switch, it is forced, or nothing is pending (``pending`` is asked only then)."""
    if running is None or wanted is None or running == wanted:
        return None
    meta = body.get("metadata") or {}
    if ((meta.get("annotations") or {}).get(FORCE_ANNOTATION) or "").strip().lower() == target:
        return None
    count = pending()
    if not count:
        return None
    name, namespace = meta.get("name"), meta.get("namespace")
    return Problem("spec.state", (
        f"switching the state from {running} to {wanted} is held: the runtime has {count} pending request(s) there "
        f"that the new store would not have (their ToolApprovals would turn Orphaned, their tasks be lost). Decide "
        f"them first (kubectl get toolapprovals -n {namespace} -l gatehouse.dev/agent={name}): the switch then goes "
        f"ahead by itself; or force it, losing them: kubectl annotate agent -n {namespace} {name} "
        f"{FORCE_ANNOTATION}={target}"
    ))


def pending_count(body: Mapping[str, Any], approvals: list[dict[str, Any]]) -> int:
    """What is pending in the runtime: its own count of tool approvals, or the Agent's Pending ToolApprovals (a
    question counts there only), whichever is larger."""
    name = (body.get("metadata") or {}).get("name")
    listed = sum(1 for a in approvals
                 if (a.get("spec") or {}).get("agentRef") == name and (a.get("status") or {}).get("phase") == "Pending")
    return max(int((body.get("status") or {}).get("pendingApprovals") or 0), listed)
