"""End-to-end: the real operator (kopf run -m gatehouse_operator) against the emulated API server.

Everything goes over HTTP: ``kubectl`` applies, patches, deletes and waits like a user would; the
``kubernetes`` client reads what a user would read. The emulator's request log is used only to count
API calls (a no-op resync must write nothing).
"""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml

from gatehouse_operator.builders import CONFIG_HASH_ANNOTATION, SECRETS_HASH_ANNOTATION
from tests.gatehouse_operator.conftest import (
    EXAMPLE,
    TOKENREVIEW,
    Kubectl,
    OperatorProcess,
    seed_tokenreview_binding,
    tokenreview_subjects,
    wait_for,
)
from tests.support.kube_server import RunningEmulator

pytestmark = pytest.mark.e2e

GROUP, VERSION = "gatehouse.dev", "v1alpha1"
NS = "default"
CHILDREN = [
    ("secret", "file-manager-config"),
    ("secret", "file-manager-access"),  # generated: the example names no spec.access.tokenSecretRef
    ("serviceaccount", "file-manager"),
    ("role", "file-manager-runtime"),
    ("rolebinding", "file-manager-runtime"),
    ("deployment", "file-manager"),
    ("service", "file-manager"),
]


class Cluster:
    """Reads through the kubernetes client, as a user's tooling would."""

    def __init__(self, client: kubernetes.client.ApiClient) -> None:
        self.custom = kubernetes.client.CustomObjectsApi(client)
        self.core = kubernetes.client.CoreV1Api(client)
        self.apps = kubernetes.client.AppsV1Api(client)

    def agent(self, name: str) -> dict[str, Any] | None:
        try:
            return self.custom.get_namespaced_custom_object(GROUP, VERSION, NS, "agents", name)
        except kubernetes.client.ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def condition(self, name: str, type_: str) -> dict[str, Any]:
        agent = self.agent(name) or {}
        return next((c for c in (agent.get("status") or {}).get("conditions", []) if c["type"] == type_), {})

    def deployment(self, name: str) -> dict[str, Any] | None:
        try:
            return self.apps.read_namespaced_deployment(name, NS).to_dict()
        except kubernetes.client.ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def config_hash(self, name: str) -> str | None:
        deployment = self.deployment(name)
        return deployment["spec"]["template"]["metadata"]["annotations"][CONFIG_HASH_ANNOTATION] if deployment else None

    def wait_accepted(self, name: str, status: str = "True", timeout: float = 15) -> dict[str, Any]:
        return wait_for(lambda: self.condition(name, "Accepted").get("status") == status and self.condition(name, "Accepted"),
                        timeout=timeout, what=f"{name} Accepted={status}")


@pytest.fixture
def cluster(kube: kubernetes.client.ApiClient) -> Cluster:
    return Cluster(kube)


def _settle(api: RunningEmulator, quiet: float = 0.8, timeout: float = 15) -> None:
    """Wait until no request has reached the API server for ``quiet`` seconds."""
    deadline = time.monotonic() + timeout
    last, since = api.emulator.request_count, time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.1)
        now = api.emulator.request_count
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return
    pytest.fail("the API server never went quiet")


def _apply_example(kubectl: Kubectl, *names: str) -> None:
    for name in names or ("modelconfig", "mcp-server", "agent"):
        kubectl("apply", "--validate=false", "-f", str(EXAMPLE / f"{name}.yaml"))


def _write_manifest(tmp_path: Path, doc: dict[str, Any]) -> str:
    path = tmp_path / f"{doc['kind']}-{doc['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def test_applying_the_example_creates_owned_children_and_accepts(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, cluster: Cluster
) -> None:
    _apply_example(kubectl)
    kubectl("wait", "--for=condition=Accepted", "agent/file-manager", "--timeout=20s")
    agent = cluster.agent("file-manager")
    assert agent is not None
    uid = agent["metadata"]["uid"]
    for kind, name in CHILDREN:
        child = json.loads(kubectl("get", kind, name, "-o", "json"))
        (owner,) = child["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == ("Agent", "file-manager", uid, True)

    accepted = cluster.condition("file-manager", "Accepted")
    assert (accepted["reason"], accepted["observedGeneration"]) == ("Reconciled", 1)
    assert agent["status"]["observedGeneration"] == 1
    assert agent["status"]["configHash"] == cluster.config_hash("file-manager")
    header, row = kubectl("get", "agents").splitlines()
    assert header.split() == ["NAME", "MODEL", "ACCEPTED", "READY", "PENDING", "AGE"]
    assert row.split()[:4] == ["file-manager", "scripted-file-manager", "True", "False"]

    deployment = cluster.deployment("file-manager")
    assert deployment is not None
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == "ghcr.io/gatehouse-dev/gatehouse:test"  # GATEHOUSE_RUNTIME_IMAGE
    assert container["command"][:4] == ["gatehouse-runtime", "serve", "--config", "/config/config.json"]
    assert pod["service_account_name"] == "file-manager"
    assert deployment["spec"]["strategy"] == {"type": "Recreate", "rolling_update": None}  # sqlite: one writer
    assert {"name": "state", "claim": "file-manager-state"} in [
        {"name": v["name"], "claim": (v["persistent_volume_claim"] or {}).get("claim_name")} for v in pod["volumes"]]
    claim = json.loads(kubectl("get", "pvc", "file-manager-state", "-o", "json"))
    assert "ownerReferences" not in claim["metadata"]  # kept when the Agent is deleted
    assert cluster.condition("file-manager", "Durable")["reason"] == "Sqlite"
    secret = cluster.core.read_namespaced_secret("file-manager-config", NS)
    config = json.loads(base64.b64decode(secret.data["config.json"]))
    assert config["name"] == "file-manager" and config["mcp_servers"][0]["require_approval"] == ["delete_file", "write_file"]
    assert json.loads(base64.b64decode(secret.data["agent-card.json"]))["skills"][0]["id"] == "files"
    role = json.loads(kubectl("get", "role", "file-manager-runtime", "-o", "json"))
    assert role["rules"][0]["resources"] == ["toolapprovals"]

    # A new Agent's first apply posts no Event: its Accepted condition says so, with the config and the time.
    assert accepted["message"] == f"AgentConfig {agent['status']['configHash'][:12]} is applied"
    assert accepted["status"] == "True" and accepted["lastTransitionTime"]
    events = json.loads(kubectl("get", "events", "-o", "json"))["items"]
    assert [e for e in events if e["involvedObject"]["name"] == "file-manager"] == []

    # Ready follows the Deployment's status (the emulator has no deployment controller: play its part).
    cluster.apps.patch_namespaced_deployment_status("file-manager", NS, {"status": {"availableReplicas": 1, "replicas": 1}})
    kubectl("wait", "--for=condition=Ready", "agent/file-manager", "--timeout=20s")
    assert kubectl("get", "agents").splitlines()[1].split()[2:4] == ["True", "True"]


def test_a_new_agent_creates_its_children_without_reading_them_first(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, cluster: Cluster
) -> None:
    """A never-applied Agent's children do not exist yet: the operator creates them straight away (no 404 reads).
    Besides, it writes the Agent's status once, and nothing else: no finalizer, no Event (the status says it was
    applied), no Secret check (it comes one interval after the reconcile that read them).

    It does read the admission policy (the AdmissionPolicy condition), which is not a child."""
    _apply_example(kubectl, "modelconfig", "mcp-server")
    _settle(kube_api)
    mark = kube_api.emulator.request_count
    _apply_example(kubectl, "agent")
    cluster.wait_accepted("file-manager")
    _settle(kube_api)
    operator_requests = [r for r in kube_api.emulator.requests_since(mark)
                         if r.params.get("watch") is None and r.headers.get("User-Agent", "").startswith("OpenAPI-Generator")]
    # (the start-up clean-up, once the first Agent is seen, may list earlier releases' bindings and read the shared one)
    children = [(str(r.method.value), r.resource.plural) for r in operator_requests
                if r.resource.plural not in ("agents", "validatingadmissionpolicies", "clusterrolebindings")
                and not (r.method.value == "GET" and r.name is None)]
    assert sorted(children) == sorted(("POST", plural) for plural in (
        "secrets", "secrets", "serviceaccounts", "roles", "rolebindings", "persistentvolumeclaims", "deployments", "services"))
    writes = [(str(r.method.value), r.resource.plural, r.subresource) for r in kube_api.emulator.writes(mark)
              if not r.headers.get("User-Agent", "").startswith("kubectl")]  # the operator's, kopf's included
    # the 8 creates, the runtime's ServiceAccount added to the TokenReview binding, one status write
    assert len(writes) == 10 and ("PATCH", "agents", "status") in writes, writes
    assert ("PATCH", "clusterrolebindings", None) in writes, writes
    secret_reads = [r for r in operator_requests if r.method.value == "GET" and r.resource.plural == "secrets"]
    assert secret_reads == []


def test_a_new_agent_is_handled_once_even_when_the_watch_runs_behind(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, cluster: Cluster
) -> None:
    """With hundreds of Agents created at once the operator's watch falls seconds behind its own writes; the
    echo of its status write must not make it handle the Agent as new a second time."""
    _apply_example(kubectl, "modelconfig", "mcp-server")
    _settle(kube_api)
    kube_api.emulator.watch_delay = 6.0
    mark = kube_api.emulator.request_count
    _apply_example(kubectl, "agent")
    cluster.wait_accepted("file-manager", timeout=60)
    time.sleep(kube_api.emulator.watch_delay + 2)  # every echo delivered (and handled)
    _settle(kube_api, timeout=60)
    operator.stop()
    assert operator.outputs[-1].count("Handler 'agent_create' succeeded") == 1, operator.outputs[-1][-3000:]
    kopf_patches = [r for r in kube_api.emulator.writes(mark) if r.method.value == "PATCH" and r.resource.plural == "agents"
                    and r.subresource is None and r.headers.get("User-Agent", "").startswith("kopf/")]
    # none: kopf's handled-state is kept in memory (settings.MemoryDiffBase), and no handler needs a finalizer
    assert kopf_patches == [], [r.text[:100] for r in kopf_patches]
    assert "gatehouse.dev/last-handled-configuration" not in cluster.agent("file-manager")["metadata"].get(  # type: ignore[index]
        "annotations", {})


def test_a_new_agent_takes_over_children_that_already_exist(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, cluster: Cluster
) -> None:
    """Children left over under the Agent's names (say, by an earlier install) are brought to the desired state."""
    cluster.core.create_namespaced_secret(NS, {"metadata": {"name": "file-manager-config"}, "data": {"config.json": "e30K"}})
    cluster.core.create_namespaced_service_account(NS, {"metadata": {"name": "file-manager"}})
    _apply_example(kubectl)
    cluster.wait_accepted("file-manager")
    uid = cluster.agent("file-manager")["metadata"]["uid"]  # type: ignore[index]
    secret = cluster.core.read_namespaced_secret("file-manager-config", NS)
    assert json.loads(base64.b64decode(secret.data["config.json"]))["name"] == "file-manager"
    for kind, name in CHILDREN:
        child = json.loads(kubectl("get", kind, name, "-o", "json"))
        assert [o["uid"] for o in child["metadata"].get("ownerReferences", [])] == [uid], f"{kind}/{name}"


def test_spec_change_rolls_a_new_config_hash(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, cluster: Cluster
) -> None:
    _apply_example(kubectl)
    cluster.wait_accepted("file-manager")
    before = cluster.config_hash("file-manager")
    kubectl("patch", "agent", "file-manager", "--type=merge", "-p", json.dumps({"spec": {"systemMessage": "Be terse."}}))
    after = wait_for(lambda: cluster.config_hash("file-manager") != before and cluster.config_hash("file-manager"),
                     what="a new config hash on the Deployment")
    wait_for(lambda: (cluster.agent("file-manager") or {}).get("status", {}).get("observedGeneration") == 2,
             what="observedGeneration 2")
    assert cluster.agent("file-manager")["status"]["configHash"] == after  # type: ignore[index]
    secret = cluster.core.read_namespaced_secret("file-manager-config", NS)
    assert json.loads(base64.b64decode(secret.data["config.json"]))["instruction"] == "Be terse."


def test_missing_dependency_is_reported_and_recovers_on_its_own(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, cluster: Cluster
) -> None:
    _apply_example(kubectl, "agent", "mcp-server")
    accepted = cluster.wait_accepted("file-manager", "False")
    assert accepted["reason"] == "DependencyMissing"
    assert "ModelConfig 'scripted-file-manager' not found" in accepted["message"]
    assert cluster.deployment("file-manager") is None
    events = json.loads(kubectl("get", "events", "-o", "json"))["items"]
    assert any(e["type"] == "Warning" and e["reason"] == "DependencyMissing" for e in events)

    _apply_example(kubectl, "modelconfig")  # no other action: the ModelConfig's arrival re-reconciles the Agent
    kubectl("wait", "--for=condition=Accepted", "agent/file-manager", "--timeout=20s")
    assert cluster.deployment("file-manager") is not None
    flipped = cluster.condition("file-manager", "Accepted")
    assert flipped["lastTransitionTime"] >= accepted["lastTransitionTime"]


def test_an_invalid_spec_is_reported_with_field_paths(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, cluster: Cluster, tmp_path: Path
) -> None:
    _apply_example(kubectl, "modelconfig", "mcp-server")
    agent = yaml.safe_load((EXAMPLE / "agent.yaml").read_text())
    agent["spec"]["approval"]["exempt"] = ["no_such_tool"]  # valid for the CRD schema, not for the translator
    kubectl("apply", "--validate=false", "-f", _write_manifest(tmp_path, agent))
    accepted = cluster.wait_accepted("file-manager", "False")
    assert accepted["reason"] == "InvalidSpec"
    assert accepted["message"].startswith("spec.approval.exempt[0]: unknown tool 'no_such_tool'")


@pytest.mark.secret_check("1s")
def test_drifted_children_are_repaired(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, cluster: Cluster
) -> None:
    _apply_example(kubectl)
    cluster.wait_accepted("file-manager")
    kubectl("delete", "deployment", "file-manager")
    wait_for(lambda: cluster.deployment("file-manager") is not None, what="the Deployment to come back")
    # A change to an Agent applied before is an Event (the status does not say what was repaired).
    events = json.loads(kubectl("get", "events", "-o", "json"))["items"]
    assert [(e["type"], e["reason"], e["message"]) for e in events if e["involvedObject"]["name"] == "file-manager"] == [
        ("Normal", "Reconciled", "created Deployment/file-manager")]
    kubectl("patch", "secret", "file-manager-config", "--type=merge", "-p", json.dumps({"data": {"config.json": "e30K"}}))
    wait_for(lambda: cluster.core.read_namespaced_secret("file-manager-config", NS).data["config.json"] != "e30K",
             what="the config Secret to be restored")


@pytest.mark.secret_check("1s")
def test_missing_and_rotated_secret(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, cluster: Cluster, tmp_path: Path
) -> None:
    _apply_example(kubectl)
    cluster.wait_accepted("file-manager")
    server = yaml.safe_load((EXAMPLE / "mcp-server.yaml").read_text())
    server["spec"]["headersFrom"] = [{"name": "Authorization", "secretKeyRef": {"name": "files-token", "key": "bearer"}}]
    kubectl("apply", "--validate=false", "-f", _write_manifest(tmp_path, server))
    accepted = cluster.wait_accepted("file-manager", "False")
    assert "Secret 'files-token' not found" in accepted["message"]

    secret = {"metadata": {"name": "files-token"}, "data": {"bearer": base64.b64encode(b"one").decode()}}
    cluster.core.create_namespaced_secret(NS, secret)
    cluster.wait_accepted("file-manager")
    deployment = cluster.deployment("file-manager")
    env = deployment["spec"]["template"]["spec"]["containers"][0]["env"]  # type: ignore[index]
    env = [e for e in env if e["name"] != "GATEHOUSE_POD_NAME"]  # the downward API's pod name, in every pod
    assert env == [{"name": "GATEHOUSE_MCP_FILE_TOOLS_AUTHORIZATION", "value": None,
                    "value_from": {"config_map_key_ref": None, "field_ref": None, "file_key_ref": None,
                                   "resource_field_ref": None,
                                   "secret_key_ref": {"key": "bearer", "name": "files-token", "optional": None}}}]
    first = deployment["spec"]["template"]["metadata"]["annotations"][SECRETS_HASH_ANNOTATION]  # type: ignore[index]

    cluster.core.patch_namespaced_secret("files-token", NS, {"data": {"bearer": base64.b64encode(b"two").decode()}})
    wait_for(lambda: cluster.deployment("file-manager")["spec"]["template"]["metadata"]["annotations"]  # type: ignore[index]
             [SECRETS_HASH_ANNOTATION] != first, what="pods to roll after the Secret rotated")


@pytest.mark.secret_check("1s")
def test_secrets_are_read_by_name_never_listed_or_watched(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, cluster: Cluster
) -> None:
    """The chart grants get/create/patch on Secrets, no list or watch: refused here as RBAC would refuse them, and
    still the generated token Secret's edit rolls the pods and its deletion regenerates it."""
    operator.stop()
    kube_api.emulator.forbid("GET", r"/secrets/?$")  # list and watch, in a namespace or across the cluster
    operator.start()
    _apply_example(kubectl)
    cluster.wait_accepted("file-manager")

    def secrets_hash() -> str:
        return cluster.deployment("file-manager")["spec"]["template"]["metadata"]["annotations"][  # type: ignore[index]
            SECRETS_HASH_ANNOTATION]

    first = secrets_hash()
    cluster.core.patch_namespaced_secret("file-manager-access", NS, {"data": {"tokens": base64.b64encode(b"a:b\n").decode()}})
    second = wait_for(lambda: secrets_hash() != first and secrets_hash(), what="pods to roll after the token Secret changed")
    cluster.core.delete_namespaced_secret("file-manager-access", NS)
    wait_for(lambda: secrets_hash() not in (first, second), what="a new token Secret, and the pods to roll")
    assert cluster.core.read_namespaced_secret("file-manager-access", NS).data["tokens"] != base64.b64encode(b"a:b\n").decode()
    collections = [f"{r.method.value} {r.url}" for r in kube_api.emulator.requests_since(0)
                   if r.resource is not None and r.resource.plural == "secrets" and r.name is None and r.method.value == "GET"]
    assert collections == []


def test_changing_a_model_config_reconciles_only_the_agents_using_it(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, cluster: Cluster, tmp_path: Path
) -> None:
    _apply_example(kubectl)
    agent = yaml.safe_load((EXAMPLE / "agent.yaml").read_text())
    other_model = yaml.safe_load((EXAMPLE / "modelconfig.yaml").read_text())
    other_model["metadata"]["name"] = "other-model"
    kubectl("apply", "--validate=false", "-f", _write_manifest(tmp_path, other_model))
    for name, model in (("second", "scripted-file-manager"), ("bystander", "other-model")):
        doc = {**agent, "metadata": {"name": name, "namespace": NS}, "spec": {**agent["spec"], "modelConfig": model}}
        kubectl("apply", "--validate=false", "-f", _write_manifest(tmp_path, doc))
    for name in ("file-manager", "second", "bystander"):
        cluster.wait_accepted(name)
    hashes = {name: cluster.config_hash(name) for name in ("file-manager", "second", "bystander")}
    _settle(kube_api)
    mark = kube_api.emulator.request_count

    kubectl("patch", "modelconfig", "scripted-file-manager", "--type=merge", "-p", json.dumps({"spec": {"model": "v2"}}))
    for name in ("file-manager", "second"):
        wait_for(lambda name=name: cluster.config_hash(name) != hashes[name], what=f"{name} to roll")
    _settle(kube_api)
    assert cluster.config_hash("bystander") == hashes["bystander"]
    touched = {r.url.path for r in kube_api.emulator.writes(mark)}
    assert not any("bystander" in path for path in touched), touched
    assert not any(r.params.get("watch") is None and str(r.url.path).endswith("/agents") and r.method.value == "GET"
                   for r in kube_api.emulator.requests_since(mark)), "dependents are found in the index, not by listing Agents"


LEGACY_BINDING = "gatehouse-tokenreview-default-file-manager"  # the example Agent's binding under earlier releases
OLD_FINALIZER = "gatehouse.dev/finalizer"  # what releases before 2026-11-26 put on every Agent (for kopf daemons)


def _has(kubectl: Kubectl, kind: str, name: str) -> bool:
    return kubectl.run("get", kind, name, check=False).returncode == 0


def _granted(api: RunningEmulator, name: str = "file-manager") -> bool:
    """Whether the Agent's runtime may create TokenReviews (its ServiceAccount is a subject of the shared binding)."""
    return (NS, name) in tokenreview_subjects(api)


def test_deleting_the_agent_collects_children_and_its_tokenreview_right(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, cluster: Cluster
) -> None:
    _apply_example(kubectl)
    cluster.wait_accepted("file-manager")
    assert "finalizers" not in cluster.agent("file-manager")["metadata"]  # type: ignore[index]
    assert _granted(kube_api)
    kubectl("delete", "agent", "file-manager", "--wait=true", "--timeout=20s")
    assert cluster.agent("file-manager") is None
    for kind, name in CHILDREN:  # the emulator's garbage collector follows ownerReferences like the real one
        assert not _has(kubectl, kind, name), f"{kind}/{name} survived its owner"
    # a subject of a cluster-scoped binding, so not owned: revoked by the operator on the Agent's DELETED event
    wait_for(lambda: not _granted(kube_api), what="the TokenReview right to go")


@pytest.mark.parametrize("deleted_while_down", [False, True])
def test_an_agent_left_with_the_old_finalizer_is_released_and_deletes_cleanly(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, cluster: Cluster, deleted_while_down: bool
) -> None:
    """An Agent as an earlier release left it (its children, its binding, kopf's finalizer): the operator removes the
    finalizer it no longer needs, once, so the Agent is never stuck Terminating; its binding goes with it."""
    _apply_example(kubectl)
    cluster.wait_accepted("file-manager")
    _settle(kube_api)
    operator.stop()
    kubectl("patch", "agent", "file-manager", "--type=merge", "-p", json.dumps({"metadata": {"finalizers": [OLD_FINALIZER]}}))
    if deleted_while_down:  # held by the finalizer until an operator lets go
        kubectl("delete", "agent", "file-manager", "--wait=false")
        assert cluster.agent("file-manager")["metadata"]["deletionTimestamp"]  # type: ignore[index]
    mark = kube_api.emulator.request_count
    operator.start()
    if not deleted_while_down:
        wait_for(lambda: not (cluster.agent("file-manager") or {})["metadata"].get("finalizers"), what="the finalizer removed")
        _settle(kube_api)
        patches = [r for r in kube_api.emulator.writes(mark) if r.resource.plural == "agents" and r.subresource is None]
        assert len(patches) == 1, [r.text for r in patches]  # once, and nothing else written to the Agent
        kubectl("delete", "agent", "file-manager", "--wait=true", "--timeout=20s")
    wait_for(lambda: cluster.agent("file-manager") is None, what="the Agent to go")
    wait_for(lambda: not _granted(kube_api), what="the TokenReview right to go")
    assert not _has(kubectl, "deployment", "file-manager")


def test_the_tokenreview_right_of_an_agent_deleted_while_the_operator_was_down_is_revoked_at_start_up(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, cluster: Cluster, tmp_path: Path
) -> None:
    _apply_example(kubectl)
    agent = yaml.safe_load((EXAMPLE / "agent.yaml").read_text())
    kept = {**agent, "metadata": {"name": "kept", "namespace": NS}}
    kubectl("apply", "--validate=false", "-f", _write_manifest(tmp_path, kept))
    cluster.wait_accepted("file-manager")
    cluster.wait_accepted("kept")
    operator.stop()
    kubectl("delete", "agent", "file-manager", "--wait=true", "--timeout=20s")  # no finalizer: gone at once
    assert _granted(kube_api)  # nobody saw the DELETED event
    mark = kube_api.emulator.request_count
    operator.start()
    wait_for(lambda: not _granted(kube_api), what="the orphaned subject to be revoked")
    _settle(kube_api)
    assert _granted(kube_api, "kept")  # its Agent is there
    writes = [(str(r.method.value), str(r.url.path)) for r in kube_api.emulator.writes(mark)
              if r.resource is not None and r.resource.plural == "clusterrolebindings"]
    assert writes == [("PATCH", f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{TOKENREVIEW}")]


def _legacy_binding(namespace: str, agent: str, role: str = TOKENREVIEW) -> dict[str, Any]:
    """A per-Agent TokenReview binding as releases before the shared one made it."""
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": f"gatehouse-tokenreview-{namespace}-{agent}", "labels": {
                "app.kubernetes.io/name": "gatehouse-agent", "app.kubernetes.io/instance": agent,
                "app.kubernetes.io/managed-by": "gatehouse-operator", "gatehouse.dev/agent": agent,
                "gatehouse.dev/agent-namespace": namespace}},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": agent, "namespace": namespace}]}


def test_the_per_agent_bindings_of_an_earlier_release_are_migrated_and_no_other_binding_is_touched(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, cluster: Cluster
) -> None:
    """Upgrade (issue 31, item 8): an earlier release left one ClusterRoleBinding per Agent. The new operator names each
    Agent that still wants TokenReviews in the shared binding, then deletes its old binding; the binding of an Agent
    deleted meanwhile goes too. Bindings that are not the operator's stay untouched."""
    _apply_example(kubectl)
    cluster.wait_accepted("file-manager")
    operator.stop()
    bindings = "rbac.authorization.k8s.io/v1/clusterrolebindings"
    foreign = {**_legacy_binding(NS, "x", "cluster-admin"), "metadata": {"name": "cluster-admins"}}
    for obj in (_legacy_binding(NS, "file-manager"), _legacy_binding(NS, "long-gone"), foreign):
        kube_api.call(lambda obj=obj: kube_api.emulator.seed(bindings, obj))  # type: ignore[misc]
    seed_tokenreview_binding(kube_api)  # as a fresh chart install left it: no subjects yet
    assert not _granted(kube_api)
    mark = kube_api.emulator.request_count
    operator.start()
    wait_for(lambda: not _has(kubectl, "clusterrolebinding", LEGACY_BINDING), what="the old binding to be migrated")
    wait_for(lambda: not _has(kubectl, "clusterrolebinding", "gatehouse-tokenreview-default-long-gone"),
             what="the old binding of a deleted Agent to go")
    _settle(kube_api)
    assert tokenreview_subjects(kube_api) == {(NS, "file-manager")}
    assert _has(kubectl, "clusterrolebinding", "cluster-admins")
    order = [(str(r.method.value), str(r.url.path).rsplit("/", 1)[-1]) for r in kube_api.emulator.writes(mark)
             if r.resource is not None and r.resource.plural == "clusterrolebindings"]
    assert sorted(order) == sorted([("PATCH", TOKENREVIEW), ("DELETE", LEGACY_BINDING),
                                    ("DELETE", "gatehouse-tokenreview-default-long-gone")]), order
    assert order.index(("PATCH", TOKENREVIEW)) < order.index(("DELETE", LEGACY_BINDING))  # never without the right


@pytest.mark.secret_check("3s")
def test_a_new_agents_secret_check_waits_one_interval_after_its_reconcile(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, cluster: Cluster
) -> None:
    """Its first reconcile has just read (or written) its Secrets: the check comes one interval later, not at once."""
    _apply_example(kubectl, "modelconfig", "mcp-server")
    _settle(kube_api)
    mark = kube_api.emulator.request_count
    _apply_example(kubectl, "agent")
    cluster.wait_accepted("file-manager")
    accepted = time.monotonic()

    def secret_reads() -> list[str]:
        return [str(r.name) for r in kube_api.emulator.requests_since(mark)
                if r.method.value == "GET" and r.resource is not None and r.resource.plural == "secrets"]

    time.sleep(2.0)  # within the interval after the reconcile
    assert secret_reads() == []
    wait_for(lambda: sorted(secret_reads()) == ["file-manager-access", "file-manager-config"], timeout=10,
             what="the first Secret check")
    assert time.monotonic() - accepted >= 2.5


def test_operator_restart_converges_and_a_noop_resync_writes_nothing(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, cluster: Cluster,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _apply_example(kubectl)
    cluster.wait_accepted("file-manager")
    before = cluster.config_hash("file-manager")

    operator.stop()  # while it is down: the spec changes and a child is deleted by hand
    kubectl("patch", "agent", "file-manager", "--type=merge", "-p", json.dumps({"spec": {"description": "changed while down"}}))
    kubectl("delete", "service", "file-manager")
    operator.start()
    wait_for(lambda: cluster.config_hash("file-manager") not in (None, before), what="the missed change to be applied")
    wait_for(lambda: kubectl.run("get", "service", "file-manager", check=False).returncode == 0, what="the Service back")
    _settle(kube_api)

    # A restart over an unchanged cluster (on.resume) and then periodic resyncs: reads only, no writes.
    operator.stop()
    monkeypatch.setenv("GATEHOUSE_RESYNC_SECONDS", "0.3")
    mark = kube_api.emulator.request_count
    operator.start()
    agent_path = f"/apis/{GROUP}/{VERSION}/namespaces/{NS}/agents/file-manager"

    def reconciles() -> int:
        return sum(1 for r in kube_api.emulator.requests_since(mark) if r.method.value == "GET" and str(r.url.path) == agent_path)

    wait_for(lambda: reconciles() >= 4, what="a resume and a few resyncs")
    operator.stop()
    writes = kube_api.emulator.writes(mark)
    assert writes == [], [f"{r.method.value} {r.url.path} {r.text[:200]}" for r in writes]
    # What one no-op resync costs: a GET of the Agent, one per child (7, the state claim included) and one of the
    # generated token Secret (read by name, as every Secret the Agent references), nothing else. The first reconcile
    # after the start takes the Agent from kopf's event (no GET of it), and the admission policy is read once for all
    # of them (absent here, so no binding is read). The TokenReview binding is read by the clean-up, once a resync
    # period for all Agents (and by the first reconcile, if it comes first), never by a reconcile after that.
    per_run, first = 9, 8 + 1
    gets = [r for r in kube_api.emulator.requests_since(mark) if r.method.value == "GET" and r.name is not None
            and r.params.get("watch") is None]
    binding_reads = [r for r in gets if r.resource is not None and r.resource.plural == "clusterrolebindings"]
    gets = [r for r in gets if r not in binding_reads]
    assert first + per_run * (reconciles() - 1) < len(gets) <= first + per_run * reconciles(), (len(gets), reconciles())
    assert 1 <= len(binding_reads) <= 2 * reconciles(), (len(binding_reads), reconciles())  # one a period, not a reconcile


def test_invalid_agent_is_refused_by_the_api_like_a_real_cluster(
    kube_api: RunningEmulator, kubectl: Kubectl, tmp_path: Path
) -> None:
    agent = yaml.safe_load((EXAMPLE / "agent.yaml").read_text())
    agent["spec"]["tools"][0]["mcpServer"]["requireApproval"] = ["delete_files"]
    result = kubectl.run("apply", "--validate=false", "-f", _write_manifest(tmp_path, agent), check=False)
    assert result.returncode != 0
    assert "every requireApproval entry must also be listed in toolNames" in result.stderr

