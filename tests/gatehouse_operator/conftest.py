"""Fixtures for the operator's end-to-end tests: the emulated API server, kubectl, and the real operator.

``kube_api``, ``kube`` and ``kubectl`` come from :mod:`tests.support.kube_fixtures` (shared with other
suites). ``operator`` runs ``kopf run -m gatehouse_operator`` with ``kopf.testing.KopfRunner`` in its own
thread (never in the emulator's loop); it finds the emulator through ``$KUBECONFIG``. Tests talk to the API
only over HTTP: with the ``kubernetes`` client (``kube``) and with ``/usr/bin/kubectl`` (``kubectl``).

The operator notices a changed Secret only by its periodic check, which here runs once an hour, so that the tests
that count requests count only what they cause; a test about Secret changes asks for a short interval with
``@pytest.mark.secret_check("1s")``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from kopf.testing import KopfRunner

from tests.support.kube_fixtures import Kubectl, kube, kube_api, kubectl, wait_for
from tests.support.kube_server import RunningEmulator

__all__ = [
    "EXAMPLE", "TOKENREVIEW", "Kubectl", "OperatorProcess", "kube", "kube_api", "kubectl", "operator", "tokenreview_subjects",
    "wait_for",
]

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "file-manager"
TOKENREVIEW = "gatehouse-tokenreview"  # the operator's default name of the TokenReview ClusterRole and its binding
_BINDINGS = "rbac.authorization.k8s.io/v1/clusterrolebindings"


def seed_tokenreview_binding(api: RunningEmulator) -> None:
    """The TokenReview ClusterRoleBinding as the chart installs it: bound to the role, no subjects."""
    api.call(lambda: api.emulator.seed(_BINDINGS, {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": TOKENREVIEW},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": TOKENREVIEW}}))


def tokenreview_subjects(api: RunningEmulator) -> set[tuple[str, str]]:
    """The (namespace, name) of each ServiceAccount the TokenReview binding names: who may create TokenReviews."""
    binding = api.call(lambda: api.emulator.get_object(_BINDINGS, None, TOKENREVIEW)) or {}
    return {(s["namespace"], s["name"]) for s in binding.get("subjects") or [] if s["kind"] == "ServiceAccount"}


class _LogLines(logging.Handler):
    """The operator's log messages, whatever stream its own handler writes to.

    kopf binds its log handler to the ``sys.stderr`` current when it starts; click's runner swaps that for its
    capture, but pytest swaps it too between a test's setup and call, so ``runner.output`` is sometimes empty.
    """

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.name} {record.levelname} {record.getMessage()}")


class OperatorProcess:
    """Start/stop the real operator (kopf run -m gatehouse_operator) in a thread; restartable.

    ``outputs``: the log of each run, one string per start/stop.
    """

    def __init__(self) -> None:
        self._runner: KopfRunner | None = None
        self._log: _LogLines | None = None
        self.outputs: list[str] = []

    def start(self) -> None:
        assert self._runner is None, "already running"
        self._log = _LogLines()
        logging.getLogger().addHandler(self._log)
        args = ["run", "-m", "gatehouse_operator", "--all-namespaces", "--standalone"]
        self._runner = KopfRunner(args, timeout=30)
        self._runner.__enter__()

    def stop(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            log, self._log = self._log, None
            try:
                runner.__exit__(None, None, None)
            finally:
                logging.getLogger().removeHandler(log)
                self.outputs.append("\n".join(log.lines if log else []))


@pytest.fixture
def operator(
    kube_api: RunningEmulator, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Iterator[OperatorProcess]:
    monkeypatch.setenv("GATEHOUSE_RESYNC_SECONDS", os.environ.get("GATEHOUSE_TEST_RESYNC_SECONDS", "3600"))
    monkeypatch.setenv("GATEHOUSE_RUNTIME_IMAGE", "ghcr.io/gatehouse-dev/gatehouse:test")
    marker = request.node.get_closest_marker("secret_check")
    monkeypatch.setenv("GATEHOUSE_SECRET_CHECK_INTERVAL", marker.args[0] if marker else "1h")
    seed_tokenreview_binding(kube_api)
    process = OperatorProcess()
    process.start()
    try:
        yield process
    finally:
        process.stop()
        report = getattr(request.node, "rep_call", None)
        if report is not None and report.failed:  # the operator's log, shown with the failure
            print("\n".join(process.outputs)[-30000:])


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "secret_check(interval): run the operator with GATEHOUSE_SECRET_CHECK_INTERVAL=interval (default 1h)"
    )


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[pytest.TestReport]:
    report: pytest.TestReport = yield
    setattr(item, f"rep_{report.when}", report)
    return report
