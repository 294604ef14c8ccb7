"""The ToolApproval ValidatingAdmissionPolicy, evaluated with cel-python exactly as rendered by the chart:
a decision is set once, by the user it names, and nothing else in spec changes after creation."""

from __future__ import annotations

import copy
from typing import Any

import celpy
import pytest

from tests.chart.conftest import Render, of_kind
from tests.support import crd_validation

ALICE = "alice@example.com"
CREATED: dict[str, Any] = {
    "apiVersion": "gatehouse.dev/v1alpha1",
    "kind": "ToolApproval",
    "metadata": {"name": "apr-1", "namespace": "default", "labels": {"gatehouse.dev/agent": "file-manager"}},
    "spec": {
        "agentRef": "file-manager",
        "contextId": "ctx-1",
        "taskId": "task-1",
        "requestId": "apr-1",
        "callId": "adk-1",
        "tool": "delete_file",
        "arguments": {"path": "/data/a.txt", "options": {"force": False}},
        "hint": "delete_file needs approval",
        "requestedAt": "2026-11-21T10:00:00Z",
        "expiresAt": "2026-11-21T10:15:00Z",
    },
}


def _decided(by: str = ALICE, action: str = "Approve", **extra: str) -> dict[str, Any]:
    obj = copy.deepcopy(CREATED)
    obj["spec"]["decision"] = {"action": action, "decidedBy": by, **extra}
    return obj


def _question(obj: dict[str, Any], kind: str = "hitl_request") -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"]["labels"]["gatehouse.dev/kind"] = kind
    return out


def _with(obj: dict[str, Any], **spec: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    for key, value in spec.items():
        if value is None:
            out["spec"].pop(key)
        else:
            out["spec"][key] = value
    return out


@pytest.fixture(scope="module")
def policy(render: Render) -> dict[str, Any]:
    (vap,) = of_kind(render(), "ValidatingAdmissionPolicy")
    return vap


@pytest.fixture(scope="module")
def admit(policy: dict[str, Any]) -> Any:
    """``admit(old, new, user)`` -> messages of the validations that deny the UPDATE (empty: admitted)."""
    env = celpy.Environment()
    programs = [(v["message"], env.program(env.compile(v["expression"]))) for v in policy["spec"]["validations"]]

    def _admit(old: dict[str, Any], new: dict[str, Any], user: str = ALICE) -> list[str]:
        activation = {
            "oldObject": celpy.json_to_cel(old),
            "object": celpy.json_to_cel(new),
            "request": celpy.json_to_cel({"operation": "UPDATE", "userInfo": {"username": user, "groups": ["approvers"]}}),
        }
        denied = []
        for message, program in programs:
            try:
                ok = program.evaluate(activation)
            except Exception as exc:  # failurePolicy: Fail -- an expression that errors denies
                denied.append(f"{message} (error: {exc})")
                continue
            if not isinstance(ok, celpy.celtypes.BoolType):
                denied.append(f"{message} (not a bool: {ok!r})")
            elif not ok:
                denied.append(message)
        return denied

    return _admit


def test_policy_matches_toolapproval_updates_only_and_is_bound(render: Render, policy: dict[str, Any]) -> None:
    assert policy["apiVersion"] == "admissionregistration.k8s.io/v1"
    assert policy["spec"]["failurePolicy"] == "Fail"
    assert policy["spec"]["matchConstraints"]["resourceRules"] == [
        {"apiGroups": ["gatehouse.dev"], "apiVersions": ["v1alpha1"], "operations": ["UPDATE"], "resources": ["toolapprovals"]},
    ]
    (binding,) = of_kind(render(), "ValidatingAdmissionPolicyBinding")
    assert binding["spec"] == {"policyName": policy["metadata"]["name"], "validationActions": ["Deny"]}


def test_every_spec_field_but_the_decision_is_fixed(policy: dict[str, Any]) -> None:
    """Keeps the template's field list in step with crds/toolapproval.yaml."""
    fields = set(crd_validation.schema_for("ToolApproval")["properties"]["spec"]["properties"]) - {"decision"}
    messages = {v["message"] for v in policy["spec"]["validations"]}
    assert {f"spec.{f} cannot change after creation" for f in fields} <= messages
    assert len(messages) == len(fields) + 4  # + decision immutable, decidedBy, kind label fixed, no decision on a question


ALLOWED = {
    "label change, undecided": (CREATED, {**CREATED, "metadata": {**CREATED["metadata"], "labels": {"x": "y"}}}, ALICE),
    "no change at all": (CREATED, CREATED, "system:serviceaccount:default:file-manager"),
    "alice approves as herself": (CREATED, _decided(), ALICE),
    "alice denies with a reason": (CREATED, _decided(action="Deny", reason="not today"), ALICE),
    "a decided object is re-applied unchanged by someone else": (_decided(), _decided(), "bob"),
    "metadata changes after the decision": (
        _decided(), {**_decided(), "metadata": {"name": "apr-1", "finalizers": ["f"]}}, "bob"),
    "a question's other metadata changes": (_question(CREATED), {**_question(CREATED), "metadata": {
        **_question(CREATED)["metadata"], "annotations": {"x": "y"}}}, ALICE),
    "an approval labelled as one is decided": (
        _question(CREATED, "tool_approval"), _question(_decided(), "tool_approval"), ALICE),
}

FORBIDDEN = {
    "decision names another user": (CREATED, _decided(by="bob"), ALICE, "decidedBy"),
    "decision without decidedBy": (CREATED, _with(CREATED, decision={"action": "Approve"}), ALICE, "decidedBy"),
    "decision flipped": (_decided(), _decided(action="Deny"), ALICE, "immutable"),
    "decision reason edited": (_decided(), _decided(reason="changed my mind"), ALICE, "immutable"),
    "decision taken back": (_decided(), CREATED, ALICE, "immutable"),
    "decider rewritten": (_decided(), _decided(by="bob"), "bob", "immutable"),
    "tool changed": (CREATED, _with(CREATED, tool="write_file"), ALICE, "spec.tool "),
    "arguments changed with the decision": (
        CREATED, _with(_decided(), arguments={"path": "/etc/passwd", "options": {"force": False}}), ALICE, "spec.arguments"),
    "nested argument changed": (CREATED, _with(CREATED, arguments={"path": "/data/a.txt", "options": {"force": True}}), ALICE,
                                "spec.arguments"),
    "expiry pushed back": (CREATED, _with(CREATED, expiresAt="2027-01-01T00:00:00Z"), ALICE, "spec.expiresAt"),
    "expiry removed": (CREATED, _with(CREATED, expiresAt=None), ALICE, "spec.expiresAt"),
    "hint added later": (_with(CREATED, hint=None), CREATED, ALICE, "spec.hint"),
    "agent swapped": (CREATED, _with(CREATED, agentRef="other"), ALICE, "spec.agentRef"),
    "a question given a decision": (_question(CREATED), _question(_decided()), ALICE, "hitl_request question"),
    "a question relabelled and decided": (_question(CREATED), _question(_decided(), "tool_approval"), ALICE, "kind label"),
    "a question's kind label removed": (_question(CREATED), CREATED, ALICE, "kind label"),
}


@pytest.mark.parametrize(("old", "new", "user"), ALLOWED.values(), ids=ALLOWED.keys())
def test_allowed_updates(admit: Any, old: dict[str, Any], new: dict[str, Any], user: str) -> None:
    assert admit(old, new, user) == []


@pytest.mark.parametrize(("old", "new", "user", "why"), FORBIDDEN.values(), ids=FORBIDDEN.keys())
def test_forbidden_updates(admit: Any, old: dict[str, Any], new: dict[str, Any], user: str, why: str) -> None:
    denied = admit(old, new, user)
    assert denied, "the update was admitted"
    assert any(why in message for message in denied), denied
    assert not any("error:" in message for message in denied), denied


def test_the_fixture_objects_are_valid_toolapprovals() -> None:
    for obj in (CREATED, _decided(), _decided(action="Deny", reason="r")):
        assert crd_validation.validate(obj) == []
