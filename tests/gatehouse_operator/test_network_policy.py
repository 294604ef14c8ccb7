"""The NetworkPolicy the operator renders for each runtime when the chart's ``networkPolicy.enabled`` is on
(:mod:`gatehouse_operator.network_policy`): golden files for an Agent and an MCPGateway
(tests/testdata/operator-network-policy/), the settings the chart passes, and that nothing is rendered without them.
Regenerate with ``--update-golden`` and review the diff."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from agent_runtime.contract.manifests import load_manifests
from agent_runtime.contract.translator import translate, translate_gateway
from gatehouse_operator import builders
from gatehouse_operator.network_policy import ENV, NetworkPolicySettings, settings_from_env
from gatehouse_operator.settings import DEFAULT_RUNTIME_IMAGE, OperatorConfig
from tests.support.golden import assert_golden

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "testdata" / "operator-network-policy"
EXAMPLES = ROOT / "examples"
UID = "00000000-0000-4000-8000-000000000003"
# What the chart renders for networkPolicy.runtimeFrom: the ingress controller's namespace, Prometheus, an address.
CHART_ENV = (
    '{"from":[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"ingress-nginx"}}},'
    '{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"monitoring"}},'
    '"podSelector":{"matchExpressions":[{"key":"app","operator":"In","values":["prometheus"]}]}},'
    '{"ipBlock":{"cidr":"10.0.0.0/8","except":["10.9.0.0/16"]}}]}'
)


def _children(case: str, settings: NetworkPolicySettings | None) -> list[dict[str, Any]]:
    inputs = builders.BuildInputs(runtime_image=DEFAULT_RUNTIME_IMAGE, network_policy=settings)
    if case == "file-manager":
        manifests = load_manifests([ROOT / "tests" / "testdata" / "operator" / "file-manager" / "input.yaml"])
        (agent,) = manifests.agents.values()
        config = translate(agent, manifests.model_configs, manifests.mcp_servers, in_cluster=True)
        owner = {"apiVersion": "gatehouse.dev/v1alpha1", "kind": "Agent", "metadata": {"name": agent.name, "uid": UID}}
        return builders.desired_children(agent, owner, config, inputs)
    manifests = load_manifests([EXAMPLES / "gateway" / "gateway.yaml", EXAMPLES / "file-manager" / "mcp-server.yaml"])
    (gateway,) = manifests.gateways.values()
    gateway_config = translate_gateway(gateway, manifests.mcp_servers, in_cluster=True)
    owner = {"apiVersion": "gatehouse.dev/v1alpha1", "kind": "MCPGateway", "metadata": {"name": gateway.name, "uid": UID}}
    return builders.desired_children(gateway, owner, gateway_config, inputs)


def _policy(case: str, settings: NetworkPolicySettings | None) -> dict[str, Any] | None:
    found = [c for c in _children(case, settings) if c["kind"] == "NetworkPolicy"]
    return found[0] if found else None


@pytest.mark.parametrize("case", ["file-manager", "files-gate"])
def test_policy_matches_golden(case: str, update_golden: bool) -> None:
    policy = _policy(case, settings_from_env({ENV: CHART_ENV}))
    assert policy is not None
    kubernetes_validate.validate(policy, "1.31", strict=True)
    assert_golden(policy, GOLDEN / f"{case}.json", update_golden)


@pytest.mark.parametrize("case", ["file-manager", "files-gate"])
def test_policy_selects_exactly_the_deployments_pods_and_admits_only_its_port(case: str) -> None:
    children = _children(case, NetworkPolicySettings())
    deployment = next(c for c in children if c["kind"] == "Deployment")
    policy = next(c for c in children if c["kind"] == "NetworkPolicy")
    assert policy["metadata"]["name"] == deployment["metadata"]["name"]
    assert policy["metadata"]["ownerReferences"][0]["uid"] == UID  # goes with its Agent or MCPGateway
    assert policy["spec"]["podSelector"] == {"matchLabels": deployment["spec"]["selector"]["matchLabels"]}
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    (rule,) = policy["spec"]["ingress"]
    (port,) = deployment["spec"]["template"]["spec"]["containers"][0]["ports"]
    assert rule["ports"] == [{"protocol": "TCP", "port": port["containerPort"]}]
    # without peers from the chart: the namespace's Agent runtimes only, as labelled by the same builders
    agent_pod_labels = builders.labels_for("caller", builders.AGENT)
    (peer,) = rule["from"]
    assert peer["podSelector"]["matchLabels"].items() <= agent_pod_labels.items()
    gateway_pod_labels = builders.labels_for("caller", builders.GATEWAY)
    assert not peer["podSelector"]["matchLabels"].items() <= gateway_pod_labels.items()  # a gateway is no caller


@pytest.mark.parametrize("case", ["file-manager", "files-gate"])
def test_nothing_is_rendered_unless_the_chart_turns_it_on(case: str) -> None:
    assert _policy(case, None) is None
    assert OperatorConfig.from_env({}).network_policy is None
    assert OperatorConfig.from_env({ENV: ""}).network_policy is None
    assert OperatorConfig.from_env({ENV: '{"from":[]}'}).network_policy == NetworkPolicySettings()


@pytest.mark.parametrize("value", [
    "{",  # not JSON
    '{"from": {}}',  # not a list
    '{"from": [{}]}',  # a peer that selects nothing would be read as "everything" by nobody: refused
    '{"from": [{"ipBlock": {"cidr": "10.0.0.0/8"}, "podSelector": {}}]}',  # ipBlock is alone or not at all
    '{"from": [{"podSelector": {"matchLabel": {"a": "b"}}}]}',  # a misspelt field
    '{"from": [], "to": []}',  # unknown key
    '{"from": [{"podSelector": {"matchExpressions": [{"key": "a", "operator": "Is"}]}}]}',
])
def test_a_malformed_setting_stops_the_operator_at_start(value: str) -> None:
    with pytest.raises(ValueError, match=ENV):
        OperatorConfig.from_env({ENV: value})
