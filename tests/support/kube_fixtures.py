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

import asyncio
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from tests.support.kube_server import RunningEmulator, serve, write_kubeconfig

__all__ = ["Kubectl", "kube", "kube_api", "kubectl", "kubectl_and_plugin", "table", "until", "wait_for"]


def table(text: str) -> list[dict[str, str]]:
    """kubectl's table output as one dict per row, read by the header's column positions (a cell may be empty, and a
    header may have a space in it: ``REQUESTED BY``)."""
    header, *rows = text.splitlines()
    starts = [m.start() for m in re.finditer(r"(?<!\S)\S+(?: \S+)*", header)]
    names = [header[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]
    return [{n: row[a:b].strip() for n, a, b in zip(names, starts, [*starts[1:], None], strict=True)} for row in rows]


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


async def until(check: Callable[[], Any], timeout: float = 20.0, what: str = "condition") -> Any:
    """:func:`wait_for` inside an event loop: ``check`` may be a coroutine function; polled without blocking the loop."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}; last: {value!r}")
        await asyncio.sleep(0.1)


def kubectl_and_plugin() -> tuple[str, Path]:
    """``kubectl`` and the ``kubectl-gatehouse`` plugin beside this interpreter; the test is skipped without either."""
    kubectl_bin = shutil.which("kubectl") or "/usr/bin/kubectl"
    plugin = Path(sys.executable).parent / "kubectl-gatehouse"
    if not Path(kubectl_bin).exists() or not plugin.exists():
        pytest.skip("kubectl or the kubectl-gatehouse plugin is not installed")
    return kubectl_bin, plugin


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
