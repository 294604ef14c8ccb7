"""The Agent's status, following Kubernetes conventions.

``observedGeneration`` says which spec the status describes; ``configHash`` is the sha256 of the
``config.json`` the pods run; these conditions tell a user (and the runtime) what happened:

- ``Accepted``: ``True``/``Reconciled`` when the Agent translated and its children are in place;
  ``False`` with reason ``DependencyMissing`` (a ModelConfig, RemoteMCPServer or Secret is absent),
  ``InvalidSpec`` (the translator's field-pathed problems), ``ServiceAccountNotAllowed``
  (``spec.deployment.serviceAccountName`` names another account than the Agent's own), ``StateSwitchHeld`` (the
  spec moves the state to another store while requests are pending: :mod:`gatehouse_operator.state_switch`) or
  ``ReconcileFailed`` (the API refused).
- ``Ready``: from the Deployment's status, ``availableReplicas >= replicas``; when not ready and the runtime reports
  its own reason (condition ``RuntimeReady`` False, written by the runtime), that reason and message.
- ``Durable``: whether pending approvals outlive the pod holding them: ``True`` with reason ``Sqlite`` (on a
  PersistentVolumeClaim) or ``Postgres``; ``False`` with ``Ephemeral`` (``spec.state.ephemeral``) or
  ``ReplicasNeedPostgres`` (an Agent from before ``spec.state`` with more than one replica)
  (:mod:`gatehouse_operator.storage`).
- ``StateReady``: whether the state's volume is there: ``ClaimBound``, or ``False`` with ``ClaimPending`` (the
  message says why, e.g. no default StorageClass) or ``ClaimLost`` (:mod:`gatehouse_operator.claims`).
- ``ApproversNamed``: whether every gated call names approvers; ``False``/``RequesterOnly`` says where only the
  requester decides (:mod:`gatehouse_operator.approvers`).
- ``AdmissionPolicy``: whether the cluster enforces the ToolApproval admission policy, so that the runtime may
  trust a decision made with kubectl (:mod:`gatehouse_operator.admission`).

A condition's ``lastTransitionTime`` moves only when its ``status`` flips; reason, message and
``observedGeneration`` are updated in place. So the same inputs render the same status, and a resync
writes nothing. Only :data:`OWNED_FIELDS` are ever written, guarded by the Agent's resourceVersion, so the
runtime's own fields (``pendingApprovals``, the ``RuntimeReady`` condition) are never written back stale.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "OURS", "OWNED_FIELDS", "RUNTIME_READY", "StatusCondition", "agent_status", "merge_conditions", "ready_condition",
    "ready_needs_runtime_reason", "with_runtime_reason",
]

# The status fields the operator writes; the runtime writes ``pendingApprovals`` and its ``RuntimeReady`` condition.
OWNED_FIELDS = ("observedGeneration", "configHash", "conditions")
RUNTIME_READY = "RuntimeReady"

OURS = ("Accepted", "Ready", "Durable", "StateReady", "ApproversNamed", "AdmissionPolicy")


@dataclass(frozen=True)
class StatusCondition:
    """One of the conditions the operator owns on an Agent (see the module docstring)."""

    type: str
    status: bool
    reason: str
    message: str

    def render(self, generation: int | None, now: str) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": self.type,
            "status": "True" if self.status else "False",
            "reason": self.reason,
            "message": self.message,
            "lastTransitionTime": now,
        }
        if generation is not None:
            out["observedGeneration"] = generation
        return out


def ready_condition(deployment: dict[str, Any] | None) -> StatusCondition:
    if deployment is None:
        return StatusCondition("Ready", False, "NotDeployed", "no Deployment yet")
    wanted = int(deployment.get("spec", {}).get("replicas", 1))
    available = int((deployment.get("status") or {}).get("availableReplicas") or 0)
    message = f"{available}/{wanted} replicas available"
    if available >= wanted:
        return StatusCondition("Ready", True, "Available", message)
    return StatusCondition("Ready", False, "Unavailable", message)


def with_runtime_reason(ready: StatusCondition, conditions: Sequence[dict[str, Any]]) -> StatusCondition:
    """A not-Ready condition carries the runtime's own reason when the runtime reports one (``RuntimeReady`` False,
    written by the runtime: the MCP server unreachable, the database down), not only a replica count."""
    runtime = next((c for c in conditions if c.get("type") == RUNTIME_READY), None)
    if ready.status or runtime is None or runtime.get("status") != "False":
        return ready
    return StatusCondition("Ready", False, str(runtime.get("reason") or ready.reason),
                           f"{ready.message}; {runtime.get('message') or 'the runtime is not ready'}")


def ready_needs_runtime_reason(conditions: Sequence[dict[str, Any]]) -> bool:
    """Whether ``Ready`` no longer says what the runtime's ``RuntimeReady`` says (the runtime wrote it after the last
    reconcile): an Agent not Ready that lacks the runtime's reason, or still shows one the runtime took back."""
    by_type = {c.get("type"): c for c in conditions}
    ready, runtime = by_type.get("Ready"), by_type.get(RUNTIME_READY)
    if ready is None or runtime is None or ready.get("status") != "False":
        return False
    if runtime.get("status") == "False":
        said = str(runtime.get("message", ""))
        return ready.get("reason") != runtime.get("reason") or said not in str(ready.get("message", ""))
    return ready.get("reason") not in ("Unavailable", "NotDeployed")


def merge_conditions(
    existing: list[dict[str, Any]], new: list[StatusCondition], generation: int | None, now: str
) -> list[dict[str, Any]]:
    """Our conditions rendered over ``existing``, keeping lastTransitionTime unless the status flipped."""
    by_type = {c.get("type"): c for c in existing}
    out = [c for c in existing if c.get("type") not in {n.type for n in new}]
    for condition in new:
        rendered = condition.render(generation, now)
        old = by_type.get(condition.type)
        if old is not None and old.get("status") == rendered["status"] and old.get("lastTransitionTime"):
            rendered["lastTransitionTime"] = old["lastTransitionTime"]
        out.append(rendered)
    order = {t: i for i, t in enumerate(OURS)}
    return sorted(out, key=lambda c: (order.get(c.get("type", ""), len(order)), c.get("type", "")))


def agent_status(
    existing: dict[str, Any] | None,
    *,
    generation: int | None,
    accepted: StatusCondition,
    ready: StatusCondition,
    config_hash: str | None,
    now: str,
    admission: StatusCondition | None = None,
    state: Sequence[StatusCondition] = (),
) -> dict[str, Any]:
    """The status to hold: the fields we own merged over ``existing`` (a no-op when nothing changed).

    ``state``: the ``Durable`` and ``StateReady`` conditions, when this reconcile determined them (a rejected spec
    leaves the last ones in place, as it leaves the last good children running)."""
    status = dict(existing or {})
    if generation is not None:
        status["observedGeneration"] = generation
    if config_hash:
        status["configHash"] = config_hash
    ready = with_runtime_reason(ready, status.get("conditions") or [])
    ours = [accepted, ready, *state] + ([admission] if admission is not None else [])
    status["conditions"] = merge_conditions(list(status.get("conditions") or []), ours, generation, now)
    return status
