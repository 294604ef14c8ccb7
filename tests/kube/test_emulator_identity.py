"""Identity in the emulated API server (tests/support/kube_identity.py, tests/support/admission.py), through the
real kubectl: per-user kubeconfigs, TokenReview, the minimal RBAC, and the chart's admission policy loaded and
evaluated on every ToolApproval CREATE and UPDATE."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support import helm as helm_support
from tests.support.kube_fixtures import Kubectl
from tests.support.kube_server import RunningEmulator

pytestmark = pytest.mark.e2e  # the emulated API server on 127.0.0.1, and the real kubectl

ALICE = "alice@example.com"
ALICE_GROUPS = ["approvers", "system:authenticated"]
RUNTIME = "system:serviceaccount:default:file-manager"


def approval(name: str = "apr-1", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "gatehouse.dev/v1alpha1", "kind": "ToolApproval",
        "metadata": {"name": name, "labels": {"gatehouse.dev/agent": "file-manager"}},
        "spec": {"agentRef": "file-manager", "contextId": "ctx-1", "taskId": "task-1", "requestId": name,
                 "tool": "delete_file", "arguments": {"path": "old.txt"}, **spec},
    }


def write(tmp_path: Path, name: str, doc: dict[str, Any]) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


def create(who: Kubectl, path: str, *args: str) -> subprocess.CompletedProcess[str]:
    return who.run("create", "--validate=false", *args, "-f", path, check=False)


def refused(result: subprocess.CompletedProcess[str], *fragments: str) -> str:
    assert result.returncode != 0, f"kubectl succeeded:\n{result.stdout}"
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr
    return result.stderr


@pytest.fixture
def alice(kube_api: RunningEmulator, kubectl: Kubectl, tmp_path: Path) -> Kubectl:
    return kubectl.as_user(kube_api.user_kubeconfig(tmp_path, ALICE, ["approvers"]))


@pytest.fixture
def runtime(kube_api: RunningEmulator, kubectl: Kubectl, tmp_path: Path) -> Kubectl:
    """kubectl as the file-manager agent's runtime: its ServiceAccount."""
    token = kube_api.emulator.add_service_account("default", "file-manager")
    return kubectl.as_user(kube_api.kubeconfig_for(tmp_path / "kubeconfig-runtime", token))


def test_whoami_is_the_user_of_the_kubeconfig(kubectl: Kubectl, alice: Kubectl, runtime: Kubectl) -> None:
    def whoami(who: Kubectl) -> dict[str, Any]:
        return json.loads(who("auth", "whoami", "-o", "json"))["status"]["userInfo"]

    assert whoami(alice) == {"username": ALICE, "groups": ALICE_GROUPS}
    assert whoami(runtime) == {"username": RUNTIME, "groups": [
        "system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"]}
    assert whoami(kubectl) == {"username": "tester", "groups": ["system:masters", "system:authenticated"]}


def test_require_auth_refuses_a_request_without_a_token(kube_api: RunningEmulator, kubectl: Kubectl, alice: Kubectl) -> None:
    kube_api.emulator.require_auth = True
    refused(kubectl.run("get", "toolapprovals", check=False), "You must be logged in to the server")  # 401
    assert "No resources found" in alice.run("get", "toolapprovals").stderr


def test_rbac_refuses_what_no_grant_allows(kube_api: RunningEmulator, kubectl: Kubectl, alice: Kubectl, tmp_path: Path) -> None:
    kubectl("create", "--validate=false", "-f", write(tmp_path, "ta.json", approval()))
    emulator = kube_api.emulator
    emulator.enforce_rbac()
    refused(alice.run("get", "toolapprovals", check=False), "Error from server (Forbidden)",
            f'toolapprovals.gatehouse.dev is forbidden: User "{ALICE}" cannot list resource "toolapprovals" in API group '
            '"gatehouse.dev" in the namespace "default"')
    refused(alice.run("get", "toolapproval", "apr-1", check=False),
            f'toolapprovals.gatehouse.dev "apr-1" is forbidden: User "{ALICE}" cannot get resource "toolapprovals"')

    emulator.grant("group:approvers", ["get", "list", "watch"], ["toolapprovals"], namespace="default")
    emulator.grant(ALICE, "patch", "toolapprovals", namespace="default", api_group="gatehouse.dev")
    assert alice("get", "toolapprovals", "-o", "name").split() == ["toolapproval.gatehouse.dev/apr-1"]
    alice("label", "toolapproval", "apr-1", "seen=yes")
    refused(alice.run("get", "toolapprovals", "-A", check=False), "at the cluster scope")
    refused(alice.run("get", "agents", check=False), 'cannot list resource "agents"')
    refused(alice.run("patch", "toolapproval", "apr-1", "--subresource=status", "--type=merge",
                      "-p", '{"status": {"phase": "Approved"}}', check=False),
            'resource "toolapprovals/status"')  # kubectl reads it first: refused at the get
    refused(alice.run("delete", "toolapproval", "apr-1", check=False), 'cannot delete resource "toolapprovals"')
    assert kubectl("get", "toolapprovals", "-A", "-o", "name").strip()  # the admin (system:masters) bypasses RBAC


def test_token_review_says_whose_token_it_is(kube_api: RunningEmulator, kubectl: Kubectl, alice: Kubectl, tmp_path: Path) -> None:
    emulator = kube_api.emulator
    token = emulator.add_service_account("team-a", "reviewer")

    def review(who: Kubectl, token: str) -> subprocess.CompletedProcess[str]:
        doc = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
        return create(who, write(tmp_path, "review.json", doc), "-o", "json")

    status = json.loads(review(kubectl, token).stdout)["status"]
    assert status["authenticated"] is True
    assert status["user"] == {"username": "system:serviceaccount:team-a:reviewer",
                              "groups": ["system:serviceaccounts", "system:serviceaccounts:team-a", "system:authenticated"]}
    assert json.loads(review(kubectl, "not-one-of-ours").stdout)["status"]["authenticated"] is False

    emulator.enforce_rbac()
    refused(review(alice, token), f'User "{ALICE}" cannot create resource "tokenreviews" in API group '
                                  '"authentication.k8s.io" at the cluster scope')
    emulator.grant("group:approvers", "create", "tokenreviews", api_group="authentication.k8s.io")
    assert json.loads(review(alice, token).stdout)["status"]["authenticated"] is True


@pytest.fixture(scope="module")
def chart_policy() -> list[dict[str, Any]]:
    """The chart's ValidatingAdmissionPolicy and its binding, rendered by the real helm."""
    return helm_support.admission_policy_documents()


def test_the_chart_policy_guards_creation_and_votes(
    kube_api: RunningEmulator, kubectl: Kubectl, alice: Kubectl, runtime: Kubectl, chart_policy: list[dict[str, Any]],
    tmp_path: Path,
) -> None:
    assert kube_api.emulator.add_admission_documents(chart_policy) == 1
    created = write(tmp_path, "ta.json", approval(votes=[]))
    denied = "ValidatingAdmissionPolicy 'gh-gatehouse-toolapproval-decision' with binding 'gh-gatehouse-toolapproval-decision'"

    refused(create(alice, created), "Error from server (Forbidden)", denied,
            "ToolApprovals are created by the agent's runtime (ServiceAccount default/file-manager); a user cannot create one")
    refused(create(runtime, write(tmp_path, "other.json", approval("apr-2", agentRef="other"))),
            "spec.agentRef must equal the gatehouse.dev/agent label")
    assert create(runtime, created).returncode == 0

    def vote(who: Kubectl, **fields: Any) -> subprocess.CompletedProcess[str]:
        patch = [{"op": "add", "path": "/spec/votes/-", "value": {"action": "Approve", **fields}}]
        return who.run("patch", "toolapproval", "apr-1", "--type=json", "-p", json.dumps(patch), check=False)

    refused(vote(alice, by="ceo@example.com", groups=ALICE_GROUPS), denied,
            f"a vote's by must be the name of the user who casts it ({ALICE})")
    refused(vote(alice, by=ALICE, groups=[*ALICE_GROUPS, "security-leads"]), "groups must be the groups")
    assert vote(alice, by=ALICE, groups=ALICE_GROUPS, reason="looks fine").returncode == 0
    refused(vote(alice, by=ALICE, groups=ALICE_GROUPS), "a user votes once")
    votes = json.loads(kubectl("get", "toolapproval", "apr-1", "-o", "json"))["spec"]["votes"]
    assert votes == [{"by": ALICE, "groups": ALICE_GROUPS, "action": "Approve", "reason": "looks fine"}]

    # the runtime records the count through /status, which the policy does not match
    runtime("patch", "toolapproval", "apr-1", "--subresource=status", "--type=merge",
            "-p", '{"status": {"phase": "Pending", "approvals": "1/2", "required": 2}}')
    assert "1/2" in kubectl("get", "toolapproval", "apr-1")


def test_warn_and_invalid_policies(kube_api: RunningEmulator, kubectl: Kubectl, tmp_path: Path) -> None:
    """A Warn binding admits and warns; a validation without a reason refuses with 422 Invalid."""
    def policy(name: str, expression: str, actions: list[str], **validation: str) -> tuple[dict[str, Any], dict[str, Any]]:
        rules = [{"apiGroups": ["gatehouse.dev"], "apiVersions": ["*"], "operations": ["CREATE"], "resources": ["toolapprovals"]}]
        return (
            {"metadata": {"name": name}, "spec": {"matchConstraints": {"resourceRules": rules},
                                                 "validations": [{"expression": expression, **validation}]}},
            {"metadata": {"name": f"{name}-binding"}, "spec": {"policyName": name, "validationActions": actions}},
        )

    kube_api.emulator.add_admission_policy(*policy("no-delete", "object.spec.tool != 'delete_file'", ["Warn"],
                                                   message="delete_file is risky"))
    result = create(kubectl, write(tmp_path, "ta.json", approval()))
    assert result.returncode == 0, result.stderr
    assert "Warning: Validation failed for ValidatingAdmissionPolicy 'no-delete' with binding 'no-delete-binding': " \
           "delete_file is risky" in result.stderr
    kube_api.emulator.add_admission_policy(*policy("named", "object.metadata.name.startsWith('apr-')", ["Deny"]))
    refused(create(kubectl, write(tmp_path, "bad.json", approval("bad"))),
            'The toolapprovals "bad" is invalid', "denied request: failed expression: object.metadata.name.startsWith('apr-')")
