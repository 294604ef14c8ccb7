"""The ``ApproversNamed`` condition: whether every call the Agent gates names who, besides its requester, may decide it.

Until the release that closed issue 31, an Agent with no approvers block let any authenticated caller decide its gated
calls on REST and kubectl. Now such calls are decided by their requester alone (:mod:`agent_runtime.contract.authority`), so an
Agent that relied on the old default is told here, on its status: ``False`` with reason ``RequesterOnly`` naming where
(:func:`agent_runtime.contract.policy.requester_only`) and how to let others decide. Pure.
"""

from __future__ import annotations

from agent_runtime.contract.policy import PolicySource, requester_only
from gatehouse_operator.status import StatusCondition

__all__ = ["CONDITION", "approvers_condition"]

CONDITION = "ApproversNamed"


def approvers_condition(config: PolicySource) -> StatusCondition:
    places = requester_only(config)
    if not places:
        return StatusCondition(CONDITION, True, "Named", "every gated call has approvers")
    return StatusCondition(
        CONDITION, False, "RequesterOnly",
        f"{', '.join(places)} gate calls with no approvers: only the person who asked decides them, on every channel "
        "(before, any authenticated caller could on REST and kubectl); to let others decide, set spec.approval.approvers "
        "(users or groups, or anyAuthenticated: true), or approvers on the tool or rule",
    )
