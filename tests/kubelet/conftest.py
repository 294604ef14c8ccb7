"""Fixtures for the kubelet stand-in's tests: the emulated API (``kube_api``, ``kube``, ``kubectl``), the stand-in
(``kubelet``, :mod:`tests.support.kubelet`) and the real operator (``operator``, from tests/operator_tests)."""

from __future__ import annotations

from tests.gatehouse_operator.conftest import OperatorProcess, operator
from tests.support.kube_fixtures import Kubectl, kube, kube_api, kubectl, wait_for
from tests.support.kubelet import kubelet

__all__ = ["Kubectl", "OperatorProcess", "kube", "kube_api", "kubectl", "kubelet", "operator", "wait_for"]
