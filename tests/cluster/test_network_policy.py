"""``networkPolicy.enabled`` on the real control plane: the chart's NetworkPolicies (the operator's, the Slack
bridge's) are accepted as rendered, and the operator, run as the chart runs it with only its ServiceAccount's rights,
gives the example Agent and MCPGateway each theirs -- the API server accepts what the builder renders, the chart's
RBAC lets the operator write it, and it goes with its owner.

The control plane has no network plugin, so nothing here enforces them; tests/node/test_network_policy.py does, on
the real node.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent_runtime.clients import processes
from tests.cluster.test_operator import _operator_command
from tests.support.cluster import Cluster
from tests.support.cluster.chart import Release, helm, install
from tests.support.cluster.steps import wait
from tests.support.processes import free_port

pytestmark = pytest.mark.e2e

EXAMPLES = Path(__file__).parents[2] / "examples"
NS = "netpol-agents"  # the only namespace this release's operator serves, so it shares no Agent with another
INGRESS = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress-nginx"}}}
PROMETHEUS = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
              "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}}
# rbac.userRoles=false: the user ClusterRoles (gatehouse-approver, -viewer) are the session release's, named without it.
VALUES = ("--set", "networkPolicy.enabled=true", "--set", f"operator.watchNamespaces={{{NS}}}", "--set", "rbac.userRoles=false",
          "--set-json", f"networkPolicy.runtimeFrom={json.dumps([INGRESS])}",
          "--set-json", f"networkPolicy.operatorFrom={json.dumps([PROMETHEUS])}",
          "--set", "slack.enabled=true", "--set", f"slack.namespaces={{{NS}}}",
          "--set-json", f"networkPolicy.slackFrom={json.dumps([INGRESS])}")


def _get(cluster: Cluster, *what: str) -> dict[str, Any] | None:
    got = cluster.kubectl("get", *what, "-o", "json")
    return json.loads(got.stdout) if got.returncode == 0 else None


@pytest.fixture(scope="module")
def release(cluster: Cluster) -> Iterator[Release]:
    created = cluster.kubectl("create", "namespace", NS)
    assert created.returncode == 0, created.stderr
    release = install(cluster, "np", "netpol-system", *VALUES)
    yield release
    # Nothing of it for the next module's operator (the session's release serves every namespace).
    helm(cluster, "uninstall", release.name, "--namespace", release.namespace, "--wait", "--timeout=60s", timeout=90)
    cluster.kubectl("delete", "namespace", NS, release.namespace, "--timeout=120s", timeout=150)


@pytest.fixture(scope="module")
def operator(cluster: Cluster, release: Release, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The release's operator with its ServiceAccount's token only; yields its log."""
    command, env = _operator_command(cluster, release, free_port())
    log = tmp_path_factory.mktemp("operator") / "operator.log"
    kubeconfig = cluster.service_account(release.namespace, f"{release.fullname}-operator")
    with log.open("w") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, **env, "KUBECONFIG": str(kubeconfig)})
    yield log
    processes.stop(proc, grace=10)


def _in_namespace(*paths: Path) -> str:
    docs = [d for path in paths for d in yaml.safe_load_all(path.read_text()) if d]
    for doc in docs:
        doc["metadata"]["namespace"] = NS
    return "\n---\n".join(json.dumps(d) for d in docs)


def test_the_api_server_accepts_the_charts_network_policies(cluster: Cluster, release: Release) -> None:
    operator = _get(cluster, "networkpolicy", "-n", release.namespace, f"{release.fullname}-operator")
    assert operator is not None
    assert operator["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "operator"
    assert operator["spec"]["ingress"] == [{"from": [PROMETHEUS], "ports": [{"protocol": "TCP", "port": 8080}]}]
    slack = _get(cluster, "networkpolicy", "-n", release.namespace, f"{release.fullname}-slack")
    assert slack is not None
    assert slack["spec"]["ingress"] == [{"from": [INGRESS], "ports": [{"protocol": "TCP", "port": 3000}]}]


def test_the_operator_gives_each_runtime_its_network_policy_with_the_charts_rbac(
    cluster: Cluster, operator: Path
) -> None:
    applied = cluster.kubectl("apply", "-f", "-", stdin=_in_namespace(
        *sorted((EXAMPLES / "file-manager").glob("*.yaml")), EXAMPLES / "gateway" / "gateway.yaml"))
    assert applied.returncode == 0, applied.stderr
    for name, kind, app in (("file-manager", "Agent", "gatehouse-agent"), ("files-gate", "MCPGateway", "gatehouse-gateway")):
        policy = wait(f"NetworkPolicy {name}", lambda name=name: _get(cluster, "networkpolicy", "-n", NS, name), 90)
        deployment = _get(cluster, "deployment", "-n", NS, name)
        assert deployment is not None
        assert policy["spec"]["podSelector"] == {"matchLabels": deployment["spec"]["selector"]["matchLabels"]}
        assert policy["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/name"] == app
        assert policy["spec"]["ingress"] == [{
            "from": [{"podSelector": {"matchLabels": {"app.kubernetes.io/managed-by": "gatehouse-operator",
                                                      "app.kubernetes.io/name": "gatehouse-agent"}}}, INGRESS],
            "ports": [{"protocol": "TCP", "port": 8080}]}]
        (owner,) = policy["metadata"]["ownerReferences"]
        assert owner["kind"] == kind and owner["name"] == name
    log = operator.read_text()
    assert "Forbidden" not in log and " 403" not in log, log

    deleted = cluster.kubectl("delete", "agent", "file-manager", "-n", NS, "--wait=true")
    assert deleted.returncode == 0, deleted.stderr
    wait("the Agent's NetworkPolicy collected with it",
          lambda: cluster.kubectl("get", "networkpolicy", "-n", NS, "file-manager").returncode == 1)
    assert _get(cluster, "networkpolicy", "-n", NS, "files-gate") is not None
