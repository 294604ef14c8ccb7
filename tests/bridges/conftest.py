"""The emulated Kubernetes API server (``kube_api``) and ``kubectl`` for the bridge's tests."""

from __future__ import annotations

from tests.support.kube_fixtures import Kubectl, kube_api, kubectl

__all__ = ["Kubectl", "kube_api", "kubectl"]
