"""charts/gatehouse installed on a real control plane by the real helm, as a platform team installs it."""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass

from tests.support.cluster.binaries import REPO
from tests.support.cluster.launcher import Cluster, ClusterFailed

__all__ = ["CHART", "Release", "install"]

CHART = REPO / "charts" / "gatehouse"


@dataclass(frozen=True)
class Release:
    name: str
    namespace: str

    @property
    def fullname(self) -> str:
        return f"{self.name}-gatehouse"

    @property
    def policy(self) -> str:
        """The ToolApproval ValidatingAdmissionPolicy's name (and its binding's)."""
        return f"{self.fullname}-toolapproval-decision"


def helm(cluster: Cluster, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(cluster.helm_path), f"--kubeconfig={cluster.kubeconfig()}", *args],
                          capture_output=True, text=True, timeout=timeout)


def install(cluster: Cluster, name: str = "gh", namespace: str = "gatehouse-system", *values: str) -> Release:
    """``helm install`` (CRDs from crds/ first, as helm does), ``values`` its ``--set`` arguments; waits until the CRDs
    are served."""
    proc = helm(cluster, "install", name, str(CHART), "--namespace", namespace, "--create-namespace", *values)
    if proc.returncode != 0:
        raise ClusterFailed(f"helm install failed:\n{proc.stdout}\n{proc.stderr}")
    deadline = time.monotonic() + 60
    while cluster.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=30s").returncode != 0:
        if time.monotonic() > deadline:
            raise ClusterFailed("the chart's CRDs were not Established in time")
        time.sleep(0.5)
    return Release(name, namespace)
