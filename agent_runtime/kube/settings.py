"""When and how the runtime talks to Kubernetes, decided once at start-up.

On: in a pod (in-cluster service account), or outside one with an explicit kubeconfig: ``--kubeconfig
PATH``, or ``$KUBECONFIG`` together with ``--kube-namespace`` (so a developer's ambient kubeconfig alone
never makes a local runtime write to a cluster). Off otherwise.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")


@dataclass(frozen=True)
class KubeSettings:
    namespace: str
    kubeconfig: Path | None = None  # None with in_cluster: the pod's service account
    in_cluster: bool = False
    retention_seconds: float = 3600.0  # finished ToolApprovals are deleted this long after the decision
    watch_seconds: float = 300.0  # one watch request's length before it is renewed
    # How often the runtime looks for orphaned ToolApprovals, recounts the Agent's pendingApprovals and checks its
    # RuntimeReady condition is still there (besides at start-up and on change); 0: at start-up only.
    check_seconds: float = 60.0
    # Count kubectl votes even when the operator does not report the admission policy as enforcing (the policy is
    # what makes a vote's "by" the real user): for clusters that check it another way, and for local tests.
    trust_kubectl: bool = False


def detect(
    kubeconfig: Path | None,
    namespace: str | None,
    retention_seconds: float = 3600.0,
    default_namespace: str = "default",
    environ: Mapping[str, str] | None = None,
    service_account: Path = SERVICE_ACCOUNT,
    trust_kubectl: bool = False,
    check_seconds: float = 60.0,
) -> KubeSettings | None:
    """The Kubernetes settings for this process, or None when it should not touch a cluster."""
    env = os.environ if environ is None else environ
    if kubeconfig is None and namespace and env.get("KUBECONFIG"):
        kubeconfig = Path(env["KUBECONFIG"].split(os.pathsep)[0])
    if kubeconfig is not None:
        return KubeSettings(namespace or default_namespace, kubeconfig, False, retention_seconds,
                            trust_kubectl=trust_kubectl, check_seconds=check_seconds)
    if env.get("KUBERNETES_SERVICE_HOST") and (service_account / "token").exists():
        ns_file = service_account / "namespace"
        ns = namespace or (ns_file.read_text().strip() if ns_file.exists() else "") or default_namespace
        return KubeSettings(ns, None, True, retention_seconds, trust_kubectl=trust_kubectl, check_seconds=check_seconds)
    return None


__all__ = ["KubeSettings", "detect"]
