"""Whether an event of an Agent's Deployment changed only what the Deployment controller writes.

The Deployment controller writes each Deployment's status (and its ``deployment.kubernetes.io/revision``
annotation, through the status subresource) several times while it rolls out, and again whenever a replica comes
or goes. None of that is drift: the only part of the Agent derived from it is the ``Ready`` condition
(:func:`gatehouse_operator.status.ready_condition`). A full reconcile would read every child and the Agent again to
find nothing to do, so such an event only brings ``Ready`` up to date
(:func:`gatehouse_operator.reconcile.refresh_conditions`).

What tells a status-only change apart, against what the last reconcile left (:class:`AppliedDeployment`):

- ``metadata.generation`` is the same: the API server bumps it on every change to a Deployment's spec (and to its
  annotations through the main resource); a status write never does;
- the metadata the operator renders (name, labels, ownerReferences) still holds what it rendered
  (:func:`gatehouse_operator.apply.owned_equal`, as a reconcile would compare it): a label edited by hand is not
  covered by the generation.

Anything else -- another generation, an edited label, a deletion, an object without a generation, a Deployment no
reconcile of this process has applied -- is left to a full reconcile, as before.

One thing a status-only event still reads: the state claim, while the last reconcile (or such an event) found it not
``Bound``. No watch follows claims (:mod:`gatehouse_operator.claims`), and a Deployment event is when a reconcile used
to read it again: one GET of the claim, and when its phase moved (:func:`claim_moved`) ``StateReady`` is brought up
to date with ``Ready`` (:func:`state_ready`, from what the last reconcile found: the state's layout and what it
could not do to the claim), so that it shows a claim that bound meanwhile. A bound claim costs nothing.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gatehouse_operator.apply import owned_equal
from gatehouse_operator.claims import state_condition
from gatehouse_operator.status import StatusCondition, ready_condition
from gatehouse_operator.storage import StateLayout

__all__ = ["AppliedDeployment", "applied", "claim_moved", "claim_phase", "state_ready", "status_only"]


@dataclass(frozen=True)
class AppliedDeployment:
    """A Deployment as a reconcile left it: its generation, the metadata rendered for it, and the ``Ready`` condition
    derived from it (before the runtime's own reason is folded in); and the state claim's name and phase while it
    was found not ``Bound`` (``None``: bound, or no claim), with what ``StateReady`` is derived from besides the claim
    (the state's layout, and the notes of what the reconcile could not do to it). Kept per Agent: a few hundred
    bytes."""

    generation: int | None
    metadata: Mapping[str, Any]
    ready: StatusCondition
    claim: str | None = None
    claim_phase: str | None = None
    layout: StateLayout | None = None
    notes: tuple[str, ...] = ()

    def with_ready(self, ready: StatusCondition) -> AppliedDeployment:
        return dataclasses.replace(self, ready=ready)

    def with_claim(self, claim: Mapping[str, Any]) -> AppliedDeployment:
        """The record once ``claim`` was read again: no more reads once it is bound."""
        phase = claim_phase(claim)
        return dataclasses.replace(self, claim=self.claim if phase != "Bound" else None,
                                   claim_phase=phase if phase != "Bound" else None)


def claim_phase(claim: Mapping[str, Any] | None) -> str | None:
    """A claim's phase as ``StateReady`` reads it (a claim just created has no status yet: ``Pending``); ``None``: no
    claim."""
    if claim is None:
        return None
    return str((claim.get("status") or {}).get("phase") or "Pending")


def applied(desired: Mapping[str, Any], actual: Mapping[str, Any], layout: StateLayout | None = None,
            claim: Mapping[str, Any] | None = None, notes: tuple[str, ...] = ()) -> AppliedDeployment:
    """The record of a Deployment rendered as ``desired`` and answered by the API server as ``actual``, beside the
    state's ``layout`` and its ``claim`` as the same reconcile read or made it, with the ``notes`` it made of it."""
    generation = (actual.get("metadata") or {}).get("generation")
    record = AppliedDeployment(generation if isinstance(generation, int) else None,
                               copy.deepcopy(dict(desired.get("metadata") or {})), ready_condition(dict(actual)),
                               layout=layout, notes=notes)
    if claim is None or layout is None or layout.claim is None:
        return record
    return dataclasses.replace(record, claim=layout.claim).with_claim(claim)


def claim_moved(record: AppliedDeployment, claim: Mapping[str, Any]) -> bool:
    """Whether the state claim, as just read, is no longer in the phase ``record`` found it in."""
    return claim_phase(claim) != record.claim_phase


def state_ready(record: AppliedDeployment, claim: Mapping[str, Any]) -> StatusCondition:
    """``StateReady`` for the state claim as just read, as the reconcile that left ``record`` would say it."""
    assert record.layout is not None, "a claim is recorded only with its layout"
    return state_condition(record.layout, dict(claim), record.notes)


def status_only(record: AppliedDeployment | None, event: Mapping[str, Any]) -> bool:
    """Whether ``event`` (a Deployment as its watch event shows it) differs from what ``record`` was taken from only in
    what the Deployment controller writes (the module docstring): its spec and our metadata are as applied."""
    if record is None or record.generation is None:
        return False
    meta = event.get("metadata") or {}
    if meta.get("deletionTimestamp") or meta.get("generation") != record.generation:
        return False
    return owned_equal(dict(record.metadata), dict(meta))
