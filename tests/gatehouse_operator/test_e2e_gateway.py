"""End-to-end: an MCPGateway, the real operator (kopf run) against the emulated API server, driven with kubectl.

examples/gateway/ applied in front of the demo tools' RemoteMCPServer: the operator makes the gateway's children
(by the Agent's builders), reports Accepted/Ready/Durable on the gateway, and repairs a child deleted by hand. A
gateway whose upstream is missing is refused until the RemoteMCPServer appears; one with no upstream (hooks only) is
accepted; one named like an Agent is
refused, and the Agent's children are not touched.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml

from tests.gatehouse_operator.conftest import EXAMPLE, Kubectl, OperatorProcess, wait_for
from tests.gatehouse_operator.test_e2e import NS, Cluster
from tests.support.kube_server import RunningEmulator

pytestmark = pytest.mark.e2e

GATEWAY = EXAMPLE.parent / "gateway" / "gateway.yaml"
NAME = "files-gate"
POLICY = "gatehouse-toolapproval-decision"  # the operator's default admission policy name
CHILDREN = [
    ("secret", "files-gate-config"), ("secret", "files-gate-access"), ("serviceaccount", NAME),
    ("role", "files-gate-runtime"), ("rolebinding", "files-gate-runtime"), ("persistentvolumeclaim", "files-gate-state"),
    ("deployment", NAME), ("service", NAME),
]


def _gateway(cluster: Cluster) -> dict[str, Any]:
    found: dict[str, Any] = cluster.custom.get_namespaced_custom_object("gatehouse.dev", "v1alpha1", NS, "mcpgateways", NAME)
    return found


def _condition(cluster: Cluster, type_: str) -> dict[str, Any]:
    return next((c for c in (_gateway(cluster).get("status") or {}).get("conditions", []) if c["type"] == type_), {})


def test_the_example_gateway_is_reconciled_like_an_agent(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, kube: kubernetes.client.ApiClient
) -> None:
    cluster = Cluster(kube)
    kubectl("apply", "--validate=false", "-f", str(EXAMPLE / "mcp-server.yaml"))
    kubectl("apply", "--validate=false", "-f", str(GATEWAY))
    kubectl("wait", "--for=condition=Accepted", f"mcpgateway/{NAME}", "--timeout=20s")
    for kind, name in CHILDREN:
        found = json.loads(kubectl("get", kind, name, "-o", "json"))
        if kind != "persistentvolumeclaim":  # kept when the gateway goes, as an Agent's claim
            (ref,) = found["metadata"]["ownerReferences"]
            assert (ref["kind"], ref["name"]) == ("MCPGateway", NAME)
    deployment = wait_for(lambda: cluster.deployment(NAME), what="Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["service_account_name"] == NAME
    assert pod["containers"][0]["command"][:2] == ["gatehouse-runtime", "gateway"]
    config = json.loads(base64.b64decode(cluster.core.read_namespaced_secret("files-gate-config", NS).data["config.json"]))
    assert config["schema_version"] == "gatehouse.dev/gateway-config/v1" and config["upstream"]["name"] == "file-tools"
    assert _condition(cluster, "Durable")["reason"] == "Sqlite"
    assert _condition(cluster, "Ready")["status"] == "False"

    # Ready follows the Deployment's status (the emulator has no deployment controller: play its part).
    cluster.apps.patch_namespaced_deployment_status(NAME, NS, {"status": {"availableReplicas": 1, "replicas": 1}})
    kubectl("wait", "--for=condition=Ready", f"mcpgateway/{NAME}", "--timeout=20s")

    # A child deleted by hand comes back (the Deployment is watched, and it names its gateway).
    kubectl("delete", "deployment", NAME)
    wait_for(lambda: cluster.deployment(NAME), what="the Deployment made again")

    def repaired() -> bool:  # an Event on the gateway says what the reconcile changed, as on an Agent
        events = cluster.core.list_namespaced_event(NS).items
        return any(e.involved_object.kind == "MCPGateway" and e.involved_object.name == NAME and e.reason == "Reconciled"
                   and f"created Deployment/{NAME}" in (e.message or "") for e in events)

    wait_for(repaired, what="the Reconciled Event on the MCPGateway")


def test_a_gateway_waits_for_its_upstream_and_a_hooks_only_one_needs_none(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, kube: kubernetes.client.ApiClient
) -> None:
    cluster = Cluster(kube)
    kubectl("apply", "--validate=false", "-f", str(GATEWAY))  # its RemoteMCPServer file-tools is not there
    kubectl("wait", "--for=condition=Accepted=False", f"mcpgateway/{NAME}", "--timeout=20s")
    accepted = _condition(cluster, "Accepted")
    assert accepted["reason"] == "DependencyMissing" and "spec.upstream.name" in accepted["message"]
    assert cluster.deployment(NAME) is None

    # The upstream appears: the gateway that names it is reconciled, without being touched.
    kubectl("apply", "--validate=false", "-f", str(EXAMPLE / "mcp-server.yaml"))
    kubectl("wait", "--for=condition=Accepted", f"mcpgateway/{NAME}", "--timeout=20s")
    wait_for(lambda: cluster.deployment(NAME), what="Deployment")

    # No upstream at all: hooks only, accepted without any RemoteMCPServer.
    kubectl("patch", "mcpgateway", NAME, "--type=json", "-p", '[{"op": "remove", "path": "/spec/upstream"}]')
    kubectl("wait", "--for=condition=Accepted", f"mcpgateway/{NAME}", "--timeout=20s")
    config = json.loads(base64.b64decode(cluster.core.read_namespaced_secret("files-gate-config", NS).data["config.json"]))
    assert config["upstream"] is None


def test_a_gateway_named_like_an_agent_is_refused_and_the_agents_children_are_left_alone(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, kube: kubernetes.client.ApiClient,
    tmp_path: Path,
) -> None:
    cluster = Cluster(kube)
    for name in ("modelconfig", "mcp-server", "agent"):
        kubectl("apply", "--validate=false", "-f", str(EXAMPLE / f"{name}.yaml"))
    kubectl("wait", "--for=condition=Accepted", "agent/file-manager", "--timeout=20s")
    doc = yaml.safe_load(GATEWAY.read_text())
    doc["metadata"]["name"] = "file-manager"
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(doc))
    kubectl("apply", "--validate=false", "-f", str(path))
    kubectl("wait", "--for=condition=Accepted=False", "mcpgateway/file-manager", "--timeout=20s")
    found = cluster.custom.get_namespaced_custom_object("gatehouse.dev", "v1alpha1", NS, "mcpgateways", "file-manager")
    (accepted,) = [c for c in found["status"]["conditions"] if c["type"] == "Accepted"]
    assert accepted["reason"] == "NameTaken" and "an Agent named 'file-manager'" in accepted["message"]
    deployment = cluster.deployment("file-manager")
    assert deployment is not None
    assert deployment["spec"]["template"]["spec"]["containers"][0]["command"][:2] == ["gatehouse-runtime", "serve"]
    (ref,) = deployment["metadata"]["owner_references"]
    assert ref["kind"] == "Agent"


def test_the_admission_policy_installed_shows_on_the_gateway_without_touching_it(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, kube: kubernetes.client.ApiClient,
    tmp_path: Path,
) -> None:
    cluster = Cluster(kube)
    doc = yaml.safe_load(GATEWAY.read_text())
    del doc["spec"]["upstream"]  # hooks only: nothing else to apply
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(doc))
    kubectl("apply", "--validate=false", "-f", str(path))
    kubectl("wait", "--for=condition=Accepted", f"mcpgateway/{NAME}", "--timeout=20s")
    assert _condition(cluster, "AdmissionPolicy")["reason"] == "NotInstalled"

    admission = kubernetes.client.AdmissionregistrationV1Api(kube)
    admission.create_validating_admission_policy({
        "metadata": {"name": POLICY},
        "spec": {"failurePolicy": "Fail", "validations": [{"expression": "true"}],
                 "matchConstraints": {"resourceRules": [{"apiGroups": ["gatehouse.dev"], "apiVersions": ["v1alpha1"],
                                                         "operations": ["UPDATE"], "resources": ["toolapprovals"]}]}},
    })
    admission.create_validating_admission_policy_binding(
        {"metadata": {"name": POLICY}, "spec": {"policyName": POLICY, "validationActions": ["Deny"]}})
    # The operator's watch of the policy and its bindings reconciles every gateway when the verdict changes.
    wait_for(lambda: _condition(cluster, "AdmissionPolicy").get("reason") == "Enforced", what="AdmissionPolicy Enforced")
