"""End-to-end: the runtime's identity and access, the real operator against the emulated API server.

The token Secret (generated once, or named by the Agent) mounted into the pods, the fixed ServiceAccount, the
TokenReview ClusterRoleBinding, and the AdmissionPolicy condition in each of its states.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml

from agent_runtime.contract.translator import ACCESS_DIR, TOKEN_FILE
from gatehouse_operator.builders import SECRETS_HASH_ANNOTATION
from tests.gatehouse_operator.conftest import EXAMPLE, TOKENREVIEW, Kubectl, OperatorProcess, tokenreview_subjects, wait_for
from tests.gatehouse_operator.test_e2e import NS, Cluster, _apply_example, _settle, _write_manifest
from tests.support.kube_server import RunningEmulator

pytestmark = pytest.mark.e2e

GENERATED = "file-manager-access"
POLICY = "gatehouse-toolapproval-decision"  # the operator's default (the chart passes <release>-toolapproval-decision)


@pytest.fixture
def cluster(kube: kubernetes.client.ApiClient) -> Cluster:
    return Cluster(kube)


def _pod(cluster: Cluster, name: str = "file-manager") -> dict[str, Any]:
    deployment = wait_for(lambda: cluster.deployment(name), what=f"Deployment {name}")
    return deployment["spec"]["template"]  # type: ignore[no-any-return]


def _secrets_hash(cluster: Cluster) -> str:
    return _pod(cluster)["metadata"]["annotations"][SECRETS_HASH_ANNOTATION]  # type: ignore[no-any-return]


def _access_volume(cluster: Cluster) -> dict[str, Any]:
    pod = _pod(cluster)["spec"]
    (mount,) = [m for m in pod["containers"][0]["volume_mounts"] if m["name"] == "access"]
    assert (mount["mount_path"], mount["read_only"]) == (ACCESS_DIR, True)
    (volume,) = [v for v in pod["volumes"] if v["name"] == "access"]
    return volume  # type: ignore[no-any-return]


def _sources(volume: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(s["secret"]["name"], i["key"], i["path"]) for s in volume["projected"]["sources"] for i in s["secret"]["items"]]


def _config(cluster: Cluster) -> dict[str, Any]:
    secret = cluster.core.read_namespaced_secret("file-manager-config", NS)
    return json.loads(base64.b64decode(secret.data["config.json"]))  # type: ignore[no-any-return]


def _agent_doc(**spec: Any) -> dict[str, Any]:
    doc = yaml.safe_load((EXAMPLE / "agent.yaml").read_text())
    doc["spec"].update(spec)
    return doc  # type: ignore[no-any-return]


def _touch(kubectl: Kubectl, value: str) -> None:
    """A label change: kopf's update handler reconciles the Agent (as any spec or label edit would)."""
    kubectl("label", "agent", "file-manager", f"touched={value}", "--overwrite")


@pytest.mark.secret_check("2s")
def test_the_generated_token_secret_is_created_once_reused_and_mounted(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, cluster: Cluster
) -> None:
    _apply_example(kubectl)
    cluster.wait_accepted("file-manager")
    secret = cluster.core.read_namespaced_secret(GENERATED, NS)
    (line,) = base64.b64decode(secret.data["tokens"]).decode().splitlines()
    assert re.fullmatch(r"file-manager-admin:[A-Za-z0-9_-]{43}", line), line  # 32 random bytes, URL-safe base64
    assert secret.metadata.owner_references[0].name == "file-manager"
    assert _sources(_access_volume(cluster)) == [(GENERATED, "tokens", "tokens")]
    assert _config(cluster)["access"]["token_file"] == TOKEN_FILE
    first_hash = _secrets_hash(cluster)

    # Reused, never rewritten: not by a spec change, not by an operator restart.
    kubectl("patch", "agent", "file-manager", "--type=merge", "-p", json.dumps({"spec": {"systemMessage": "Be terse."}}))
    wait_for(lambda: _config(cluster)["instruction"] == "Be terse.", what="the new config")
    operator.stop()
    operator.start()
    _touch(kubectl, "after-restart")
    _settle(kube_api)
    again = cluster.core.read_namespaced_secret(GENERATED, NS)
    assert (again.data, again.metadata.resource_version) == (secret.data, secret.metadata.resource_version)
    assert _secrets_hash(cluster) == first_hash

    # Someone edits it (their tokens are theirs): it is kept, and the pods roll to read it.
    mine = base64.b64encode(b"alice:a-token-of-alices-own\n").decode()
    cluster.core.patch_namespaced_secret(GENERATED, NS, {"data": {"tokens": mine}})
    wait_for(lambda: _secrets_hash(cluster) != first_hash, what="pods to roll after the token Secret changed")
    _settle(kube_api)
    assert cluster.core.read_namespaced_secret(GENERATED, NS).data["tokens"] == mine


@pytest.mark.secret_check("2s")
def test_a_named_token_secret_is_mounted_and_its_rotation_rolls_the_pods(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, cluster: Cluster, tmp_path: Path
) -> None:
    _apply_example(kubectl, "modelconfig", "mcp-server")
    agent = _agent_doc(access={"tokenSecretRef": {"name": "fm-tokens", "key": "api"},
                               "jwt": {"issuer": "https://login.example.com", "audience": "fm",
                                       "jwksSecretRef": {"name": "login-keys"}}})
    kubectl("apply", "--validate=false", "-f", _write_manifest(tmp_path, agent))
    accepted = cluster.wait_accepted("file-manager", "False")
    assert accepted["reason"] == "DependencyMissing"
    assert "spec.access.tokenSecretRef: Secret 'fm-tokens' not found in namespace 'default'" in accepted["message"]
    assert "spec.access.jwt.jwksSecretRef: Secret 'login-keys' not found" in accepted["message"]

    # Their arrival alone re-reconciles the Agent (the periodic check reads the Secrets it named again).
    cluster.core.create_namespaced_secret(NS, {"metadata": {"name": "login-keys"},
                                               "data": {"jwks.json": base64.b64encode(b'{"keys": []}').decode()}})
    cluster.core.create_namespaced_secret(NS, {"metadata": {"name": "fm-tokens"},
                                               "data": {"api": base64.b64encode(b"bob:one\n").decode()}})
    cluster.wait_accepted("file-manager")
    assert _sources(_access_volume(cluster)) == [("fm-tokens", "api", "tokens"), ("login-keys", "jwks.json", "jwks.json")]
    access = _config(cluster)["access"]
    assert (access["token_file"], access["jwt"]["jwks_file"]) == (TOKEN_FILE, f"{ACCESS_DIR}/jwks.json")
    assert kubectl.run("get", "secret", GENERATED, check=False).returncode != 0, "no Secret is generated"
    first = _secrets_hash(cluster)

    cluster.core.patch_namespaced_secret("fm-tokens", NS, {"data": {"api": base64.b64encode(b"bob:two\n").decode()}})
    wait_for(lambda: _secrets_hash(cluster) != first, what="pods to roll after the token Secret rotated")


def test_another_service_account_is_refused_the_agents_own_name_is_accepted(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, cluster: Cluster, tmp_path: Path
) -> None:
    _apply_example(kubectl, "modelconfig", "mcp-server")
    kubectl("apply", "--validate=false", "-f", _write_manifest(tmp_path, _agent_doc(deployment={"serviceAccountName": "robot"})))
    accepted = cluster.wait_accepted("file-manager", "False")
    assert accepted["reason"] == "ServiceAccountNotAllowed"
    assert accepted["message"].startswith("spec.deployment.serviceAccountName: 'robot' is not allowed")
    assert "so that the admission policy can tell the runtime from users" in accepted["message"]
    assert cluster.deployment("file-manager") is None

    kubectl("apply", "--validate=false", "-f",
            _write_manifest(tmp_path, _agent_doc(deployment={"serviceAccountName": "file-manager"})))
    cluster.wait_accepted("file-manager")
    assert _pod(cluster)["spec"]["service_account_name"] == "file-manager"


def test_the_tokenreview_binding_follows_kubernetes_tokens_and_the_agent(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, cluster: Cluster
) -> None:
    rbac = kubernetes.client.RbacAuthorizationV1Api(cluster.core.api_client)

    def granted() -> bool:
        return (NS, "file-manager") in tokenreview_subjects(kube_api)

    mark = kube_api.emulator.request_count
    _apply_example(kubectl)
    cluster.wait_accepted("file-manager")
    shared = rbac.read_cluster_role_binding(TOKENREVIEW).to_dict()
    assert shared["role_ref"] == {"api_group": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": TOKENREVIEW}
    assert [(s["kind"], s["name"], s["namespace"]) for s in shared["subjects"]] == [("ServiceAccount", "file-manager", NS)]

    kubectl("patch", "agent", "file-manager", "--type=merge", "-p", json.dumps({"spec": {"access": {"kubernetesTokens": False}}}))
    wait_for(lambda: not granted(), what="the subject to go when kubernetesTokens is false")
    assert _config(cluster)["access"]["kubernetes_tokens"] is False
    kubectl("patch", "agent", "file-manager", "--type=merge", "-p", json.dumps({"spec": {"access": {"kubernetesTokens": True}}}))
    wait_for(granted, what="the subject back")

    kubectl("delete", "agent", "file-manager", "--wait=true", "--timeout=20s")
    # No finalizer holds the Agent: the subject goes on its DELETED event, just after
    wait_for(lambda: not granted(), what="the operator to revoke the TokenReview right of the deleted Agent")
    assert rbac.read_cluster_role_binding(TOKENREVIEW).to_dict()["metadata"]["name"] == TOKENREVIEW  # the binding stays
    # All along, the operator wrote no ClusterRoleBinding but that one: it created and deleted none.
    touched = {(str(r.method.value), str(r.url.path)) for r in kube_api.emulator.writes(mark)
               if r.resource is not None and r.resource.plural == "clusterrolebindings"}
    assert touched == {("PATCH", f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{TOKENREVIEW}")}


def _condition(cluster: Cluster) -> dict[str, Any]:
    return cluster.condition("file-manager", "AdmissionPolicy")


def _wait_reason(cluster: Cluster, kubectl: Kubectl, reason: str, touch: str) -> dict[str, Any]:
    _touch(kubectl, touch)
    return wait_for(lambda: _condition(cluster).get("reason") == reason and _condition(cluster),  # type: ignore[no-any-return]
                    what=f"AdmissionPolicy {reason}")


def test_the_admission_policy_condition_in_each_state(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, cluster: Cluster
) -> None:
    admission = kubernetes.client.AdmissionregistrationV1Api(cluster.core.api_client)
    _apply_example(kubectl)
    cluster.wait_accepted("file-manager")
    missing = _condition(cluster)
    assert (missing["status"], missing["reason"]) == ("False", "NotInstalled")
    assert missing["message"].startswith(f"ValidatingAdmissionPolicy {POLICY!r} is not installed: kubectl decisions")
    assert "ignored until it is enforced" in missing["message"]

    admission.create_validating_admission_policy({
        "metadata": {"name": POLICY},
        "spec": {"failurePolicy": "Fail", "validations": [{"expression": "true"}],
                 "matchConstraints": {"resourceRules": [{"apiGroups": ["gatehouse.dev"], "apiVersions": ["v1alpha1"],
                                                         "operations": ["UPDATE"], "resources": ["toolapprovals"]}]}},
    })
    unbound = _wait_reason(cluster, kubectl, "NotEnforcing", "policy")
    assert unbound["status"] == "False" and "has no binding" in unbound["message"]

    # Bound under another name than the chart's, and only warning: still not enforcing.
    admission.create_validating_admission_policy_binding(
        {"metadata": {"name": "my-binding"}, "spec": {"policyName": POLICY, "validationActions": ["Warn", "Audit"]}})
    warned = _wait_reason(cluster, kubectl, "NotEnforcing", "warn")
    wait_for(lambda: "'my-binding'" in _condition(cluster)["message"], what="the binding to be named")
    assert "without Deny" in _condition(cluster)["message"] and warned["status"] == "False"

    admission.patch_validating_admission_policy_binding("my-binding", {"spec": {"validationActions": ["Deny"]}})
    enforced = _wait_reason(cluster, kubectl, "Enforced", "deny")
    assert enforced["status"] == "True"
    assert enforced["lastTransitionTime"] >= missing["lastTransitionTime"]

    # The verdict is shared and read again when the policy or a binding changes (or after admission.MAX_AGE).
    kube_api.emulator.forbid("GET", r"/validatingadmissionpolicies/")
    admission.patch_validating_admission_policy_binding("my-binding", {"metadata": {"labels": {"touched": "yes"}}})
    unknown = _wait_reason(cluster, kubectl, "Unknown", "forbidden")
    assert unknown["status"] == "False" and "(403 " in unknown["message"]


def test_trusting_kubectl_without_the_policy_reads_true(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, cluster: Cluster,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    operator.stop()
    monkeypatch.setenv("GATEHOUSE_TRUST_KUBECTL_WITHOUT_ADMISSION_POLICY", "true")
    operator.start()
    _apply_example(kubectl)
    cluster.wait_accepted("file-manager")
    trusted = wait_for(lambda: _condition(cluster).get("status") == "True" and _condition(cluster), what="AdmissionPolicy")
    assert trusted["reason"] == "TrustedByOperator"
    assert "is not installed (NotInstalled)" in trusted["message"]
    assert "--trust-kubectl-without-admission-policy" in trusted["message"]
