"""A real Kubernetes control plane for tests and for a person: etcd, kube-apiserver, kube-controller-manager and
kube-scheduler built from their Go modules (``hack/cluster/``) and run as local processes.

``python -m tests.support.cluster build|up|down`` (``make cluster-bin``, ``make cluster-up``, ``make cluster-down``);
tests under ``tests/cluster/`` get a session-wide cluster from the ``cluster`` fixture (``tests/cluster/conftest.py``).
"""

from tests.support.cluster.binaries import ClusterUnavailable
from tests.support.cluster.launcher import Cluster, ClusterFailed, start, stop

__all__ = ["Cluster", "ClusterFailed", "ClusterUnavailable", "start", "stop"]
