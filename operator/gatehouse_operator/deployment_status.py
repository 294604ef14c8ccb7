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

No child is read, the state claim included: the operator watches the claims it labels, and a claim's event brings
``StateReady`` up to date (:mod:`gatehouse_operator.claim_status`, from what the record keeps: the claim's name, the
state's layout, what the last reconcile could not do to the claim, and the ``StateReady`` the Agent was last told).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gatehouse_operator.apply import owned_equal
from gatehouse_operator.status import StatusCondition, ready_condition
from gatehouse_operator.storage import StateLayout

__all__ = ["AppliedDeployment", "applied", "status_only"]


@dataclass(frozen=True)
class AppliedDeployment:
    """A Deployment as a reconcile left it: its generation, the metadata rendered for it, and the ``Ready`` condition
    derived from it (before the runtime's own reason is folded in); and what ``StateReady`` is derived from besides
    the claim (the state claim's name, the state's layout, the notes of what the reconcile could not do to the claim)
    with the ``StateReady`` the Agent was last told, which a claim's event compares with
    (:mod:`gatehouse_operator.claim_status`). Kept per Agent: a few hundred bytes."""

    generation: int | None
    metadata: Mapping[str, Any]
    ready: StatusCondition
    claim: str | None = None
    state_ready: StatusCondition | None = None
    layout: StateLayout | None = None
    notes: tuple[str, ...] = ()

    def with_ready(self, ready: StatusCondition) -> AppliedDeployment:
        return dataclasses.replace(self, ready=ready)


def applied(desired: Mapping[str, Any], actual: Mapping[str, Any], layout: StateLayout | None = None,
            state_ready: StatusCondition | None = None, notes: tuple[str, ...] = ()) -> AppliedDeployment:
    """The record of a Deployment rendered as ``desired`` and answered by the API server as ``actual``, beside the
    state's ``layout``, the ``StateReady`` the same reconcile derived from its claim, and the ``notes`` it made of the
    claim."""
    generation = (actual.get("metadata") or {}).get("generation")
    return AppliedDeployment(generation if isinstance(generation, int) else None,
                             copy.deepcopy(dict(desired.get("metadata") or {})), ready_condition(dict(actual)),
                             claim=layout.claim if layout is not None else None, state_ready=state_ready,
                             layout=layout, notes=notes)


def status_only(record: AppliedDeployment | None, event: Mapping[str, Any]) -> bool:
    """Whether ``event`` (a Deployment as its watch event shows it) differs from what ``record`` was taken from only in
    what the Deployment controller writes (the module docstring): its spec and our metadata are as applied."""
    if record is None or record.generation is None:
        return False
    meta = event.get("metadata") or {}
    if meta.get("deletionTimestamp") or meta.get("generation") != record.generation:
        return False
    return owned_equal(dict(record.metadata), dict(meta))
