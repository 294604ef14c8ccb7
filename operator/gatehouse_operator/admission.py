"""The ``AdmissionPolicy`` condition: does the cluster enforce the chart's ToolApproval admission policy?

A decision set with kubectl on a ToolApproval carries the deciding user's name; only the chart's
ValidatingAdmissionPolicy (``<release>-toolapproval-decision``) makes the API server check that name against
the user who really sent it. The runtime reads this condition on its own Agent and honours kubectl decisions
only while it is True. The operator, which may read cluster-scoped objects, checks on every reconcile:

- the policy (one GET): absent -> ``NotInstalled``;
- its binding (one GET, the binding of the same name, as the chart names it; only if that one is missing or
  binds another policy, one LIST of every binding): a binding of the policy whose ``validationActions`` include
  ``Deny`` -> ``Enforced``; none -> ``NotEnforcing`` (``Warn``/``Audit`` only report, they never refuse);
- a read the API refuses -> ``Unknown``.

With ``--trust-kubectl-without-admission-policy`` every outcome but ``Enforced`` reads True with reason
``TrustedByOperator`` instead: the platform team vouches for the cluster's own checks.
"""

from __future__ import annotations

from typing import Any

from gatehouse_operator.kube import ApiException, ChildrenApi
from gatehouse_operator.settings import OperatorConfig
from gatehouse_operator.status import StatusCondition

__all__ = ["CONDITION", "admission_condition"]

CONDITION = "AdmissionPolicy"
POLICY = "ValidatingAdmissionPolicy"
BINDING = "ValidatingAdmissionPolicyBinding"


def _binds_with_deny(binding: dict[str, Any] | None, policy: str) -> bool:
    spec = (binding or {}).get("spec") or {}
    return spec.get("policyName") == policy and "Deny" in (spec.get("validationActions") or [])


def _verdict(kube: ChildrenApi, policy: str) -> tuple[bool, str, str]:
    """(enforced, reason, what was found), as the cluster answers, without the operator's own trust."""
    try:
        if kube.get(POLICY, None, policy) is None:
            return False, "NotInstalled", f"{POLICY} {policy!r} is not installed"
        binding = kube.get(BINDING, None, policy)
        if binding is None or (binding.get("spec") or {}).get("policyName") != policy:
            others = [b for b in kube.list_admission_policy_bindings() if (b.get("spec") or {}).get("policyName") == policy]
            binding = next((b for b in others if _binds_with_deny(b, policy)), others[0] if others else None)
    except ApiException as exc:
        return False, "Unknown", f"cannot read {POLICY} {policy!r} or its bindings ({exc.status} {exc.reason})"
    if binding is None:
        return False, "NotEnforcing", f"{POLICY} {policy!r} has no binding"
    name = binding["metadata"]["name"]
    actions = list((binding.get("spec") or {}).get("validationActions") or [])
    if not _binds_with_deny(binding, policy):
        return False, "NotEnforcing", f"{POLICY} {policy!r} is bound by {name!r} with validationActions {actions}, without Deny"
    return True, "Enforced", f"{POLICY} {policy!r} is bound by {name!r} with validationActions {actions}"


def admission_condition(kube: ChildrenApi, config: OperatorConfig) -> StatusCondition:
    """The condition every Agent carries (see the module docstring)."""
    enforced, reason, found = _verdict(kube, config.admission_policy)
    if enforced:
        return StatusCondition(CONDITION, True, reason, f"{found}: kubectl decisions on ToolApprovals are honoured")
    if config.trust_kubectl_without_admission_policy:
        return StatusCondition(
            CONDITION, True, "TrustedByOperator",
            f"{found} ({reason}), but the operator runs with --trust-kubectl-without-admission-policy: "
            "kubectl decisions on ToolApprovals are honoured",
        )
    return StatusCondition(
        CONDITION, False, reason,
        f"{found}: kubectl decisions on ToolApprovals are ignored until it is enforced "
        "(a binding with validationActions Deny)",
    )
