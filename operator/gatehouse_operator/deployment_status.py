"""Whether an event of an Agent's Deployment changed only what the Deployment controller writes.

The Deployment controller writes each Deployment's status (and its ``deployment.kubernetes.io/revision``
annotation, through the status subresource) several times while it rolls out, and again whenever a replica comes
or goes. None of that is drift: the only part of the Agent derived from it is the ``Ready`` condition
(:func:`gatehouse_operator.status.ready_condition`). A full reconcile would read every child and the Agent again to
find nothing to do, so such an event only brings ``Ready`` up to date (:func:`gatehouse_operator.reconcile.refresh_ready`).

What tells a status-only change apart, against what the last reconcile left (:class:`AppliedDeployment`):

- ``metadata.generation`` is the same: the API server bumps it on every change to a Deployment's spec (and to its
  annotations through the main resource); a status write never does;
- the metadata the operator renders (name, labels, ownerReferences) still holds what it rendered
  (:func:`gatehouse_operator.apply.owned_equal`, as a reconcile would compare it): a label edited by hand is not
  covered by the generation.

Anything else -- another generation, an edited label, a deletion, an object without a generation, a Deployment no
reconcile of this process has applied -- is left to a full reconcile, as before.

One thing a status-only event still reads: the state claim, while the last reconcile found it not ``Bound``. No watch
follows claims (:mod:`gatehouse_operator.claims`), and a Deployment event is when a reconcile used to read it again:
one GET of the claim (:func:`claim_moved`), and a full reconcile when its phase moved, so that ``StateReady`` shows a
claim that bound meanwhile. A bound claim (the usual case) costs nothing.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gatehouse_operator.apply import owned_equal
from gatehouse_operator.status import StatusCondition, ready_condition

__all__ = ["AppliedDeployment", "applied", "claim_moved", "claim_phase", "status_only"]


@dataclass(frozen=True)
class AppliedDeployment:
    """A Deployment as a reconcile left it: its generation, the metadata rendered for it, and the ``Ready`` condition
    derived from it (before the runtime's own reason is folded in); and the state claim's name and phase while that
    reconcile found it not ``Bound`` (``None``: bound, or no claim). Kept per Agent: a few hundred bytes."""

    generation: int | None
    metadata: Mapping[str, Any]
    ready: StatusCondition
    claim: str | None = None
    claim_phase: str | None = None

    def with_ready(self, ready: StatusCondition) -> AppliedDeployment:
        return dataclasses.replace(self, ready=ready)


def claim_phase(claim: Mapping[str, Any] | None) -> str | None:
    """A claim's phase as ``StateReady`` reads it (a claim just created has no status yet: ``Pending``); ``None``: no
    claim."""
    if claim is None:
        return None
    return str((claim.get("status") or {}).get("phase") or "Pending")


def applied(desired: Mapping[str, Any], actual: Mapping[str, Any],
            claim: Mapping[str, Any] | None = None) -> AppliedDeployment:
    """The record of a Deployment rendered as ``desired`` and answered by the API server as ``actual``, beside the
    state ``claim`` as the same reconcile read or made it."""
    generation = (actual.get("metadata") or {}).get("generation")
    phase = claim_phase(claim)
    unbound = claim is not None and phase != "Bound"
    return AppliedDeployment(generation if isinstance(generation, int) else None,
                             copy.deepcopy(dict(desired.get("metadata") or {})), ready_condition(dict(actual)),
                             (claim.get("metadata") or {}).get("name") if unbound and claim is not None else None,
                             phase if unbound else None)


def claim_moved(record: AppliedDeployment, claim: Mapping[str, Any] | None) -> bool:
    """Whether the state claim, as just read (``None``: gone), is no longer in the phase ``record`` found it in."""
    return claim_phase(claim) != record.claim_phase


def status_only(record: AppliedDeployment | None, event: Mapping[str, Any]) -> bool:
    """Whether ``event`` (a Deployment as its watch event shows it) differs from what ``record`` was taken from only in
    what the Deployment controller writes (the module docstring): its spec and our metadata are as applied."""
    if record is None or record.generation is None:
        return False
    meta = event.get("metadata") or {}
    if meta.get("deletionTimestamp") or meta.get("generation") != record.generation:
        return False
    return owned_equal(dict(record.metadata), dict(meta))
