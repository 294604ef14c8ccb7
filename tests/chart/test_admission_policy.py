"""The ToolApproval ValidatingAdmissionPolicy, evaluated with cel-python (tests/support/admission.py, the same
evaluator the emulated API server runs) exactly as rendered by the chart.

CREATE: only the agent's runtime creates a ToolApproval, for its own agent, without a decision or votes.
UPDATE: votes are appended one per request, in the requester's own name and groups, once per user; a legacy
decision is set once, by the user it names; nothing else in spec changes after creation.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.chart.conftest import Render, of_kind
from tests.support import crd_validation
from tests.support.admission import Failure, PolicyEvaluator, admission_request

ALICE = "alice@example.com"
BOB = "bob@example.com"
GROUPS = ["approvers", "system:authenticated"]
RUNTIME = "system:serviceaccount:default:file-manager"
RUNTIME_GROUPS = ["system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"]
BRIDGE = "system:serviceaccount:gatehouse-system:gatehouse-slack"  # the Slack bridge, a delegator voting for people
BRIDGE_GROUPS = ["system:serviceaccounts", "system:serviceaccounts:gatehouse-system", "system:authenticated"]
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


def _vote(by: str = ALICE, action: str = "Approve", groups: list[str] | None = GROUPS, **extra: Any) -> dict[str, Any]:
    vote: dict[str, Any] = {"by": by, "action": action, **extra}
    if groups is not None:
        vote["groups"] = list(groups)
    return vote


def _voted(*votes: dict[str, Any], obj: dict[str, Any] = CREATED) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["spec"]["votes"] = [copy.deepcopy(v) for v in votes]
    return out


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


def _labelled(obj: dict[str, Any], **labels: str | None) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    for key, value in labels.items():
        if value is None:
            out["metadata"]["labels"].pop(key.replace("__", "/").replace("_", "."), None)
        else:
            out["metadata"]["labels"][key.replace("__", "/").replace("_", ".")] = value
    return out


def _in_namespace(obj: dict[str, Any], namespace: str) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"]["namespace"] = namespace
    return out


@pytest.fixture(scope="module")
def policy(render: Render) -> dict[str, Any]:
    (vap,) = of_kind(render(), "ValidatingAdmissionPolicy")
    return vap


Admit = Any


def _failures(
    policy: dict[str, Any], old: dict[str, Any] | None, new: dict[str, Any], user: str, groups: list[str],
) -> list[Failure]:
    request = admission_request(
        operation="CREATE" if old is None else "UPDATE", user={"username": user, "groups": groups},
        namespace=new["metadata"].get("namespace"), name=new["metadata"]["name"],
    )
    return PolicyEvaluator(policy).evaluate(obj=new, old=old, request=request)


def _admitter(policy: dict[str, Any]) -> Admit:
    """``admit(old, new, user, groups)`` -> messages of the validations that deny (empty: admitted);
    ``old=None`` is a CREATE. An expression that errors denies (failurePolicy: Fail) and says so."""

    def _admit(old: dict[str, Any] | None, new: dict[str, Any], user: str = ALICE, groups: list[str] = GROUPS) -> list[str]:
        failures = _failures(policy, old, new, user, groups)
        return [f"{f.message} (error: {f.error})" if f.error else f.message for f in failures]

    return _admit


@pytest.fixture(scope="module")
def admit(policy: dict[str, Any]) -> Admit:
    return _admitter(policy)


def test_policy_matches_toolapproval_creates_and_updates_and_is_bound(render: Render, policy: dict[str, Any]) -> None:
    assert policy["apiVersion"] == "admissionregistration.k8s.io/v1"
    assert policy["spec"]["failurePolicy"] == "Fail"
    assert policy["spec"]["matchConstraints"]["resourceRules"] == [
        {"apiGroups": ["gatehouse.dev"], "apiVersions": ["v1alpha1"], "operations": ["CREATE", "UPDATE"],
         "resources": ["toolapprovals"]},
    ]
    (binding,) = of_kind(render(), "ValidatingAdmissionPolicyBinding")
    assert binding["spec"] == {"policyName": policy["metadata"]["name"], "validationActions": ["Deny"]}
    evaluator = PolicyEvaluator(policy)
    assert not evaluator.matches(group="gatehouse.dev", version="v1alpha1", resource="toolapprovals",
                                 subresource="status", operation="UPDATE")  # the runtime's status is not matched
    assert not evaluator.matches(group="gatehouse.dev", version="v1alpha1", resource="toolapprovals", operation="DELETE")


def test_every_spec_field_but_the_decision_and_votes_is_fixed(policy: dict[str, Any]) -> None:
    """Keeps the template's field list in step with crds/toolapproval.yaml."""
    fields = set(crd_validation.schema_for("ToolApproval")["properties"]["spec"]["properties"]) - {"decision", "votes"}
    messages = {v["message"] for v in policy["spec"]["validations"]}
    assert {f"spec.{f} cannot change after creation" for f in fields} <= messages
    # + CREATE: creator, agentRef label, nothing decided; votes: append-only, one per request, by, groups, once per
    # user, not on a question; decision: immutable, decidedBy, not on a question; the kind label fixed
    assert len(messages) == len(fields) + 13


CREATES_ALLOWED = {
    "the agent's runtime creates it": (CREATED, RUNTIME, RUNTIME_GROUPS),
    "the runtime creates a question": (_question(CREATED), RUNTIME, RUNTIME_GROUPS),
    "an empty vote list is no vote": (_voted(), RUNTIME, RUNTIME_GROUPS),
}

CREATES_FORBIDDEN = {
    "alice creates one": (CREATED, ALICE, GROUPS, "created by the agent's runtime (ServiceAccount default/file-manager)"),
    "another agent's runtime creates one": (
        CREATED, "system:serviceaccount:default:other", RUNTIME_GROUPS, "a user cannot create one"),
    "the runtime of another namespace": (
        _in_namespace(CREATED, "team-b"), RUNTIME, RUNTIME_GROUPS, "(ServiceAccount team-b/file-manager)"),
    "agentRef is not the agent label": (_with(CREATED, agentRef="other"), RUNTIME, RUNTIME_GROUPS, "spec.agentRef must equal"),
    "created with a decision": (_decided(by=RUNTIME), RUNTIME, RUNTIME_GROUPS, "carries no spec.decision"),
    "created with a vote": (_voted(_vote(RUNTIME, groups=RUNTIME_GROUPS)), RUNTIME, RUNTIME_GROUPS, "no spec.votes"),
    "created without the agent label": (
        _labelled(CREATED, gatehouse_dev__agent=None), RUNTIME, RUNTIME_GROUPS, "(ServiceAccount <namespace>/<agent>)"),
}


@pytest.mark.parametrize(("new", "user", "groups"), CREATES_ALLOWED.values(), ids=CREATES_ALLOWED.keys())
def test_allowed_creates(admit: Admit, new: dict[str, Any], user: str, groups: list[str]) -> None:
    assert admit(None, new, user, groups) == []


@pytest.mark.parametrize(("new", "user", "groups", "why"), CREATES_FORBIDDEN.values(), ids=CREATES_FORBIDDEN.keys())
def test_forbidden_creates(admit: Admit, new: dict[str, Any], user: str, groups: list[str], why: str) -> None:
    denied = admit(None, new, user, groups)
    assert denied, "the create was admitted"
    assert any(why in message for message in denied), denied
    assert not any("error:" in message for message in denied), denied


def test_runtime_users_may_create_too(render: Render) -> None:
    """A runtime run outside the cluster: admissionPolicy.runtimeUsers names it."""
    (vap,) = of_kind(render("--set", "admissionPolicy.runtimeUsers={gatehouse-runtime,ci}"), "ValidatingAdmissionPolicy")
    admit = _admitter(vap)
    assert admit(None, CREATED, "gatehouse-runtime", ["system:authenticated"]) == []
    assert admit(None, CREATED, "ci") == []
    assert admit(None, CREATED, RUNTIME, RUNTIME_GROUPS) == []
    assert any("a user cannot create one" in m for m in admit(None, CREATED, ALICE))


ALLOWED = {
    "label change, undecided": (CREATED, {**CREATED, "metadata": {**CREATED["metadata"], "labels": {"x": "y"}}}, ALICE),
    "no change at all": (CREATED, CREATED, RUNTIME),
    "alice approves as herself": (CREATED, _decided(), ALICE),
    "alice denies with a reason": (CREATED, _decided(action="Deny", reason="not today"), ALICE),
    "a decided object is re-applied unchanged by someone else": (_decided(), _decided(), "bob"),
    "metadata changes after the decision": (
        _decided(), {**_decided(), "metadata": {"name": "apr-1", "finalizers": ["f"]}}, "bob"),
    "a question's other metadata changes": (_question(CREATED), {**_question(CREATED), "metadata": {
        **_question(CREATED)["metadata"], "annotations": {"x": "y"}}}, ALICE),
    "an approval labelled as one is decided": (
        _question(CREATED, "tool_approval"), _question(_decided(), "tool_approval"), ALICE),
    "alice casts the first vote": (CREATED, _voted(_vote()), ALICE),
    "alice votes into an empty list": (_voted(), _voted(_vote()), ALICE),
    "bob adds his vote after alice's": (_voted(_vote()), _voted(_vote(), _vote(BOB, "Deny", reason="no")), BOB),
    "votes re-applied unchanged by someone else": (_voted(_vote()), _voted(_vote()), BOB),
    "the bridge votes for two people": (
        _voted(_vote(by=BRIDGE, groups=BRIDGE_GROUPS, onBehalfOf={"user": ALICE})),
        _voted(_vote(by=BRIDGE, groups=BRIDGE_GROUPS, onBehalfOf={"user": ALICE}),
               _vote(by=BRIDGE, groups=BRIDGE_GROUPS, onBehalfOf={"user": BOB})), BRIDGE),
    "a vote on an approval labelled as one": (
        _question(CREATED, "tool_approval"), _question(_voted(_vote()), "tool_approval"), ALICE),
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
    "a question given a decision": (_question(CREATED), _question(_decided()), ALICE, "takes no spec.decision"),
    "a question relabelled and decided": (_question(CREATED), _question(_decided(), "tool_approval"), ALICE, "kind label"),
    "a question's kind label removed": (_question(CREATED), CREATED, ALICE, "kind label"),
    # votes
    "a vote in another user's name": (CREATED, _voted(_vote(by="ceo@example.com")), ALICE, "by must be the name"),
    "a vote claiming a group alice is not in": (
        CREATED, _voted(_vote(groups=[*GROUPS, "security-leads"])), ALICE, "groups must be the groups"),
    "a vote leaving out one of alice's groups": (CREATED, _voted(_vote(groups=["approvers"])), ALICE, "groups must be"),
    "a vote without groups": (CREATED, _voted(_vote(groups=None)), ALICE, "groups must be the groups"),
    "two votes in one request": (CREATED, _voted(_vote(), _vote(BOB, groups=GROUPS)), ALICE, "one new vote per request"),
    "alice votes twice": (_voted(_vote()), _voted(_vote(), _vote(action="Deny")), ALICE, "a user votes once"),
    "the bridge votes twice for alice": (
        _voted(_vote(by=BRIDGE, groups=BRIDGE_GROUPS, onBehalfOf={"user": ALICE})),
        _voted(_vote(by=BRIDGE, groups=BRIDGE_GROUPS, onBehalfOf={"user": ALICE}),
               _vote(by=BRIDGE, groups=BRIDGE_GROUPS, action="Deny", onBehalfOf={"user": ALICE})), BRIDGE, "a user votes once"),
    "a vote on behalf of someone in another's name": (
        CREATED, _voted(_vote(by=BRIDGE, groups=BRIDGE_GROUPS, onBehalfOf={"user": BOB})), ALICE, "by must be the name"),
    "a vote flipped": (_voted(_vote(), _vote(BOB)), _voted(_vote(), _vote(BOB, "Deny")), BOB, "append-only"),
    "a vote removed": (_voted(_vote(), _vote(BOB)), _voted(_vote()), ALICE, "append-only"),
    "all votes cleared": (_voted(_vote()), CREATED, BOB, "append-only"),
    "votes reordered": (_voted(_vote(), _vote(BOB)), _voted(_vote(BOB), _vote()), ALICE, "append-only"),
    "a vote inserted before the others": (_voted(_vote(BOB)), _voted(_vote(), _vote(BOB)), ALICE, "append-only"),
    "a vote on a question": (_question(CREATED), _question(_voted(_vote())), ALICE, "takes no spec.votes"),
}


@pytest.mark.parametrize(("old", "new", "user"), ALLOWED.values(), ids=ALLOWED.keys())
def test_allowed_updates(admit: Admit, old: dict[str, Any], new: dict[str, Any], user: str) -> None:
    groups = GROUPS if user in (ALICE, BOB) else BRIDGE_GROUPS if user == BRIDGE else RUNTIME_GROUPS
    assert admit(old, new, user, groups) == []


@pytest.mark.parametrize(("old", "new", "user", "why"), FORBIDDEN.values(), ids=FORBIDDEN.keys())
def test_forbidden_updates(admit: Admit, old: dict[str, Any], new: dict[str, Any], user: str, why: str) -> None:
    denied = admit(old, new, user)
    assert denied, "the update was admitted"
    assert any(why in message for message in denied), denied
    assert not any("error:" in message for message in denied), denied


# Cases only one rule refuses: without that rule they are admitted, so the rule is what stops them. (Two votes in
# one request are also refused by the `by` or the once-per-user rule; "one new vote per request" says it clearly.)
SOLE_RULE = {
    "alice creates one": (None, CREATES_FORBIDDEN["alice creates one"][0], ALICE),
    "created with a vote": (None, CREATES_FORBIDDEN["created with a vote"][0], RUNTIME),
    "agentRef is not the agent label": (None, CREATES_FORBIDDEN["agentRef is not the agent label"][0], RUNTIME),
    **{case: FORBIDDEN[case][:3] for case in (
        "a vote in another user's name", "a vote claiming a group alice is not in",
        "alice votes twice", "the bridge votes twice for alice",
        "a vote flipped", "votes reordered", "a vote on a question", "decision names another user",
    )},
}


@pytest.mark.parametrize(("old", "new", "user"), SOLE_RULE.values(), ids=SOLE_RULE.keys())
def test_each_rule_is_what_refuses_its_case(
    policy: dict[str, Any], old: dict[str, Any] | None, new: dict[str, Any], user: str,
) -> None:
    groups = RUNTIME_GROUPS if user == RUNTIME else BRIDGE_GROUPS if user == BRIDGE else GROUPS
    (denied,) = _failures(policy, old, new, user, groups)
    assert denied.error is None
    weakened = copy.deepcopy(policy)
    del weakened["spec"]["validations"][denied.index]
    assert _failures(weakened, old, new, user, groups) == []


def test_the_fixture_objects_are_valid_toolapprovals() -> None:
    objs = [CREATED, _decided(), _decided(action="Deny", reason="r"), _voted(), _voted(_vote(), _vote(BOB, "Deny", reason="no")),
            _voted(_vote(groups=None)), _voted(_vote(by=BRIDGE, groups=BRIDGE_GROUPS, onBehalfOf={"user": ALICE, "groups": []}))]
    for obj in objs:
        assert crd_validation.validate(obj) == []
