"""The sqlite state's PersistentVolumeClaim: create it, keep it in step where a claim can change, and report it.

A claim is mostly fixed once made, so it is not merge-patched wholesale like the other children
(:mod:`gatehouse_operator.apply`); each reconcile reads it once (or creates it) and then

- keeps our labels on it, and our ownerReference exactly when ``spec.state.sqlite.deleteClaimWithAgent`` is true
  (added or removed, an MCPGateway's as an Agent's; anybody else's ownerReferences are left alone). A claim found
  under the name -- left by an earlier Agent of that name, or made ahead by a platform team -- is taken over this way;
- grows it when ``size`` is larger than what it requests (volume expansion: a refusal, say by a StorageClass that
  cannot expand, is reported and not treated as a failed reconcile);
- reports, without trying, what a claim cannot do: shrink, or change its StorageClass.

:func:`state_condition` turns what it found into ``StateReady``: ``True`` when the claim is ``Bound``, ``False``
while it is ``Pending`` -- saying "no default StorageClass" when the API server gave it no class, which is what a
claim without ``storageClassName`` looks like in a cluster without a default -- or ``Lost``. There is no watch on
claims: while it is not bound, the next event of the Agent's Deployment reads it again (a status-only one: the claim
alone, :mod:`gatehouse_operator.deployment_status`), as does the periodic resync.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agent_runtime.contract.resources import GROUP
from gatehouse_operator import apply, builders, storage
from gatehouse_operator.kube import ApiException, ChildrenApi, quantity
from gatehouse_operator.status import StatusCondition

__all__ = ["ClaimResult", "ensure_claim", "state_condition"]


@dataclass(frozen=True)
class ClaimResult:
    """What :func:`ensure_claim` did, and what it could not do (said in ``StateReady``)."""

    applied: apply.Applied
    notes: tuple[str, ...] = ()


# The kinds whose ownerReference on a claim is ours to add or remove: an MCPGateway's claim is an Agent's (docs/gateway.md)
_OWNER_KINDS = (builders.AGENT.kind, builders.GATEWAY.kind)


def _is_owner_ref(ref: dict[str, Any]) -> bool:
    return ref.get("kind") in _OWNER_KINDS and str(ref.get("apiVersion", "")).startswith(f"{GROUP}/")


def _ref_keys(refs: Sequence[dict[str, Any]]) -> set[tuple[Any, ...]]:
    return {(r.get("apiVersion"), r.get("kind"), r.get("name"), r.get("uid"), r.get("controller")) for r in refs}


def _metadata_patch(desired: dict[str, Any], actual: dict[str, Any]) -> dict[str, Any]:
    """Labels to add and the ownerReferences to hold, where they differ from ``actual``'s."""
    patch: dict[str, Any] = {}
    labels = desired["metadata"].get("labels") or {}
    present = actual["metadata"].get("labels") or {}
    if any(present.get(key) != value for key, value in labels.items()):
        patch["labels"] = labels  # a merge patch: other labels stay
    refs = actual["metadata"].get("ownerReferences") or []
    wanted = [r for r in refs if not _is_owner_ref(r)] + list(desired["metadata"].get("ownerReferences") or [])
    if _ref_keys(wanted) != _ref_keys(refs):
        patch["ownerReferences"] = wanted
    return patch


def _storage(claim: dict[str, Any]) -> str | None:
    value = (((claim.get("spec") or {}).get("resources") or {}).get("requests") or {}).get("storage")
    return str(value) if value is not None else None


def ensure_claim(kube: ChildrenApi, desired: dict[str, Any], *, create_first: bool = False) -> ClaimResult:
    """Create the claim when missing, else bring the fields a claim can change in step (module docstring)."""
    kind, meta = desired["kind"], desired["metadata"]
    name, namespace = meta["name"], meta["namespace"]
    if create_first:
        try:
            return ClaimResult(apply.Applied(kind, name, "created", kube.create(desired)))
        except ApiException as exc:
            if exc.status != 409:
                raise
    actual = kube.get(kind, namespace, name)
    if actual is None:
        return ClaimResult(apply.Applied(kind, name, "created", kube.create(desired)))
    action: apply.Action = "unchanged"
    head = {"apiVersion": "v1", "kind": kind}
    patch = _metadata_patch(desired, actual)
    if patch:
        actual = kube.patch({**head, "metadata": {"name": name, "namespace": namespace, **patch}})
        action = "patched"
    notes: list[str] = []
    want, have = _storage(desired), _storage(actual)
    if want is not None and have is not None and quantity(want) > quantity(have):
        grow = {"resources": {"requests": {"storage": want}}}
        try:
            actual = kube.patch({**head, "metadata": {"name": name, "namespace": namespace}, "spec": grow})
            action = "patched"
        except ApiException as exc:
            if exc.status not in (403, 422):
                raise
            notes.append(f"growing it to {want} was refused ({exc.status} {exc.reason}): its StorageClass may not "
                         "allow volume expansion")
    elif want is not None and have is not None and quantity(want) < quantity(have):
        notes.append(f"spec.state.sqlite.size asks {want} but it requests {have}: a claim never shrinks")
    wanted_class = desired["spec"].get("storageClassName")
    present_class = (actual.get("spec") or {}).get("storageClassName")
    if wanted_class and wanted_class != present_class:
        notes.append(f"spec.state.sqlite.storageClassName asks {wanted_class!r} but it has {present_class!r}: a claim's "
                     "class never changes (delete the claim, and the state on it, to have a new one made)")
    return ClaimResult(apply.Applied(kind, name, action, actual), tuple(notes))


def state_condition(plan: storage.StateLayout, claim: dict[str, Any] | None, notes: Sequence[str] = ()) -> StatusCondition:
    """``StateReady``: whether the state's volume is there for the pods (see the module docstring)."""
    if plan.claim is None:
        if plan.kind == "postgres":
            return StatusCondition("StateReady", True, "Postgres", "state in Postgres: no volume to wait for")
        return StatusCondition("StateReady", True, "EmptyDir", "state in each pod's emptyDir: no volume to wait for")
    if claim is None:
        return StatusCondition("StateReady", False, "ClaimMissing", f"PersistentVolumeClaim {plan.claim} not found")
    status = claim.get("status") or {}
    phase = status.get("phase") or "Pending"  # a claim just created has no status yet
    storage_class = (claim.get("spec") or {}).get("storageClassName")
    said = "".join(f"; {note}" for note in notes)
    if phase == "Bound":
        capacity = (status.get("capacity") or {}).get("storage") or _storage(claim)
        return StatusCondition("StateReady", True, "ClaimBound",
                               f"PersistentVolumeClaim {plan.claim} is Bound ({capacity}, StorageClass {storage_class}){said}")
    if phase == "Pending":
        if not storage_class:
            why = "no default StorageClass; set spec.state.sqlite.storageClassName"
        else:
            why = (f"waiting for a volume of StorageClass {storage_class} (a WaitForFirstConsumer class binds it once "
                   "the pod is scheduled)")
        return StatusCondition("StateReady", False, "ClaimPending", f"PersistentVolumeClaim {plan.claim} is Pending: {why}{said}")
    return StatusCondition("StateReady", False, f"Claim{phase}",
                           f"PersistentVolumeClaim {plan.claim} is {phase}: its volume is gone; the pods cannot start "
                           f"until the claim is deleted and made anew (with empty state){said}")
