"""The node with containerd v2 (2.4, the line Kubernetes 1.36 supports) and the CNI plugins v1.10, both built from
their Go modules in ``hack/node/``, instead of Debian's containerd 1.6.20 (past its end of life): the same restricted
pod, held to its security context by the kernel, seccomp ``RuntimeDefault`` included."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from tests.node.conftest import _unavailable
from tests.node.test_pod_security_enforced import PROBE, _ensure_namespace, _pod, run_to_completion
from tests.support.cluster import Cluster, ClusterUnavailable, realnode

pytestmark = pytest.mark.e2e_node


@pytest.fixture(scope="module")
def node_v2(node_cluster: Cluster) -> Iterator[realnode.RealNode]:
    try:
        binaries, took = realnode.containerd_v2()
    except ClusterUnavailable as exc:
        _unavailable(str(exc))
    print(f"\ncontainerd {realnode.CONTAINERD_V2} and the CNI plugins: " + (f"built in {took:.0f} s" if took else "built"))
    running = realnode.RealNode(node_cluster, name="node-containerd-v2", runtime="runc", containerd=binaries)
    started = time.monotonic()
    running.start()
    print(f"node {running.name} Ready in {time.monotonic() - started:.1f} s {running.times}")
    yield running
    running.stop()


def test_the_node_runs_containerd_v2(node_v2: realnode.RealNode) -> None:
    got = node_v2.cluster.kubectl("get", "node", node_v2.name, "-o", "json")
    info = json.loads(got.stdout)["status"]["nodeInfo"]
    assert info["containerRuntimeVersion"] == f"containerd://{realnode.CONTAINERD_V2.lstrip('v')}", info


def test_a_restricted_pod_under_containerd_v2(node_v2: realnode.RealNode) -> None:
    _ensure_namespace(node_v2.cluster)
    phase, logs, elapsed = run_to_completion(node_v2.cluster, _pod("probe-containerd-v2", node_v2.name, PROBE))
    print(f"\ncontainerd v2: pod created to {phase} in {elapsed:.1f} s\n{logs}")
    assert phase == "Succeeded", logs
    assert logs.startswith("uid=10001 gid=10001 groups=10001"), logs
    lines = logs.splitlines()
    for expected in ("ROOTFS=read-only", "TMP=writable", "DATA=writable 10001", "CHOWN=refused", "Seccomp:\t2",
                     "NoNewPrivs:\t1", "CapEff:\t0000000000000000"):
        assert expected in lines, logs
