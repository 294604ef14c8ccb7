"""Pod Security on the real API server: in a namespace labelled ``pod-security.kubernetes.io/enforce: restricted``
the chart's operator pod and every runtime pod the operator builds are admitted, and each way to break a control
that tests/support/pod_security.py (the pure checker the operator tests use) catches is refused by PodSecurity.

Pods are created with a server-side dry run: admission runs in full, and no node is needed.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.gatehouse_operator import test_pod_security as operator_cases
from tests.support.cluster import Cluster, rest
from tests.support.cluster.chart import Release
from tests.support.pod_security import violations

pytestmark = pytest.mark.e2e

NS = "restricted"
GOLDEN = Path(__file__).parents[1] / "testdata" / "operator"


@pytest.fixture(scope="module")
def admin(cluster: Cluster, chart: Release) -> httpx.Client:
    cluster.kubectl("create", "namespace", NS)
    labelled = cluster.kubectl("label", "namespace", NS, "pod-security.kubernetes.io/enforce=restricted")
    assert labelled.returncode == 0, labelled.stderr
    return rest.client(cluster.kubeconfig())


def _dry_run_pod(cluster: Cluster, admin: httpx.Client, template: dict[str, Any], name: str) -> httpx.Response:
    """Create a Pod of ``template`` in the restricted namespace, dry run; its ServiceAccount is made first (the
    ServiceAccount admission plugin refuses a pod whose account does not exist)."""
    spec = copy.deepcopy(template["spec"])
    account = spec.get("serviceAccountName", "default")
    cluster.kubectl("create", "serviceaccount", account, "-n", NS)
    metadata = {"name": name, "namespace": NS, **{k: v for k, v in template.get("metadata", {}).items()
                                                    if k in ("labels", "annotations")}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
    return admin.post(f"/api/v1/namespaces/{NS}/pods", params={"dryRun": "All"}, json=pod)


def _admitted(reply: httpx.Response) -> None:
    assert reply.status_code == 201, rest.message(reply)
    assert "Warning" not in reply.headers, reply.headers.get("Warning")


def test_the_charts_operator_pod_is_admitted(cluster: Cluster, chart: Release, admin: httpx.Client) -> None:
    deployment = json.loads(cluster.kubectl("get", "deployment", "-n", chart.namespace, f"{chart.fullname}-operator",
                                            "-o", "json").stdout)
    assert violations(deployment) == []
    _admitted(_dry_run_pod(cluster, admin, deployment["spec"]["template"], "operator"))


@pytest.mark.parametrize("case", sorted(p.name for p in GOLDEN.iterdir() if (p / "expected.json").exists()))
def test_every_golden_runtime_pod_is_admitted(cluster: Cluster, admin: httpx.Client, case: str) -> None:
    (deployment,) = [c for c in json.loads((GOLDEN / case / "expected.json").read_text()) if c["kind"] == "Deployment"]
    _admitted(_dry_run_pod(cluster, admin, deployment["spec"]["template"], f"golden-{case}"))


@pytest.mark.parametrize("name", sorted(operator_cases.VARIANTS))
def test_compliant_variants_are_admitted(cluster: Cluster, admin: httpx.Client, name: str) -> None:
    deployment = operator_cases._deployment(**operator_cases.VARIANTS[name])
    assert violations(deployment) == []
    _admitted(_dry_run_pod(cluster, admin, deployment["spec"]["template"], "variant"))


BREAKS = [(control, index) for control, ways in operator_cases.BREAKS.items() for index in range(len(ways))]


@pytest.mark.parametrize(("control", "index"), BREAKS, ids=[f"{c}-{i}" for c, i in BREAKS])
def test_each_break_the_checker_catches_is_refused_by_pod_security(
    cluster: Cluster, admin: httpx.Client, control: str, index: int,
) -> None:
    deployment = copy.deepcopy(operator_cases._deployment())
    operator_cases.BREAKS[control][index](deployment)
    assert violations(deployment), "the checker lets it through"
    reply = _dry_run_pod(cluster, admin, deployment["spec"]["template"], "broken")
    assert reply.status_code == 403, f"{reply.status_code}: {rest.message(reply)}"
    assert 'violates PodSecurity "restricted:latest"' in rest.message(reply)


def test_a_bare_pod_is_refused(cluster: Cluster, admin: httpx.Client) -> None:
    refused = cluster.kubectl("run", "bare", "-n", NS, "--image=busybox", "--dry-run=server", "--", "sleep", "1")
    assert refused.returncode == 1
    assert 'violates PodSecurity "restricted:latest"' in refused.stderr, refused.stderr
