"""End-to-end: an Agent's declared state (spec.state) with the real operator against the emulated API server.

The claim ``<agent>-state`` is created, kept when the Agent goes (and taken over by the next Agent of that name)
unless the Agent asks otherwise; a claim left Pending is reported on the Agent; ``Durable`` says what survives;
Postgres comes from a Secret; an Agent stored before ``spec.state`` with more replicas keeps running as it was.
The emulator has no PersistentVolume controller or kubelet: the tests play their parts (a claim's phase, a
Deployment's available replicas), as test_e2e.py does for the Deployment.
"""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml

from tests.gatehouse_operator.conftest import EXAMPLE, Kubectl, OperatorProcess, wait_for
from tests.gatehouse_operator.test_e2e import NS, Cluster, _apply_example, _write_manifest
from tests.support.kube_server import RunningEmulator

pytestmark = pytest.mark.e2e

AGENTS = "gatehouse.dev/v1alpha1/agents"
CLAIM = "file-manager-state"


@pytest.fixture
def cluster(kube: kubernetes.client.ApiClient) -> Cluster:
    return Cluster(kube)


def _agent(**spec: Any) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((EXAMPLE / "agent.yaml").read_text())
    doc["spec"].update(copy.deepcopy(spec))
    return doc


def _apply(kubectl: Kubectl, tmp_path: Path, doc: dict[str, Any], check: bool = True) -> Any:
    return kubectl.run("apply", "--validate=false", "-f", _write_manifest(tmp_path, doc), check=check)


def _claim(cluster: Cluster, name: str = CLAIM) -> dict[str, Any] | None:
    try:
        return cluster.core.read_namespaced_persistent_volume_claim(name, NS).to_dict()  # type: ignore[no-any-return]
    except kubernetes.client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def _compact(value: Any) -> Any:
    """The client's model as a dict without its unset (None) fields, which differ between client versions."""
    if isinstance(value, dict):
        return {k: _compact(v) for k, v in value.items() if v is not None}
    return value


def _volumes(cluster: Cluster, name: str = "file-manager") -> dict[str, dict[str, Any]]:
    deployment = cluster.deployment(name) or {}
    return {v["name"]: {k: val for k, val in _compact(v).items() if k != "name"}
            for v in deployment["spec"]["template"]["spec"]["volumes"]}


def _bind(cluster: Cluster, storage_class: str = "standard") -> None:
    """Play the API server's default StorageClass admission and the volume controller: the claim gets bound."""
    cluster.core.patch_namespaced_persistent_volume_claim(CLAIM, NS, {"spec": {"storageClassName": storage_class}})
    cluster.core.patch_namespaced_persistent_volume_claim_status(
        CLAIM, NS, {"status": {"phase": "Bound", "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]}})


def _nudge(cluster: Cluster, available: int = 1) -> None:
    """A Deployment status change (as the pod becoming ready would make), which reconciles the Agent."""
    cluster.apps.patch_namespaced_deployment_status(
        "file-manager", NS, {"status": {"availableReplicas": available, "replicas": available}})


def test_a_claim_without_a_default_storage_class_is_reported_until_it_binds(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, cluster: Cluster
) -> None:
    _apply_example(kubectl)
    cluster.wait_accepted("file-manager")
    claim = _claim(cluster)
    assert claim is not None
    assert claim["spec"]["resources"]["requests"] == {"storage": "1Gi"} and claim["spec"]["storage_class_name"] is None
    assert _volumes(cluster)["state"] == {"persistent_volume_claim": {"claim_name": CLAIM}}
    state = wait_for(lambda: cluster.condition("file-manager", "StateReady"), what="StateReady")
    assert (state["status"], state["reason"]) == ("False", "ClaimPending")
    assert state["message"] == (f"PersistentVolumeClaim {CLAIM} is Pending: no default StorageClass; "
                                "set spec.state.sqlite.storageClassName")
    durable = cluster.condition("file-manager", "Durable")
    assert (durable["status"], durable["reason"]) == ("True", "Sqlite")

    _bind(cluster)
    _nudge(cluster)
    state = wait_for(lambda: cluster.condition("file-manager", "StateReady").get("status") == "True"
                     and cluster.condition("file-manager", "StateReady"), what="StateReady=True")
    assert state["reason"] == "ClaimBound"
    assert state["message"] == f"PersistentVolumeClaim {CLAIM} is Bound (1Gi, StorageClass standard)"


def test_a_named_class_waiting_for_its_first_consumer_says_so(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, cluster: Cluster, tmp_path: Path
) -> None:
    _apply_example(kubectl, "modelconfig", "mcp-server")
    _apply(kubectl, tmp_path, _agent(state={"sqlite": {"storageClassName": "local-wffc", "size": "2Gi"}}))
    cluster.wait_accepted("file-manager")
    state = wait_for(lambda: cluster.condition("file-manager", "StateReady"), what="StateReady")
    assert state["reason"] == "ClaimPending"
    assert "waiting for a volume of StorageClass local-wffc (a WaitForFirstConsumer class binds it" in state["message"]
    claim = _claim(cluster)
    assert claim is not None and claim["spec"]["storage_class_name"] == "local-wffc"


def test_the_claim_outlives_its_agent_and_the_next_agent_of_that_name_takes_it_over(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, cluster: Cluster
) -> None:
    _apply_example(kubectl)
    cluster.wait_accepted("file-manager")
    first = _claim(cluster)
    assert first is not None and not first["metadata"]["owner_references"]
    kubectl("delete", "agent", "file-manager", "--wait=true", "--timeout=20s")
    wait_for(lambda: cluster.deployment("file-manager") is None, what="the Deployment collected with its Agent")
    kept = _claim(cluster)
    assert kept is not None and kept["metadata"]["uid"] == first["metadata"]["uid"]

    _apply_example(kubectl, "agent")
    cluster.wait_accepted("file-manager")
    again = _claim(cluster)
    assert again is not None and again["metadata"]["uid"] == first["metadata"]["uid"]  # the same claim, the same state
    assert _volumes(cluster)["state"]["persistent_volume_claim"]["claim_name"] == CLAIM


def test_delete_claim_with_agent_makes_the_agent_its_owner_and_it_goes_with_the_agent(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, cluster: Cluster, tmp_path: Path
) -> None:
    _apply_example(kubectl, "modelconfig", "mcp-server")
    _apply(kubectl, tmp_path, _agent(state={"sqlite": {"deleteClaimWithAgent": True}}))
    cluster.wait_accepted("file-manager")
    uid = cluster.agent("file-manager")["metadata"]["uid"]  # type: ignore[index]
    owners = lambda: [o["uid"] for o in (_claim(cluster) or {})["metadata"]["owner_references"] or []]  # noqa: E731
    assert owners() == [uid]

    _apply(kubectl, tmp_path, _agent(state={"sqlite": {"deleteClaimWithAgent": False}}))  # changed its mind: released
    wait_for(lambda: owners() == [], what="the Agent's ownerReference removed from the claim")
    _apply(kubectl, tmp_path, _agent(state={"sqlite": {"deleteClaimWithAgent": True}}))
    wait_for(lambda: owners() == [uid], what="the Agent's ownerReference back on the claim")

    kubectl("delete", "agent", "file-manager", "--wait=true", "--timeout=20s")
    wait_for(lambda: _claim(cluster) is None, what="the claim collected with its Agent")


def test_a_larger_size_grows_the_claim_and_a_smaller_one_is_reported(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, cluster: Cluster, tmp_path: Path
) -> None:
    _apply_example(kubectl)
    cluster.wait_accepted("file-manager")
    _bind(cluster)
    _apply(kubectl, tmp_path, _agent(state={"sqlite": {"size": "3Gi"}}))
    wait_for(lambda: (_claim(cluster) or {})["spec"]["resources"]["requests"]["storage"] == "3Gi", what="the claim to grow")
    _apply(kubectl, tmp_path, _agent(state={"sqlite": {"size": "500Mi"}}))
    state = wait_for(lambda: "never shrinks" in cluster.condition("file-manager", "StateReady").get("message", "")
                     and cluster.condition("file-manager", "StateReady"), what="the shrink reported")
    assert state["message"].endswith("; spec.state.sqlite.size asks 500Mi but it requests 3Gi: a claim never shrinks")
    assert (_claim(cluster) or {})["spec"]["resources"]["requests"]["storage"] == "3Gi"


def test_an_ephemeral_agent_has_no_claim_and_is_not_durable(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, cluster: Cluster, tmp_path: Path
) -> None:
    _apply_example(kubectl, "modelconfig", "mcp-server")
    _apply(kubectl, tmp_path, _agent(state={"ephemeral": True}))
    cluster.wait_accepted("file-manager")
    durable = wait_for(lambda: cluster.condition("file-manager", "Durable"), what="Durable")
    assert (durable["status"], durable["reason"]) == ("False", "Ephemeral")
    assert "pending approvals and tasks are lost when the pod is replaced" in durable["message"]
    assert _claim(cluster) is None
    assert _volumes(cluster)["state"] == {"empty_dir": {}}
    assert "Ephemeral" in kubectl("get", "agents", "-o", "wide").splitlines()[1].split()


@pytest.mark.secret_check("1s")
def test_postgres_comes_from_a_secret_and_allows_replicas(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, cluster: Cluster, tmp_path: Path
) -> None:
    _apply_example(kubectl, "modelconfig", "mcp-server")
    doc = _agent(state={"postgres": {"urlSecretRef": {"name": "agent-db"}}}, deployment={"replicas": 3})
    _apply(kubectl, tmp_path, doc)
    accepted = cluster.wait_accepted("file-manager", "False")
    assert accepted["reason"] == "DependencyMissing"
    assert "spec.state.postgres.urlSecretRef: Secret 'agent-db' not found in namespace 'default'" in accepted["message"]

    url = b"postgresql+asyncpg://gatehouse:pw@db:5432/gatehouse"
    cluster.core.create_namespaced_secret(NS, {"metadata": {"name": "agent-db"}, "data": {"url": base64.b64encode(url).decode()}})
    cluster.wait_accepted("file-manager", timeout=20)  # the periodic Secret check notices it
    deployment = cluster.deployment("file-manager")
    assert deployment is not None and deployment["spec"]["replicas"] == 3
    assert deployment["spec"]["strategy"]["type"] == "RollingUpdate"
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e["value_from"]["secret_key_ref"] for e in container["env"] if e["value_from"]}
    assert (env["GATEHOUSE_DATABASE_URL"]["name"], env["GATEHOUSE_DATABASE_URL"]["key"]) == ("agent-db", "url")
    assert "--state-dir" not in container["command"] and "state" not in _volumes(cluster)
    assert _claim(cluster) is None
    secret = cluster.core.read_namespaced_secret("file-manager-config", NS)
    assert b"postgresql" not in base64.b64decode(secret.data["config.json"])  # the URL never enters the config
    durable = cluster.condition("file-manager", "Durable")
    assert (durable["status"], durable["reason"]) == ("True", "Postgres")


def test_replicas_above_one_without_postgres_are_refused_by_the_api(
    kube_api: RunningEmulator, kubectl: Kubectl, tmp_path: Path
) -> None:
    result = _apply(kubectl, tmp_path, _agent(deployment={"replicas": 2}), check=False)
    assert result.returncode != 0
    assert "spec.deployment.replicas: more than one replica needs spec.state.postgres" in result.stderr


def test_an_agent_stored_with_more_replicas_keeps_running_and_says_why_until_changed(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, cluster: Cluster, tmp_path: Path
) -> None:
    """As if written before spec.state existed: stored as it was (the emulator's seed skips validation)."""
    _apply_example(kubectl, "modelconfig", "mcp-server")
    legacy = _agent(deployment={"replicas": 3})
    operator.stop()
    kube_api.call(lambda: kube_api.emulator.seed(AGENTS, legacy))
    operator.start()
    cluster.wait_accepted("file-manager")
    deployment = cluster.deployment("file-manager")
    assert deployment is not None and deployment["spec"]["replicas"] == 3  # nobody's agent is scaled down
    assert deployment["spec"]["strategy"]["type"] == "RollingUpdate"
    assert _volumes(cluster)["state"] == {"empty_dir": {}} and _claim(cluster) is None
    durable = wait_for(lambda: cluster.condition("file-manager", "Durable"), what="Durable")
    assert (durable["status"], durable["reason"]) == ("False", "ReplicasNeedPostgres")
    assert durable["message"].startswith("spec.deployment.replicas is 3 without spec.state.postgres: each pod keeps")

    edited = _agent(deployment={"replicas": 3}, systemMessage="Be terse.")  # other edits still go through
    _apply(kubectl, tmp_path, edited)
    wait_for(lambda: json.loads(kubectl("get", "agent", "file-manager", "-o", "json"))["status"].get("observedGeneration") == 2,
             what="the edit reconciled")
    result = _apply(kubectl, tmp_path, _agent(deployment={"replicas": 2}), check=False)
    assert result.returncode != 0 and "more than one replica needs spec.state.postgres" in result.stderr

    _apply(kubectl, tmp_path, _agent(deployment={"replicas": 1}))
    wait_for(lambda: cluster.condition("file-manager", "Durable").get("reason") == "Sqlite", what="Durable=True, Sqlite")
    deployment = cluster.deployment("file-manager")
    assert deployment is not None and deployment["spec"]["strategy"] == {"type": "Recreate", "rolling_update": None}
    assert _volumes(cluster)["state"]["persistent_volume_claim"]["claim_name"] == CLAIM
