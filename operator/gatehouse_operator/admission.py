"""The ``AdmissionPolicy`` condition: does the cluster enforce the chart's ToolApproval admission policy?

A decision set with kubectl on a ToolApproval carries the deciding user's name; only the chart's
ValidatingAdmissionPolicy (``<release>-toolapproval-decision``) makes the API server check that name against
the user who really sent it. The runtime reads this condition on its own Agent and honours kubectl decisions
only while it is True. The operator, which may read cluster-scoped objects, checks:

- the policy (one GET): absent -> ``NotInstalled``;
- its binding (one GET, the binding of the same name, as the chart names it; only if that one is missing or
  binds another policy, one LIST of every binding): a binding of the policy whose ``validationActions`` include
  ``Deny`` -> ``Enforced``; none -> ``NotEnforcing`` (``Warn``/``Audit`` only report, they never refuse);
- a read the API refuses -> ``Unknown``.

With ``--trust-kubectl-without-admission-policy`` every outcome but ``Enforced`` reads True with reason
``TrustedByOperator`` instead: the platform team vouches for the cluster's own checks.

The answer is the cluster's, not the Agent's: one :class:`PolicyVerdict` is shared by every reconcile and read again
when the operator's watch sees the policy or any binding change (``handlers.admission_policy_event``, which then
reconciles every Agent whose condition it changes), or when it is older than :data:`MAX_AGE` (a missed event).
Thousands of Agents reconciled at once cost a handful of reads, not one or two each.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from gatehouse_operator.kube import ApiException, ChildrenApi
from gatehouse_operator.status import StatusCondition

if TYPE_CHECKING:
    from gatehouse_operator.settings import OperatorConfig

__all__ = ["CONDITION", "MAX_AGE", "PolicyVerdict", "admission_condition"]

MAX_AGE = 30.0  # seconds a verdict is reused without an event saying the policy or a binding changed

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


Verdict = tuple[bool, str, str]


class PolicyVerdict:
    """The cluster's last answer (:func:`_verdict`), read again on :meth:`refresh` or once older than ``max_age``.

    Reads happen under a lock: reconciles running at once wait for one read instead of each sending their own."""

    def __init__(self, max_age: float = MAX_AGE) -> None:
        self.max_age = max_age
        self._lock = threading.Lock()
        self._verdict: Verdict | None = None
        self._at = 0.0

    def get(self, kube: ChildrenApi, policy: str) -> Verdict:
        with self._lock:
            if self._verdict is None or time.monotonic() - self._at > self.max_age:
                self._verdict, self._at = _verdict(kube, policy), time.monotonic()
            return self._verdict

    def refresh(self, kube: ChildrenApi, policy: str) -> bool:
        """Read again now (the policy or a binding changed); whether the answer differs from the last one."""
        with self._lock:
            before = self._verdict
            self._verdict, self._at = _verdict(kube, policy), time.monotonic()
            return before is not None and self._verdict != before


def admission_condition(kube: ChildrenApi, config: OperatorConfig, verdict: PolicyVerdict | None = None) -> StatusCondition:
    """The condition every Agent carries (see the module docstring); ``verdict``: the shared answer (else read now)."""
    enforced, reason, found = verdict.get(kube, config.admission_policy) if verdict is not None else _verdict(
        kube, config.admission_policy)
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
