"""What an event of an Agent's state claim changes in its ``StateReady`` condition: a pure function.

The operator watches the claims it labels (``handlers.claim_event``) because nothing else tells it when one binds,
is lost or grows: a claim that binds while no pod runs changes no other object it watches. ``StateReady`` is derived
from the claim and from what the last reconcile found (the state's layout, the notes of what it could not do to the
claim), which :class:`gatehouse_operator.deployment_status.AppliedDeployment` keeps per Agent beside the condition it
wrote. :func:`follow` derives the condition again, by :func:`gatehouse_operator.claims.state_condition` -- the very
function a reconcile writes it with -- and says whether it changed: most claim events (our own label patch, the
volume controller's annotations, a resync's relist) change nothing and cost no request.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from gatehouse_operator.claims import state_condition
from gatehouse_operator.deployment_status import AppliedDeployment

__all__ = ["follow", "is_recorded"]


def is_recorded(record: AppliedDeployment | None, claim: Mapping[str, Any]) -> bool:
    """Whether ``claim`` is the state claim of the Agent ``record`` was left by (the claim a reconcile read or made for
    the layout it applied; a claim of an earlier layout, or of a name no reconcile of this process has seen, is not)."""
    name = (claim.get("metadata") or {}).get("name")
    return record is not None and record.claim is not None and record.claim == name and record.layout is not None


def follow(record: AppliedDeployment | None, claim: Mapping[str, Any]) -> AppliedDeployment | None:
    """The record with ``StateReady`` as ``claim`` (as its watch event shows it) makes it, when that differs from what
    the Agent was last told; ``None`` when there is nothing to write (it says the same, or the claim is not this
    record's)."""
    if record is None or record.layout is None or not is_recorded(record, claim):
        return None
    condition = state_condition(record.layout, dict(claim), record.notes)
    if condition == record.state_ready:
        return None
    return dataclasses.replace(record, state_ready=condition)
