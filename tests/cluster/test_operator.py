"""The operator on the real control plane, as the chart deploys it: the container's own command, arguments and
environment, as a local process whose only credential is a token of the chart's operator ServiceAccount, so what
it may do is exactly what the chart's RBAC grants.

``kubectl apply -f examples/file-manager/`` in a namespace enforcing the ``restricted`` Pod Security profile: the
operator renders the Agent's children, the real Deployment and ReplicaSet controllers make its pods (admitted by
Pod Security: no node runs them yet, they stay Pending), the Agent reports the operator's conditions, and deleting
it leaves its children to the real garbage collector (the state's claim outlives it, as documented).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_runtime.clients import processes
from tests.support.cluster import Cluster
from tests.support.cluster.chart import Release
from tests.support.cluster.steps import wait
from tests.support.processes import free_port

pytestmark = pytest.mark.e2e

EXAMPLE = Path(__file__).parents[2] / "examples" / "file-manager"
NS = "default"  # the example's own namespace
CHILDREN = ("deployment/file-manager", "service/file-manager", "serviceaccount/file-manager",
            "role/file-manager-runtime", "rolebinding/file-manager-runtime", "secret/file-manager-config")


def _operator_command(cluster: Cluster, chart: Release, port: int) -> tuple[list[str], dict[str, str]]:
    """The chart's operator container as a local command: ``kopf`` from this virtualenv, its HTTP endpoint
    (``GATEHOUSE_OPERATOR_LISTEN``: /healthz) on 127.0.0.1:``port`` (the one change: a pod has its own network, this
    process has the host's)."""
    deployment = json.loads(cluster.kubectl("get", "deployment", "-n", chart.namespace, f"{chart.fullname}-operator",
                                            "-o", "json").stdout)
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    (command,) = container["command"]
    env = {e["name"]: e["value"] for e in container.get("env", [])}
    assert "GATEHOUSE_OPERATOR_LISTEN" in env, env
    env["GATEHOUSE_OPERATOR_LISTEN"] = f"127.0.0.1:{port}"
    return [str(Path(sys.executable).parent / command), *container["args"]], env


@pytest.fixture(scope="module")
def operator(cluster: Cluster, chart: Release, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The operator running with the chart's ServiceAccount; yields its log."""
    account = f"{chart.fullname}-operator"
    port = free_port()
    command, env = _operator_command(cluster, chart, port)
    log = tmp_path_factory.mktemp("operator") / "operator.log"
    kubeconfig = cluster.service_account(chart.namespace, account)
    with log.open("w") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, **env, "KUBECONFIG": str(kubeconfig)})

    def live() -> bool:
        assert proc.poll() is None, log.read_text()
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as reply:
                return bool(reply.status == 200)
        except (urllib.error.URLError, ConnectionError):
            return False

    wait("the operator's liveness endpoint", live)
    yield log
    processes.stop(proc, grace=10)


@pytest.fixture(scope="module")
def applied(cluster: Cluster, operator: Path) -> Path:
    labelled = cluster.kubectl("label", "--overwrite", "namespace", NS, "pod-security.kubernetes.io/enforce=restricted")
    assert labelled.returncode == 0, labelled.stderr
    applied = cluster.kubectl("apply", "-f", str(EXAMPLE))
    assert applied.returncode == 0, applied.stderr
    return operator


def _conditions(cluster: Cluster) -> dict[str, dict[str, Any]]:
    agent = json.loads(cluster.kubectl("get", "agent", "file-manager", "-n", NS, "-o", "json").stdout or "{}")
    return {c["type"]: c for c in agent.get("status", {}).get("conditions", [])}


def test_the_example_agent_is_reconciled_with_the_charts_rbac(cluster: Cluster, applied: Path) -> None:
    wait("the Agent Accepted", lambda: _conditions(cluster).get("Accepted", {}).get("status") == "True")
    conditions = _conditions(cluster)
    assert conditions["AdmissionPolicy"]["status"] == "True", conditions["AdmissionPolicy"]  # the chart's, bound, Deny
    assert conditions["Ready"]["status"] == "False"  # nothing runs the pods yet
    wait("the state's claim bound (the launcher's default StorageClass)",
          lambda: _conditions(cluster).get("StateReady", {}).get("status") == "True")
    for child in CHILDREN:
        got = cluster.kubectl("get", child, "-n", NS)
        assert got.returncode == 0, got.stderr
    log = applied.read_text()
    assert "Forbidden" not in log and " 403" not in log, log  # the chart's RBAC covers all it does


def test_the_real_controllers_make_its_pods_and_pod_security_admits_them(cluster: Cluster, applied: Path) -> None:
    def pod_made() -> bool:
        pods = json.loads(cluster.kubectl("get", "pods", "-n", NS, "-o", "json").stdout)["items"]
        return any(p["metadata"]["name"].startswith("file-manager-") for p in pods)

    wait("a file-manager pod made by its ReplicaSet", pod_made)
    refused = cluster.kubectl("get", "events", "-n", NS, "--field-selector=reason=FailedCreate", "-o", "name")
    assert refused.stdout == "", refused.stdout


def test_deleting_the_agent_leaves_its_children_to_the_garbage_collector(cluster: Cluster, applied: Path) -> None:
    wait("the Agent Accepted", lambda: _conditions(cluster).get("Accepted", {}).get("status") == "True")
    deleted = cluster.kubectl("delete", "agent", "file-manager", "-n", NS, "--wait=true")
    assert deleted.returncode == 0, deleted.stderr
    wait("the children collected",
          lambda: all(cluster.kubectl("get", child, "-n", NS).returncode == 1 for child in CHILDREN))
    kept = cluster.kubectl("get", "persistentvolumeclaim", "file-manager-state", "-n", NS)
    assert kept.returncode == 0, "the state's claim outlives the Agent (deleteClaimWithAgent is false by default)"
