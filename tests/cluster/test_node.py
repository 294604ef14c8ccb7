"""A node registered with a kubelet's credential (tests/support/cluster/node.py): the Node authorizer and
NodeRestriction let it write its own Node and Lease and nothing of another node's, the scheduler binds pods to it,
and the node lifecycle controller keeps it Ready while its Lease is renewed."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.support.cluster import Cluster, rest
from tests.support.cluster.node import Node
from tests.support.cluster.steps import wait

pytestmark = pytest.mark.e2e

NS = "on-a-node"


@pytest.fixture(scope="module")
def node(cluster: Cluster) -> Iterator[Node]:
    running = Node(cluster, "stand-in")
    running.start()
    yield running
    running.stop()
    cluster.kubectl("delete", "node", running.name, "--wait=false")


def test_the_node_is_ready_and_keeps_its_lease(cluster: Cluster, node: Node) -> None:
    got = json.loads(cluster.kubectl("get", "node", node.name, "-o", "json").stdout)
    ready = {c["type"]: c["status"] for c in got["status"]["conditions"]}
    assert ready["Ready"] == "True"
    lease = json.loads(cluster.kubectl("get", "lease", node.name, "-n", "kube-node-lease", "-o", "json").stdout)
    assert lease["spec"]["holderIdentity"] == node.name


    def untainted() -> bool:  # the node lifecycle controller lifts the not-ready taint once it sees Ready
        spec = json.loads(cluster.kubectl("get", "node", node.name, "-o", "json").stdout)["spec"]
        return not any(t["key"] == "node.kubernetes.io/not-ready" for t in spec.get("taints", []))

    wait("the not-ready taint lifted", untainted)


def test_a_node_may_not_touch_another_nodes_objects(cluster: Cluster, node: Node) -> None:
    client = rest.client(node.kubeconfig)
    other = client.post("/api/v1/nodes", json={"apiVersion": "v1", "kind": "Node", "metadata": {"name": "other"}})
    assert other.status_code == 403, rest.message(other)
    assert "node \"stand-in\" is not allowed to modify node \"other\"" in rest.message(other)
    secrets = client.get("/api/v1/namespaces/default/secrets")
    assert secrets.status_code == 403, rest.message(secrets)


def test_the_scheduler_binds_a_deployments_pod_to_the_node(cluster: Cluster, node: Node) -> None:
    cluster.kubectl("create", "namespace", NS)
    created = cluster.kubectl("create", "deployment", "web", "-n", NS, "--image=busybox")
    assert created.returncode == 0, created.stderr

    def bound() -> bool:
        pods = json.loads(cluster.kubectl("get", "pods", "-n", NS, "-o", "json").stdout)["items"]
        return any(p["spec"].get("nodeName") == node.name for p in pods)

    wait("a pod bound to the node", bound)
