"""ValidatingAdmissionPolicy, evaluated with cel-python as the API server evaluates it.

One evaluator for the whole test suite: the chart tests (``tests/chart/test_admission_policy.py``) run the
rendered policy's CEL through :class:`PolicyEvaluator`, and the emulated API server
(:mod:`tests.support.kube_emulator`) runs every loaded policy through :class:`Admission` on CREATE, UPDATE (the
``status`` subresource included) and DELETE (``object`` null, ``oldObject`` the stored object).

What is covered: ``matchConstraints.resourceRules`` (and ``excludeResourceRules``; a binding's
``matchResources.resourceRules`` narrow further), ``matchConditions``, ``variables`` (evaluated in order;
a variable that fails to evaluate is an error wherever it is used), ``validations`` with ``message``,
``messageExpression`` and ``reason``, ``failurePolicy`` and the binding's ``validationActions``
(Deny refuses, Warn returns a warning, Audit records). Not covered: params (``paramKind``/``paramRef``),
namespace and object selectors, ``auditAnnotations``, CEL type checking and cost limits, and the
Kubernetes CEL libraries beyond standard CEL (cel-python has none of them).
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import celpy

__all__ = ["Admission", "Denial", "Failure", "PolicyEvaluator", "Review", "admission_request"]

# The HTTP status of each validation ``reason`` (absent: Invalid), as the API server maps them.
REASON_CODES = {"Forbidden": 403, "Invalid": 422, "RequestEntityTooLarge": 413, "Unauthorized": 401}
_env = celpy.Environment()


@functools.cache
def _compile(expression: str) -> Any:
    return _env.program(_env.compile(expression))


def admission_request(
    *, operation: str, user: dict[str, Any], namespace: str | None = None, name: str | None = None,
    group: str = "gatehouse.dev", version: str = "v1alpha1", resource: str = "toolapprovals",
    kind: str = "ToolApproval", subresource: str = "",
) -> dict[str, Any]:
    """The ``request`` variable of a policy's CEL: a subset of the AdmissionRequest the API server builds.

    Its empty ``name``, ``namespace`` and ``subResource`` are absent, as in the API server's (``omitempty``): there
    ``request.subResource != 'status'`` on a write to the main resource is an error (no such key), not true. Found
    by running the same cases on a real API server (tests/cluster/test_admission_policy.py)."""
    request: dict[str, Any] = {
        "uid": str(uuid.uuid4()), "operation": operation, "userInfo": user, "dryRun": False,
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": resource},
    }
    optional = {"namespace": namespace, "name": name, "subResource": subresource}
    request.update({key: value for key, value in optional.items() if value})
    return request


@dataclass(frozen=True)
class Failure:
    """A validation that did not pass: false, or (``error`` set) failed to evaluate to a bool."""

    message: str
    reason: str
    expression: str
    error: str | None = None
    index: int = -1  # which of spec.validations (-1: a matchCondition)

    def text(self) -> str:
        """Worded as the API server words it."""
        return f"expression '{self.expression}' resulted in error: {self.error}" if self.error else self.message


def _rule_matches(rule: dict[str, Any], group: str, version: str, resource: str, subresource: str, operation: str) -> bool:
    def among(value: str, allowed: Iterable[str]) -> bool:
        return "*" in allowed or value in allowed

    if not (among(group, rule.get("apiGroups", [])) and among(version, rule.get("apiVersions", []))
            and among(operation, rule.get("operations", []))):
        return False
    for wanted in rule.get("resources", []):  # "*": every resource but no subresource; "*/*": everything
        res, _, sub = wanted.partition("/")
        if wanted == "*/*" or (res in ("*", resource) and (sub == subresource or (sub == "*" and subresource != ""))):
            return True
    return False


class PolicyEvaluator:
    """One ValidatingAdmissionPolicy (the rendered document), its CEL compiled once."""

    def __init__(self, policy: dict[str, Any]) -> None:
        spec = policy["spec"]
        self.name: str = policy["metadata"]["name"]
        self.failure_policy: str = spec.get("failurePolicy", "Fail")
        self.match: dict[str, Any] = spec.get("matchConstraints") or {}
        self.variables = [(v["name"], v["expression"]) for v in spec.get("variables") or []]
        self.conditions = [(c["name"], c["expression"]) for c in spec.get("matchConditions") or []]
        self.validations: list[dict[str, Any]] = list(spec.get("validations") or [])
        for expression in [e for _, e in self.variables + self.conditions] + [v["expression"] for v in self.validations]:
            _compile(expression)  # a syntax error shows when the policy is loaded

    def matches(self, *, group: str, version: str, resource: str, subresource: str = "", operation: str) -> bool:
        args = (group, version, resource, subresource, operation)
        return any(_rule_matches(r, *args) for r in self.match.get("resourceRules") or []) and not any(
            _rule_matches(r, *args) for r in self.match.get("excludeResourceRules") or [])

    def evaluate(self, *, obj: Any, old: Any, request: dict[str, Any]) -> list[Failure]:
        """The validations that deny (empty: admitted). ``old`` is ``None`` on CREATE, ``obj`` on DELETE."""
        activation: dict[str, Any] = {
            "object": celpy.json_to_cel(obj), "oldObject": celpy.json_to_cel(old),
            "request": celpy.json_to_cel(request), "params": None, "namespaceObject": None,
        }
        variables = celpy.celtypes.MapType()
        activation["variables"] = variables
        for name, expression in self.variables:
            try:
                value = _compile(expression).evaluate(activation)
            except Exception as exc:  # used later, it is an error there (CEL errors are values)
                value = exc if isinstance(exc, celpy.CELEvalError) else celpy.CELEvalError(str(exc))
            variables[celpy.celtypes.StringType(name)] = value
        for name, expression in self.conditions:
            result, error = self._run(expression, activation)
            if error is not None:
                return [Failure(f"matchCondition {name!r}", "Invalid", expression, error)] if self.fails_closed else []
            if not result:
                return []
        out = []
        for index, validation in enumerate(self.validations):
            expression = validation["expression"]
            result, error = self._run(expression, activation)
            if result:
                continue
            if error is not None and not self.fails_closed:
                continue
            reason = validation.get("reason") or "Invalid"
            out.append(Failure(self._message(validation, activation), reason, expression, error, index))
        return out

    @property
    def fails_closed(self) -> bool:
        return self.failure_policy != "Ignore"

    @staticmethod
    def _run(expression: str, activation: dict[str, Any]) -> tuple[bool, str | None]:
        try:
            result = _compile(expression).evaluate(activation)
        except Exception as exc:
            return False, str(exc) or type(exc).__name__
        if not isinstance(result, celpy.celtypes.BoolType):
            return False, f"expected a bool, got {result!r}"
        return bool(result), None

    @staticmethod
    def _message(validation: dict[str, Any], activation: dict[str, Any]) -> str:
        if validation.get("messageExpression"):
            try:
                message = _compile(validation["messageExpression"]).evaluate(activation)
            except Exception:  # the API server falls back to message
                message = None
            if isinstance(message, str) and message.strip() and "\n" not in message:
                return str(message)
        return validation.get("message") or f"failed expression: {validation['expression']}"


@dataclass(frozen=True)
class Denial:
    status: int
    reason: str
    message: str


@dataclass
class Review:
    """What admission decided about one request: a denial (or ``None``), warnings for the client, audit lines."""

    denial: Denial | None = None
    warnings: list[str] = field(default_factory=list)
    audit: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Binding:
    name: str
    policy: str
    actions: tuple[str, ...]
    match: dict[str, Any]


class Admission:
    """The policies and bindings loaded into the emulated API server."""

    def __init__(self) -> None:
        self.policies: dict[str, PolicyEvaluator] = {}
        self.bindings: list[_Binding] = []

    def add(self, policy: dict[str, Any], binding: dict[str, Any]) -> None:
        evaluator = PolicyEvaluator(policy)
        self.policies[evaluator.name] = evaluator
        self.add_binding(binding)

    def add_binding(self, binding: dict[str, Any]) -> None:
        spec = binding["spec"]
        self.bindings.append(_Binding(
            binding["metadata"]["name"], spec["policyName"], tuple(spec.get("validationActions") or ()),
            spec.get("matchResources") or {}))

    def add_documents(self, docs: Iterable[dict[str, Any]]) -> int:
        """Load every policy and binding among ``docs`` (e.g. a rendered chart); returns how many bindings."""
        docs = [d for d in docs if d]
        for doc in docs:
            if doc.get("kind") == "ValidatingAdmissionPolicy":
                evaluator = PolicyEvaluator(doc)
                self.policies[evaluator.name] = evaluator
        bindings = [d for d in docs if d.get("kind") == "ValidatingAdmissionPolicyBinding"]
        for binding in bindings:
            self.add_binding(binding)
        return len(bindings)

    def review(
        self, *, operation: str, group: str, version: str, resource: str, subresource: str | None, kind: str,
        obj: Any, old: Any, user: dict[str, Any], namespace: str | None, name: str | None,
    ) -> Review:
        """Run every bound policy matching the request; the first Deny failure refuses it, as in the API server."""
        review = Review()
        where = {"group": group, "version": version, "resource": resource, "subresource": subresource or "",
                 "operation": operation}
        request: dict[str, Any] | None = None
        for binding in self.bindings:
            policy = self.policies.get(binding.policy)
            if policy is None or not policy.matches(**where):
                continue
            narrowed = binding.match.get("resourceRules")
            if narrowed and not any(_rule_matches(r, *where.values()) for r in narrowed):
                continue
            if request is None:
                request = admission_request(
                    operation=operation, user=user, namespace=namespace, name=name, group=group, version=version,
                    resource=resource, kind=kind, subresource=subresource or "")
            for failure in policy.evaluate(obj=obj, old=old, request=request):
                if "Deny" in binding.actions and review.denial is None:
                    qualified = f"{resource}.{group}" if group else resource
                    subject = f'{qualified} "{name}"' if name else qualified
                    review.denial = Denial(
                        REASON_CODES.get(failure.reason, 422), failure.reason,
                        f"{subject} is forbidden: ValidatingAdmissionPolicy '{policy.name}' with binding "
                        f"'{binding.name}' denied request: {failure.text()}")
                if "Warn" in binding.actions:
                    review.warnings.append(
                        f"Validation failed for ValidatingAdmissionPolicy '{policy.name}' with binding "
                        f"'{binding.name}': {failure.text()}")
                if "Audit" in binding.actions:
                    review.audit.append(f"{policy.name}/{binding.name}: {failure.text()}")
        return review
