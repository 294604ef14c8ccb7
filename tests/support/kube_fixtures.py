"""Reusable pytest fixtures over the emulated Kubernetes API (:mod:`tests.support.kube_emulator`).

Import them into a ``conftest.py`` (``from tests.support.kube_fixtures import kube, kube_api, kubectl``):

``kube_api``  a fresh emulator with our CRDs on 127.0.0.1, with ``$KUBECONFIG`` -- and the ``kubernetes``
              client's default location, which that library reads at import time -- pointing at it;
``kube``      a ``kubernetes.client.ApiClient`` for it;
``kubectl``   ``/usr/bin/kubectl`` against it (``kubectl("get", "agents")`` returns stdout); as another user:
              ``kubectl.as_user(kube_api.user_kubeconfig(tmp_path, "alice"))``.

:func:`wait_for` polls a condition. Anything that talks to the API from another thread or process (kopf
via ``KopfRunner``, the runtime, kubectl) finds it through ``$KUBECONFIG``.
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

from tests.support.kube_server import RunningEmulator, serve, write_kubeconfig

__all__ = ["Kubectl", "kube", "kube_api", "kubectl", "wait_for"]


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

    def __init__(self, binary: str, kubeconfig: Path | None = None) -> None:
        self.binary = binary
        self.kubeconfig = kubeconfig  # None: $KUBECONFIG (the admin)

    def as_user(self, kubeconfig: Path) -> Kubectl:
        """This kubectl with another kubeconfig, e.g. one from :meth:`RunningEmulator.user_kubeconfig`."""
        return Kubectl(self.binary, kubeconfig)

    def run(self, *args: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ)
        if self.kubeconfig is not None:
            env["KUBECONFIG"] = str(self.kubeconfig)
        result = subprocess.run([self.binary, *args], capture_output=True, text=True, timeout=timeout, env=env, check=False)
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
