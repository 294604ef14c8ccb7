"""The emulated Kubernetes API server (``kube_api``) for the replay memory's tests."""

from __future__ import annotations

from tests.support.kube_fixtures import kube_api

__all__ = ["kube_api"]
