"""The ToolApproval ValidatingAdmissionPolicy, evaluated with cel-python (tests/support/admission.py, the same
evaluator the emulated API server runs) exactly as rendered by the chart, on every case of
tests/support/toolapproval_admission.py (the table other backends re-use).

CREATE: only the agent's runtime creates a ToolApproval, for its own agent, without a decision or votes.
UPDATE: votes are appended one per request, in the requester's own name and groups, once per user; a legacy
decision is set once, by the user it names; nothing else in spec, and none of the labels the runtime reads, changes.
Status and DELETE: only the runtime that created the object (its ServiceAccount, named by the agent label), or the
garbage collector and namespace controller for DELETE.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.chart.conftest import Render, toolapproval_policy
from tests.support import crd_validation
from tests.support import toolapproval_admission as table
from tests.support.admission import Failure, PolicyEvaluator, admission_request
from tests.support.toolapproval_admission import Case


@pytest.fixture(scope="module")
def policy(render: Render) -> dict[str, Any]:
    vap, _ = toolapproval_policy(render())
    return vap


Admit = Any


def _failures(policy: dict[str, Any], case: Case) -> list[Failure]:
    request = admission_request(
        operation=case.operation, user={"username": case.user, "groups": list(case.groups)},
        namespace=case.namespace, name=case.name, subresource=case.subresource,
    )
    return PolicyEvaluator(policy).evaluate(obj=case.new, old=case.old, request=request)


def _admitter(policy: dict[str, Any]) -> Admit:
    """``admit(case)`` -> messages of the validations that deny (empty: admitted). An expression that errors denies
    (failurePolicy: Fail) and says so."""

    def _admit(case: Case) -> list[str]:
        return [f"{f.message} (error: {f.error})" if f.error else f.message for f in _failures(policy, case)]

    return _admit


@pytest.fixture(scope="module")
def admit(policy: dict[str, Any]) -> Admit:
    return _admitter(policy)


def test_policy_matches_toolapproval_writes_status_and_deletes_and_is_bound(render: Render, policy: dict[str, Any]) -> None:
    assert policy["apiVersion"] == "admissionregistration.k8s.io/v1"
    assert policy["spec"]["failurePolicy"] == "Fail"
    assert policy["spec"]["matchConstraints"]["resourceRules"] == [
        {"apiGroups": ["gatehouse.dev"], "apiVersions": ["v1alpha1"], "operations": ["CREATE", "UPDATE", "DELETE"],
         "resources": ["toolapprovals", "toolapprovals/status"]},
    ]
    _, binding = toolapproval_policy(render())
    assert binding["spec"] == {"policyName": policy["metadata"]["name"], "validationActions": ["Deny"]}
    evaluator = PolicyEvaluator(policy)
    where = {"group": "gatehouse.dev", "version": "v1alpha1", "resource": "toolapprovals"}
    assert evaluator.matches(**where, subresource="status", operation="UPDATE")  # the runtime's record
    assert evaluator.matches(**where, operation="DELETE")


def test_every_spec_field_but_the_decision_and_votes_is_fixed(policy: dict[str, Any]) -> None:
    """Keeps the template's field list in step with crds/toolapproval.yaml."""
    fields = set(crd_validation.schema_for("ToolApproval")["properties"]["spec"]["properties"]) - {"decision", "votes"}
    messages = {v["message"] for v in policy["spec"]["validations"]}
    assert {f"spec.{f} cannot change after creation" for f in fields} <= messages
    labels = {f"the gatehouse.dev/{label} label cannot change" for label in ("agent", "gateway", "context", "kind")}
    assert labels <= messages
    # + CREATE: creator, agentRef label, gatewayRef label, nothing table.decided; status and DELETE: the runtime; votes:
    # append-only, one per
    # request, by, groups, once per user, not on a question; decision: immutable, decidedBy, not on a question
    assert len(messages) == len(fields) + len(labels) + 15


ADMITTED = [c for c in table.CASES if c.refused is None]
REFUSED = [c for c in table.CASES if c.refused is not None]


@pytest.mark.parametrize("case", ADMITTED, ids=[c.id for c in ADMITTED])
def test_admitted(admit: Admit, case: Case) -> None:
    assert admit(case) == []


@pytest.mark.parametrize("case", REFUSED, ids=[c.id for c in REFUSED])
def test_refused(admit: Admit, case: Case) -> None:
    denied = admit(case)
    assert denied, "the request was admitted"
    assert any(str(case.refused) in message for message in denied), denied
    assert not any("error:" in message for message in denied), denied


def test_runtime_users_act_as_every_agents_runtime(render: Render) -> None:
    """A runtime run outside the cluster: admissionPolicy.runtimeUsers names it; it creates, writes status, deletes."""
    vap, _ = toolapproval_policy(render("--set", "admissionPolicy.runtimeUsers={gatehouse-runtime,ci}"))
    admit = _admitter(vap)
    for user in ("gatehouse-runtime", "ci", table.RUNTIME):
        assert admit(Case("create", "CREATE", user, None, table.CREATED)) == []
        status = table.with_status(table.CREATED, table.PENDING)
        assert admit(Case("status", "UPDATE", user, table.CREATED, status, subresource="status")) == []
        assert admit(Case("delete", "DELETE", user, table.CREATED, None)) == []
    assert any("a user cannot create one" in m for m in admit(Case("alice", "CREATE", table.ALICE, None, table.CREATED)))


def test_deleters_are_a_setting(render: Render) -> None:
    """An administrator named in admissionPolicy.deleters may delete; the garbage collector then no longer may."""
    vap, _ = toolapproval_policy(render("--set", "admissionPolicy.deleters={admin@example.com}"))
    admit = _admitter(vap)
    assert admit(Case("admin", "DELETE", "admin@example.com", table.CREATED, None)) == []
    assert admit(Case("gc", "DELETE", table.GARBAGE_COLLECTOR, table.CREATED, None)) != []
    assert admit(Case("runtime", "DELETE", table.RUNTIME, table.CREATED, None)) == []


# Cases only one rule refuses: without that rule they are admitted, so the rule is what stops them. (Two votes in
# one request are also refused by the `by` or the once-per-user rule; "one new vote per request" says it clearly.)
SOLE_RULE = [table.BY_ID[case] for case in (
    "alice creates one", "created with a vote", "agentRef is not the agent label",
    "a vote in another user's name", "a vote claiming a group alice is not in",
    "alice votes twice", "the bridge votes twice for alice",
    "a vote flipped", "votes reordered", "a vote on a question", "decision names another user",
    "an approver removes the agent label", "another agent's runtime claims it", "an approver rewrites the context label",
    "an approval labelled a question",
    "another agent's runtime rewrites the status", "an approver writes the status",
    "another agent's runtime deletes a pending one", "an approver deletes it",
    "an agent's runtime creates a gateway's held call", "gatewayRef is not the gateway label",
    "a gateway's held call also labelled with an agent", "an approver relabels a held call",
    "an agent's runtime rewrites a held call's status",
)]


@pytest.mark.parametrize("case", SOLE_RULE, ids=[c.id for c in SOLE_RULE])
def test_each_rule_is_what_refuses_its_case(policy: dict[str, Any], case: Case) -> None:
    (denied,) = _failures(policy, case)
    assert denied.error is None
    weakened = copy.deepcopy(policy)
    del weakened["spec"]["validations"][denied.index]
    assert _failures(weakened, case) == []


def test_the_case_objects_are_valid_toolapprovals() -> None:
    """Every object of the table passes the CRD's schema and rules, so a real API server reaches admission with it."""
    objs = [o for c in table.CASES for o in (c.old, c.new) if o is not None]
    bridge = table.vote(by=table.BRIDGE, groups=table.BRIDGE_GROUPS, onBehalfOf={"user": table.ALICE, "groups": []})
    objs += [table.decided(action="Deny", reason="r"), table.voted(table.vote(), table.vote(table.BOB, "Deny", reason="no")),
             table.voted(bridge)]
    for obj in objs:
        assert crd_validation.validate(obj) == [], obj


def test_the_table_covers_each_forgery_and_the_owner() -> None:
    """What item 7 of issue 31 asks: relabel, status rewrite and delete by another Agent's runtime refused; the owner
    runtime still writes its status and deletes."""
    by = {(c.operation, c.subresource, c.user, c.refused is None) for c in table.CASES}
    assert ("UPDATE", "status", table.OTHER_RUNTIME, False) in by and ("UPDATE", "status", table.RUNTIME, True) in by
    assert ("DELETE", "", table.OTHER_RUNTIME, False) in by and ("DELETE", "", table.RUNTIME, True) in by
    assert any(c.refused and "gatehouse.dev/agent label" in c.refused and c.user == table.ALICE for c in table.CASES)
