"""An MCPGateway on the real control plane, reconciled by the operator as the chart deploys it (the local process of
tests/cluster/test_operator.py, with only the chart operator ServiceAccount's token).

``kubectl apply -f examples/gateway/`` (with the demo tools' RemoteMCPServer): the operator renders the gateway's
children with the chart's RBAC (mcpgateways and their status included), the real Deployment and ReplicaSet controllers
make its pod, the gateway's runtime gets its TokenReview right, and the gateway reports the operator's conditions.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.test_operator import operator  # noqa: F401  # the module-scoped operator process
from tests.support.cluster import Cluster
from tests.support.cluster.chart import Release
from tests.support.cluster.steps import wait

pytestmark = pytest.mark.e2e

EXAMPLES = Path(__file__).parents[2] / "examples"
NS = "default"  # the example's own namespace
NAME = "files-gate"
CHILDREN = (f"deployment/{NAME}", f"service/{NAME}", f"serviceaccount/{NAME}", f"role/{NAME}-runtime",
            f"rolebinding/{NAME}-runtime", f"secret/{NAME}-config", f"secret/{NAME}-access")


def _conditions(cluster: Cluster) -> dict[str, dict[str, Any]]:
    gateway = json.loads(cluster.kubectl("get", "mcpgateway", NAME, "-n", NS, "-o", "json").stdout or "{}")
    return {c["type"]: c for c in gateway.get("status", {}).get("conditions", [])}


def test_the_example_gateway_is_reconciled_and_its_pod_made(
    cluster: Cluster, chart: Release, operator: Path,  # noqa: F811
) -> None:
    for manifest in (EXAMPLES / "file-manager" / "mcp-server.yaml", EXAMPLES / "gateway" / "gateway.yaml"):
        applied = cluster.kubectl("apply", "-f", str(manifest))
        assert applied.returncode == 0, applied.stderr
    wait("the MCPGateway Accepted", lambda: _conditions(cluster).get("Accepted", {}).get("status") == "True")
    conditions = _conditions(cluster)
    assert conditions["Ready"]["status"] == "False"  # nothing runs the pod yet
    assert conditions["Durable"]["reason"] == "Sqlite" and conditions["AdmissionPolicy"]["status"] == "True"
    for child in CHILDREN:
        got = cluster.kubectl("get", child, "-n", NS)
        assert got.returncode == 0, got.stderr

    def pod_made() -> bool:
        pods = json.loads(cluster.kubectl("get", "pods", "-n", NS, "-l", f"gatehouse.dev/gateway={NAME}",
                                          "-o", "json").stdout)["items"]
        return any(p["spec"]["serviceAccountName"] == NAME for p in pods)

    wait("the gateway's pod made by its ReplicaSet", pod_made)
    # Its runtime may check Kubernetes tokens (spec.access.kubernetesTokens, the default): a subject of the shared binding.
    binding = json.loads(cluster.kubectl("get", "clusterrolebinding", f"{chart.fullname}-tokenreview", "-o", "json").stdout)
    assert {"kind": "ServiceAccount", "name": NAME, "namespace": NS} in binding["subjects"], binding["subjects"]
    log = operator.read_text()
    assert "Forbidden" not in log and " 403" not in log, log  # the chart's RBAC covers all it does for a gateway
