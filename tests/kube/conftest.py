"""Fixtures for the runtime's Kubernetes side: the emulated API server (``kube_api``, ``kube``) and ``kubectl``."""

from __future__ import annotations

from tests.support.kube_fixtures import Kubectl, kube, kube_api, kubectl, wait_for

__all__ = ["Kubectl", "kube", "kube_api", "kubectl", "wait_for"]
