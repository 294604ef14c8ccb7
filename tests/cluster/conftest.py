"""Fixtures for the tests on a real control plane: ``cluster`` (one per session, started from the binaries
``make cluster-bin`` built) and ``chart`` (charts/gatehouse installed on it by the real helm).

Where there is no Go, or the binaries are not built, the tests skip and say why; with ``CI`` set they fail.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

from tests.support.cluster import Cluster, ClusterUnavailable, binaries, launcher
from tests.support.cluster.chart import Release, install

pytestmark = pytest.mark.e2e


def require_binaries() -> None:
    """Skip (fail under CI) with the reason when there is no Go or the binaries are not built."""
    try:
        binaries.built()
    except ClusterUnavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the real control plane: {exc}")
        pytest.skip(f"no real control plane: {exc}")


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    require_binaries()
    started = time.monotonic()
    running = launcher.start()
    print(f"\ncontrol plane {binaries.KUBERNETES_VERSION} ready in {time.monotonic() - started:.1f} s at {running.server}")
    yield running
    launcher.stop(running.layout.root)


@pytest.fixture(scope="session")
def chart(cluster: Cluster) -> Release:
    return install(cluster)
