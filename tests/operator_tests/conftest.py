"""Fixtures for the operator's end-to-end tests: an emulated API server, kubectl, and the real operator.

``kube_api`` serves a fresh :class:`tests.support.kube_emulator.KubeEmulator` (our CRDs loaded) on
127.0.0.1 and points ``$KUBECONFIG`` -- and the ``kubernetes`` client's default location, which it reads at
import time -- at it. ``operator`` runs ``kopf run -m gatehouse_operator`` with ``kopf.testing.KopfRunner`` in
its own thread (never in the emulator's loop). Tests talk to the API only over HTTP: with the
``kubernetes`` client (``kube``) and with ``/usr/bin/kubectl`` (``kubectl``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from kopf.testing import KopfRunner

from tests.support.kube_emulator import RunningEmulator, serve, write_kubeconfig

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "file-manager"


def wait_for(check: Callable[[], Any], timeout: float = 15.0, what: str = "condition") -> Any:
    """Poll ``check`` until it returns something truthy; fail with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except (AssertionError, KeyError, TypeError, IndexError) as exc:
            last = exc
        else:
            if last:
                return last
        time.sleep(0.1)
    pytest.fail(f"timed out after {timeout}s waiting for {what}; last: {last!r}")


@pytest.fixture
def kube_api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RunningEmulator]:
    with serve() as api:
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", api.url)
        monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
        monkeypatch.setattr(kubernetes.config.kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(kubeconfig))
        yield api


@pytest.fixture
def kube(kube_api: RunningEmulator) -> Iterator[kubernetes.client.ApiClient]:
    configuration = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(config_file=os.environ["KUBECONFIG"], client_configuration=configuration)
    with kubernetes.client.ApiClient(configuration) as client:
        yield client


class Kubectl:
    """``/usr/bin/kubectl`` against the emulated API server."""

    def __init__(self, binary: str) -> None:
        self.binary = binary

    def run(self, *args: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [self.binary, *args], capture_output=True, text=True, timeout=timeout, env=dict(os.environ), check=False
        )
        if check and result.returncode != 0:
            pytest.fail(f"kubectl {' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
        return result

    def __call__(self, *args: str, check: bool = True) -> str:
        return self.run(*args, check=check).stdout


@pytest.fixture
def kubectl(kube_api: RunningEmulator) -> Kubectl:
    binary = shutil.which("kubectl") or "/usr/bin/kubectl"
    if not Path(binary).exists():
        pytest.skip("kubectl is not installed")
    return Kubectl(binary)


class OperatorProcess:
    """Start/stop the real operator (kopf run -m gatehouse_operator) in a thread; restartable."""

    def __init__(self) -> None:
        self._runner: KopfRunner | None = None
        self.outputs: list[str] = []

    def start(self) -> None:
        assert self._runner is None, "already running"
        args = ["run", "-m", "gatehouse_operator", "--all-namespaces", "--standalone"]
        self._runner = KopfRunner(args, timeout=30)
        self._runner.__enter__()

    def stop(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            runner.__exit__(None, None, None)
            self.outputs.append(runner.output)


@pytest.fixture
def operator(
    kube_api: RunningEmulator, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Iterator[OperatorProcess]:
    monkeypatch.setenv("GATEHOUSE_RESYNC_SECONDS", os.environ.get("GATEHOUSE_TEST_RESYNC_SECONDS", "3600"))
    monkeypatch.setenv("GATEHOUSE_RUNTIME_IMAGE", "ghcr.io/gatehouse/gatehouse:test")
    process = OperatorProcess()
    process.start()
    try:
        yield process
    finally:
        process.stop()
        report = getattr(request.node, "rep_call", None)
        if report is not None and report.failed:  # the operator's log, shown with the failure
            print("\n".join(process.outputs)[-30000:])


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[pytest.TestReport]:
    report: pytest.TestReport = yield
    setattr(item, f"rep_{report.when}", report)
    return report
