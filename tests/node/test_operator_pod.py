"""The chart's operator from the project's image, run by the real kubelet: `helm install` with the image imported
into the node, the operator's Deployment available (its probes answered through the pod network), and the operator
reaching the API server through the ``kubernetes`` Service (the node's DNAT: there is no kube-proxy)."""

from __future__ import annotations

import json
import time

import pytest

from tests.support.cluster import realnode
from tests.support.cluster.chart import CHART, helm

pytestmark = pytest.mark.e2e_node


def test_the_chart_s_operator_runs_under_the_real_kubelet(node: realnode.RealNode) -> None:
    if node.runtime != "runc":
        pytest.skip("under runc (crun: see test_crun_refuses_this_machines_cgroups)")
    archive, _ = realnode.gatehouse_image()
    node.load(archive)
    cluster = node.cluster
    repository, tag = realnode.GATEHOUSE_IMAGE.rsplit(":", 1)
    started = time.monotonic()
    proc = helm(cluster, "install", "gh", str(CHART), "--namespace", "gatehouse-system", "--create-namespace",
                "--set", f"image.repository={repository}", "--set", f"image.tag={tag}",
                "--set", "image.pullPolicy=Never")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rollout = cluster.kubectl("rollout", "status", "deployment", "-n", "gatehouse-system", "--timeout=150s",
                              timeout=170)
    pods = cluster.kubectl("get", "pods", "-n", "gatehouse-system", "-o", "json")
    items = json.loads(pods.stdout)["items"]
    logs = cluster.kubectl("logs", "-n", "gatehouse-system", "deployment/gh-gatehouse-operator", "--tail=40")
    described = cluster.kubectl("describe", "pods", "-n", "gatehouse-system").stdout[-3000:]
    print(f"\nhelm install to operator available: {time.monotonic() - started:.1f} s\n{logs.stdout}{logs.stderr}")
    assert rollout.returncode == 0, f"{rollout.stdout}{rollout.stderr}\n{described}\n{logs.stdout}{logs.stderr}"
    assert items, "no operator pod"
    for pod in items:
        ready = {c["type"]: c["status"] for c in pod["status"].get("conditions", [])}
        statuses = pod["status"].get("containerStatuses", [])
        print(pod["metadata"]["name"], pod["status"]["phase"], ready, [(c["name"], c["ready"], c["restartCount"],
                                                                      list(c["state"])) for c in statuses])
        assert pod["spec"]["nodeName"] == node.name
        assert pod["spec"]["securityContext"]["runAsUser"] == 10001
        assert ready.get("Ready") == "True", described
        assert all(c["restartCount"] == 0 for c in statuses), described
    # The operator reached the API server from its pod (through 10.96.0.1): one of them holds the Lease.
    holder, deadline = "", time.monotonic() + 60
    while time.monotonic() < deadline and not holder:
        holder = cluster.kubectl("get", "lease", "-n", "gatehouse-system", "gh-gatehouse-operator", "-o",
                                 "jsonpath={.spec.holderIdentity}").stdout
        time.sleep(1)
    print(f"lease held by {holder!r} {time.monotonic() - started:.1f} s after helm install")
    assert any(holder.startswith(pod["metadata"]["name"]) for pod in items), holder
    logs = cluster.kubectl("logs", "-n", "gatehouse-system", items[0]["metadata"]["name"], "--tail=60")
    print(logs.stdout[-4000:])
    assert "Forbidden" not in logs.stdout and "Traceback" not in logs.stdout, logs.stdout
