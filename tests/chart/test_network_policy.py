"""The chart's ``networkPolicy`` (templates/networkpolicy.yaml, docs/cluster.md "Network policies"): off by default;
on, the operator's pods admit only the listed peers to their health port, the Slack bridge's only the ingress
controller, and the operator is told (GATEHOUSE_NETWORK_POLICY) to give each runtime its own -- with exactly the right
to write NetworkPolicies and no more."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from gatehouse_operator.network_policy import ENV, settings_from_env
from tests.chart.conftest import CHART, RELEASE, RELEASE_NAMESPACE, Render, of_kind

INGRESS = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress-nginx"}}}
PROMETHEUS = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
              "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}}
ON = ("--set", "networkPolicy.enabled=true")
PEERS = ("--set-json", f"networkPolicy.runtimeFrom={json.dumps([INGRESS, PROMETHEUS])}",
         "--set-json", f"networkPolicy.operatorFrom={json.dumps([PROMETHEUS])}")
SLACK = ("--set", "slack.enabled=true", "--set", "slack.namespaces={team-a}",
         "--set-json", f"networkPolicy.slackFrom={json.dumps([INGRESS])}")
RULE = ("networking.k8s.io", "networkpolicies")


def _operator_env(docs: list[dict[str, Any]]) -> dict[str, str]:
    (deployment,) = [d for d in of_kind(docs, "Deployment") if d["metadata"]["name"].endswith("-operator")]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e["value"] for e in container["env"] if "value" in e}


def _network_policy_verbs(docs: list[dict[str, Any]]) -> dict[str, set[str]]:
    """Role or ClusterRole name -> its verbs on networkpolicies."""
    found: dict[str, set[str]] = {}
    for role in of_kind(docs, "Role", "ClusterRole"):
        for rule in role.get("rules") or []:
            if RULE[0] in rule.get("apiGroups", []) and RULE[1] in rule.get("resources", []):
                found.setdefault(f"{role['metadata'].get('namespace', '')}/{role['metadata']['name']}", set()).update(
                    rule["verbs"])
    return found


def test_off_by_default(render: Render) -> None:
    docs = render()
    assert of_kind(docs, "NetworkPolicy") == []
    assert ENV not in _operator_env(docs)
    assert _network_policy_verbs(docs) == {}


def test_on_the_operator_admits_only_the_listed_peers_to_its_health_port(render: Render) -> None:
    docs = render(*ON, *PEERS)
    (policy,) = of_kind(docs, "NetworkPolicy")
    (deployment,) = of_kind(docs, "Deployment")
    assert policy["metadata"]["namespace"] == RELEASE_NAMESPACE
    assert policy["spec"]["podSelector"] == {"matchLabels": deployment["spec"]["selector"]["matchLabels"]}
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    (port,) = deployment["spec"]["template"]["spec"]["containers"][0]["ports"]
    assert policy["spec"]["ingress"] == [{"from": [PROMETHEUS], "ports": [{"protocol": "TCP", "port": port["containerPort"]}]}]


def test_on_without_peers_the_operator_admits_no_pod(render: Render) -> None:
    (policy,) = of_kind(render(*ON), "NetworkPolicy")
    assert policy["spec"]["policyTypes"] == ["Ingress"] and policy["spec"]["ingress"] == []


def test_on_the_operator_renders_each_runtimes_policy_with_the_charts_peers(render: Render) -> None:
    """What the chart passes is what the operator reads (its own parser, the one it starts with)."""
    settings = settings_from_env(_operator_env(render(*ON, *PEERS)))
    assert settings is not None
    assert [p.model_dump(by_alias=True, exclude_none=True) for p in settings.from_] == [INGRESS, PROMETHEUS]
    empty = settings_from_env(_operator_env(render(*ON)))
    assert empty is not None and empty.from_ == []


@pytest.mark.parametrize("watched", [False, True], ids=["all-namespaces", "watched-namespaces"])
def test_on_the_operator_may_get_create_and_patch_network_policies_where_it_serves_and_nothing_else(
    render: Render, watched: bool
) -> None:
    extra = ("--set", "operator.watchNamespaces={team-a,team-b}") if watched else ()
    verbs = _network_policy_verbs(render(*ON, *extra))
    where = ["team-a/gh-gatehouse-operator", "team-b/gh-gatehouse-operator"] if watched else ["/gh-gatehouse-operator"]
    assert verbs == {key: {"get", "create", "patch"} for key in where}  # never list, watch or delete: the GC deletes


def test_on_with_slack_the_bridge_admits_only_the_ingress_controller(render: Render) -> None:
    docs = render(*ON, *SLACK)
    (policy,) = [p for p in of_kind(docs, "NetworkPolicy") if p["metadata"]["name"].endswith("-slack")]
    (bridge,) = [d for d in of_kind(docs, "Deployment") if d["metadata"]["name"].endswith("-slack")]
    assert policy["spec"]["podSelector"] == {"matchLabels": bridge["spec"]["selector"]["matchLabels"]}
    (port,) = bridge["spec"]["template"]["spec"]["containers"][0]["ports"]
    assert policy["spec"]["ingress"] == [{"from": [INGRESS], "ports": [{"protocol": "TCP", "port": port["containerPort"]}]}]


def test_on_with_slack_but_no_ingress_peer_is_refused(helm: Path) -> None:
    proc = subprocess.run([str(helm), "template", RELEASE, str(CHART), *ON, "--set", "slack.enabled=true",
                           "--set", "slack.namespaces={team-a}"], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "needs networkPolicy.slackFrom" in proc.stderr


@pytest.mark.parametrize("k8s_version", ["1.30.0", "1.35.0"])
def test_the_rendered_policies_are_valid_kubernetes(render: Render, k8s_version: str) -> None:
    docs = render(*ON, *PEERS, *SLACK)
    assert len(of_kind(docs, "NetworkPolicy")) == 2
    for doc in docs:
        if doc["kind"] in ("NetworkPolicy", "Deployment", "ClusterRole"):
            kubernetes_validate.validate(doc, k8s_version, strict=True)


def test_helm_lint_with_everything_on(helm: Path) -> None:
    proc = subprocess.run([str(helm), "lint", "--strict", str(CHART), *ON, *PEERS, *SLACK], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0 and "0 chart(s) failed" in proc.stdout, proc.stdout + proc.stderr
