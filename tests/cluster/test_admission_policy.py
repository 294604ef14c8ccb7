"""The chart's ToolApproval admission policy on the real API server, case by case against the cel-python evaluator.

The cases are tests/support/toolapproval_admission.py's, which the chart tests evaluate with cel-python and the
emulated API server runs as HTTP requests: each is sent to the real API server by its user, in that user's groups
(a real ServiceAccount token where the user is one, else a client certificate of the cluster's CA), and the answer
must be the evaluator's: admitted, or refused with the same validation's message and HTTP status. A disagreement
is a bug in the product or in the evaluator, never something to paper over here.

How a case's stored object gets there: many are objects the policy would never let anyone create (a decision,
votes, another runtime's status). So the binding is taken away, the objects are created as the admin (then their
status through ``/status``), the binding is put back (the chart's own object), and only then is every case sent.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import toolapproval_admission as table
from tests.support.admission import REASON_CODES, Failure, PolicyEvaluator, admission_request
from tests.support.cluster import Cluster, rest
from tests.support.cluster.chart import Release

pytestmark = pytest.mark.e2e

BINDINGS = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"
NAMESPACES = ("default", "team-b")


def _renamed(obj: dict[str, Any] | None, name: str) -> dict[str, Any] | None:
    if obj is None:
        return None
    out = copy.deepcopy(obj)
    out["metadata"]["name"] = name
    return out


# Each case on its own object, named after its place in the table.
CASES = [dataclasses.replace(c, old=_renamed(c.old, f"case-{i}"), new=_renamed(c.new, f"case-{i}"))
         for i, c in enumerate(table.CASES)]


@dataclass(frozen=True)
class Answer:
    status: int
    message: str


def _sa_groups(user: str) -> tuple[str, ...] | None:
    """The groups a real ServiceAccount token of ``user`` has, or None when ``user`` is not a ServiceAccount."""
    if not user.startswith("system:serviceaccount:"):
        return None
    namespace = user.split(":")[2]
    return ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated")


def _identity(cluster: Cluster, user: str, groups: tuple[str, ...]) -> Path:
    """A real ServiceAccount token where the case's user is one, else a client certificate saying the same."""
    if groups == _sa_groups(user):
        _, _, namespace, name = user.split(":")
        return cluster.service_account(namespace, name)
    return cluster.user(user, groups)


def _wait_enforced(probe: httpx.Client, enforced: bool) -> None:
    """Until alice's create (which the policy refuses) is refused, or admitted; dry run, nothing is stored."""
    body = _renamed(table.CREATED, "probe")
    deadline = time.monotonic() + 30
    while True:
        reply = probe.post(table.COLLECTION, params={"dryRun": "All"}, json=body)
        if (reply.status_code == 403) == enforced:
            return
        state = "presence" if enforced else "absence"
        assert time.monotonic() < deadline, f"the binding's {state} never took effect: {reply.text}"
        time.sleep(0.2)


def _store(admin: httpx.Client, case: table.Case) -> str:
    """The case's stored object, as it is (status included); its resourceVersion."""
    assert case.old is not None
    collection = f"/apis/gatehouse.dev/v1alpha1/namespaces/{case.namespace}/toolapprovals"
    reply = admin.post(collection, json=case.old)
    assert reply.status_code == 201, f"{case.id}: the stored object was refused: {reply.text}"
    stored = reply.json()
    if "status" in case.old:
        stored["status"] = case.old["status"]
        reply = admin.put(f"{collection}/{case.name}/status", json=stored)
        assert reply.status_code == 200, f"{case.id}: its status was refused: {reply.text}"
    return str(reply.json()["metadata"]["resourceVersion"])


@pytest.fixture(scope="module")
def answers(cluster: Cluster, chart: Release) -> Iterator[dict[str, Answer]]:
    """Every case sent to the real API server; what it answered, by case id."""
    admin = rest.client(cluster.kubeconfig())
    cluster.kubectl("create", "namespace", "team-b")
    # RBAC lets everyone write ToolApprovals and their status in these namespaces: what is refused, the policy refused.
    cluster.kubectl("create", "clusterrole", "toolapproval-writer", "--verb=*",
                    "--resource=toolapprovals.gatehouse.dev,toolapprovals.gatehouse.dev/status")
    for ns in NAMESPACES:
        cluster.kubectl("create", "rolebinding", "everyone-writes-toolapprovals", "-n", ns,
                        "--clusterrole=toolapproval-writer", "--group=system:authenticated")
    probe = rest.client(cluster.user(table.ALICE, table.GROUPS))
    binding = admin.get(f"{BINDINGS}/{chart.policy}").json()
    binding["metadata"] = {k: v for k, v in binding["metadata"].items() if k in ("name", "labels", "annotations")}
    assert admin.delete(f"{BINDINGS}/{chart.policy}").status_code == 200
    _wait_enforced(probe, False)
    versions = {case.id: _store(admin, case) for case in CASES if case.old is not None}
    assert admin.post(BINDINGS, json=binding).status_code == 201
    _wait_enforced(probe, True)

    out: dict[str, Answer] = {}
    for case in CASES:
        method, path, body = case.http(versions.get(case.id))
        reply = rest.client(_identity(cluster, case.user, case.groups)).request(method, path, json=body)
        out[case.id] = Answer(reply.status_code, rest.message(reply))
    yield out


def _evaluated(policy: dict[str, Any], case: table.Case) -> list[Failure]:
    request = admission_request(operation=case.operation, user={"username": case.user, "groups": list(case.groups)},
                                namespace=case.namespace, name=case.name, subresource=case.subresource)
    return PolicyEvaluator(policy).evaluate(obj=case.new, old=case.old, request=request)


@pytest.fixture(scope="module")
def policy(cluster: Cluster, chart: Release) -> dict[str, Any]:
    """The policy as the API server stores it: the very object both backends evaluate."""
    admin = rest.client(cluster.kubeconfig())
    return dict(admin.get(f"/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/{chart.policy}").json())


def test_each_identity_is_the_user_and_groups_of_its_case(cluster: Cluster, chart: Release) -> None:
    """The comparison only means something if the API server sees each case's user exactly as the evaluator does."""
    for user, groups in {(case.user, case.groups) for case in CASES}:
        reply = rest.client(_identity(cluster, user, groups)).post(
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            json={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
        info = reply.json()["status"]["userInfo"]
        assert (info["username"], tuple(info["groups"])) == (user, groups)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_the_real_api_server_answers_as_the_evaluator(
    answers: dict[str, Answer], policy: dict[str, Any], case: table.Case,
) -> None:
    answer = answers[case.id]
    failures = _evaluated(policy, case)
    assert (not failures) == (case.refused is None), "the evaluator disagrees with the table"
    if not failures:
        assert 200 <= answer.status < 300, f"the evaluator admits it, the API server answered {answer}"
        return
    refusals = [f.text() for f in failures]
    assert not 200 <= answer.status < 300, f"the evaluator refuses it ({refusals}), the API server admitted it"
    assert f"ValidatingAdmissionPolicy '{policy['metadata']['name']}'" in answer.message, answer
    real = answer.message.split("denied request: ", 1)[-1]
    matching = [f for f in failures if f.text() == real]
    assert matching, f"the API server refused it with {real!r}; the evaluator with {refusals}"
    assert answer.status == REASON_CODES.get(matching[0].reason, 422), answer
    assert case.refused is not None and case.refused in real
