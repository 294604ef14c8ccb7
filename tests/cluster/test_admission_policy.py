"""The chart's ToolApproval admission policy on the real API server, case by case against the cel-python evaluator.

The cases are tests/chart/test_admission_policy.py's (which the emulated API server also runs): each is written to
the real API server by its user, in that user's groups, and the answer must be the evaluator's: admitted, or
refused with the same validation's message and HTTP status. A disagreement is a bug in the product or in the
evaluator, never something to paper over here.

How an UPDATE case's starting object gets stored: many are objects the policy would never let anyone create (a
decision, votes). So the binding is taken away, the starting objects are created as the admin, the binding is put
back (the chart's own object), and only then is every case's request sent.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.chart import test_admission_policy as cases
from tests.support.admission import REASON_CODES, Failure, PolicyEvaluator, admission_request
from tests.support.cluster import Cluster, rest
from tests.support.cluster.chart import Release

pytestmark = pytest.mark.e2e

TA = "/apis/gatehouse.dev/v1alpha1/namespaces/{ns}/toolapprovals"
BINDINGS = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"
NAMESPACES = ("default", "team-b")


@dataclass(frozen=True)
class Case:
    id: str
    old: dict[str, Any] | None  # None: a CREATE
    new: dict[str, Any]
    user: str
    groups: list[str]
    allowed: bool  # as the chart tests classify it


def _groups_of(user: str) -> list[str]:
    """The groups test_allowed_updates gives each user (test_forbidden_updates gives everyone cases.GROUPS)."""
    return (cases.GROUPS if user in (cases.ALICE, cases.BOB) else cases.BRIDGE_GROUPS if user == cases.BRIDGE
            else cases.RUNTIME_GROUPS)


def _all_cases() -> list[Case]:
    out = [Case(f"create: {k}", None, new, user, groups, True)
           for k, (new, user, groups) in cases.CREATES_ALLOWED.items()]
    out += [Case(f"create: {k}", None, new, user, groups, False)
            for k, (new, user, groups, _) in cases.CREATES_FORBIDDEN.items()]
    out += [Case(f"update: {k}", old, new, user, _groups_of(user), True)
            for k, (old, new, user) in cases.ALLOWED.items()]
    out += [Case(f"update: {k}", old, new, user, cases.GROUPS, False)
            for k, (old, new, user, _) in cases.FORBIDDEN.items()]
    return out


CASES = _all_cases()


@dataclass(frozen=True)
class Answer:
    status: int
    message: str


def _placed(obj: dict[str, Any], name: str, namespace: str) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"] = {**out.get("metadata", {}), "name": name, "namespace": namespace}
    return out


def _sa_groups(user: str) -> list[str] | None:
    """The groups a real ServiceAccount token of ``user`` has, or None when ``user`` is not a ServiceAccount."""
    if not user.startswith("system:serviceaccount:"):
        return None
    namespace = user.split(":")[2]
    return ["system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"]


def _identity(cluster: Cluster, user: str, groups: list[str]) -> Path:
    """A real ServiceAccount token where the case's identity is one, else a client certificate saying the same."""
    if groups == _sa_groups(user):
        _, _, namespace, name = user.split(":")
        return cluster.service_account(namespace, name)
    return cluster.user(user, groups)


def _wait_enforced(probe: httpx.Client, enforced: bool) -> None:
    """Until alice's create (which the policy refuses) is refused, or admitted; dry run, nothing is stored."""
    body = _placed(cases.CREATED, "probe", "default")
    deadline = time.monotonic() + 30
    while True:
        reply = probe.post(TA.format(ns="default"), params={"dryRun": "All"}, json=body)
        if (reply.status_code == 403) == enforced:
            return
        state = "presence" if enforced else "absence"
        assert time.monotonic() < deadline, f"the binding's {state} never took effect: {reply.text}"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def answers(cluster: Cluster, chart: Release) -> Iterator[dict[str, Answer]]:
    """Every case sent to the real API server; what it answered, by case id."""
    admin = rest.client(cluster.kubeconfig())
    cluster.kubectl("create", "namespace", "team-b")
    # RBAC lets everyone write ToolApprovals in these namespaces: what is refused here, the policy refused.
    cluster.kubectl("create", "clusterrole", "toolapproval-writer", "--verb=*", "--resource=toolapprovals.gatehouse.dev")
    for ns in NAMESPACES:
        cluster.kubectl("create", "rolebinding", "everyone-writes-toolapprovals", "-n", ns,
                        "--clusterrole=toolapproval-writer", "--group=system:authenticated")
    probe = rest.client(cluster.user(cases.ALICE, cases.GROUPS))
    binding = admin.get(f"{BINDINGS}/{chart.policy}").json()
    binding["metadata"] = {k: v for k, v in binding["metadata"].items() if k in ("name", "labels", "annotations")}
    assert admin.delete(f"{BINDINGS}/{chart.policy}").status_code == 200
    _wait_enforced(probe, False)
    versions: dict[str, str] = {}
    for index, case in enumerate(CASES):
        if case.old is not None:
            namespace = case.old["metadata"].get("namespace", "default")
            reply = admin.post(TA.format(ns=namespace), json=_placed(case.old, f"case-{index}", namespace))
            assert reply.status_code == 201, f"{case.id}: the starting object was not stored: {reply.text}"
            versions[case.id] = reply.json()["metadata"]["resourceVersion"]
    assert admin.post(BINDINGS, json=binding).status_code == 201
    _wait_enforced(probe, True)

    out: dict[str, Answer] = {}
    for index, case in enumerate(CASES):
        user = rest.client(_identity(cluster, case.user, case.groups))
        namespace = (case.old or case.new)["metadata"].get("namespace", "default")
        body = _placed(case.new, f"case-{index}", namespace)
        if case.old is None:
            reply = user.post(TA.format(ns=namespace), json=body)
        else:
            body["metadata"]["resourceVersion"] = versions[case.id]
            reply = user.put(f"{TA.format(ns=namespace)}/case-{index}", json=body)
        out[case.id] = Answer(reply.status_code, rest.message(reply))
    yield out


def _evaluated(policy: dict[str, Any], case: Case, index: int) -> list[Failure]:
    namespace = (case.old or case.new)["metadata"].get("namespace", "default")
    name = f"case-{index}"
    request = admission_request(operation="CREATE" if case.old is None else "UPDATE",
                                user={"username": case.user, "groups": case.groups}, namespace=namespace, name=name)
    old = None if case.old is None else _placed(case.old, name, namespace)
    return PolicyEvaluator(policy).evaluate(obj=_placed(case.new, name, namespace), old=old, request=request)


@pytest.fixture(scope="module")
def policy(cluster: Cluster, chart: Release) -> dict[str, Any]:
    """The policy as the API server stores it: the very object both backends evaluate."""
    admin = rest.client(cluster.kubeconfig())
    return dict(admin.get(f"/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/{chart.policy}").json())


def test_each_identity_is_the_user_and_groups_of_its_case(cluster: Cluster, chart: Release) -> None:
    """The comparison only means something if the API server sees each case's user exactly as the evaluator does."""
    seen = set()
    for case in CASES:
        if (case.user, tuple(case.groups)) in seen:
            continue
        seen.add((case.user, tuple(case.groups)))
        reply = rest.client(_identity(cluster, case.user, case.groups)).post(
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            json={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
        info = reply.json()["status"]["userInfo"]
        assert (info["username"], info["groups"]) == (case.user, case.groups)


@pytest.mark.parametrize("index", range(len(CASES)), ids=[c.id for c in CASES])
def test_the_real_api_server_answers_as_the_evaluator(
    answers: dict[str, Answer], policy: dict[str, Any], index: int,
) -> None:
    case = CASES[index]
    answer = answers[case.id]
    failures = _evaluated(policy, case, index)
    if not failures:
        assert answer.status in (200, 201), f"the evaluator admits it, the API server answered {answer}"
        return
    refusals = [f.text() for f in failures]
    assert answer.status not in (200, 201), f"the evaluator refuses it ({refusals}), the API server admitted it"
    assert f"ValidatingAdmissionPolicy '{policy['metadata']['name']}'" in answer.message, answer
    real = answer.message.split("denied request: ", 1)[-1]
    matching = [f for f in failures if f.text() == real]
    assert matching, f"the API server refused it with {real!r}; the evaluator with {[f.text() for f in failures]}"
    assert answer.status == REASON_CODES.get(matching[0].reason, 422), answer


def test_the_cases_are_as_the_chart_tests_classify_them(policy: dict[str, Any]) -> None:
    """On the stored policy the evaluator admits the allowed cases and refuses the forbidden ones, as on the
    rendered one: what the API server stored is what the chart rendered."""
    for index, case in enumerate(CASES):
        assert (not _evaluated(policy, case, index)) == case.allowed, case.id
