"""Fixtures for the tests on a real node (``make e2e-node``): the real control plane (one per session) and, per
container runtime, containerd with the real kubelet registered to it (``tests/support/cluster/realnode.py``).

They need root, the Debian packages ``make e2e-node`` installs and the kubelet ``make cluster-bin`` builds; without
them they skip and say why, under ``GATEHOUSE_E2E_NODE`` (set by ``make e2e-node``) they fail instead.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

from tests.support.cluster import Cluster, ClusterUnavailable, binaries, launcher, realnode

pytestmark = pytest.mark.e2e_node


def _unavailable(why: str) -> None:
    if os.environ.get("GATEHOUSE_E2E_NODE"):
        pytest.fail(f"`make e2e-node` must run the real node: {why}")
    pytest.skip(f"no real node: {why}")


@pytest.fixture(scope="session")
def node_cluster() -> Iterator[Cluster]:
    try:
        binaries.built()
        realnode.prepare()
    except ClusterUnavailable as exc:
        _unavailable(str(exc))
    running = launcher.start()
    yield running
    launcher.stop(running.layout.root)


@pytest.fixture(scope="module", params=["runc", "crun"])
def node(request: pytest.FixtureRequest, node_cluster: Cluster) -> Iterator[realnode.RealNode]:
    """A node per OCI runtime, one after the other (two kubelets on one machine would share its cgroups)."""
    running = realnode.RealNode(node_cluster, name=f"node-{request.param}", runtime=request.param)
    started = time.monotonic()
    running.start()
    print(f"\nnode {running.name} ({request.param}) Ready in {time.monotonic() - started:.1f} s {running.times}")
    yield running
    running.stop()
