"""Starting the stand-in from tests: :func:`run_kubelet`, the ``kubelet`` fixture, and when it cannot run.

It needs Linux, root, ``ip`` (iproute2) and a kernel that lets root create network and mount namespaces.
Without them the fixture skips with the reason -- except under ``CI`` (set, non-empty), where missing test
infrastructure is a failure (the rule :mod:`tests.support.postgres` follows too): a green CI run never hides
skipped end-to-end tests.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from tests.support.kube_server import RunningEmulator
from tests.support.kubelet.images import Image
from tests.support.kubelet.node import Node
from tests.support.kubelet.pods import LAUNCHER, Settings

__all__ = ["kubelet", "run_kubelet", "unavailable_reason"]


@functools.cache
def unavailable_reason() -> str | None:
    """Why the stand-in cannot run on this machine, or ``None`` (checked once per process)."""
    if sys.platform != "linux":
        return f"the kubelet stand-in needs Linux namespaces (this is {sys.platform})"
    if os.geteuid() != 0:
        return "the kubelet stand-in needs root (network and mount namespaces, bind mounts); run the tests as root"
    if shutil.which("ip") is None:
        return "the kubelet stand-in needs `ip` (Debian's iproute2 package)"
    name = f"gkprobe-{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True, check=False)
    subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)
    if made.returncode != 0:
        return f"`ip netns add` failed here: {made.stderr.strip()}"
    with tempfile.TemporaryDirectory() as tmp:
        check = subprocess.run([sys.executable, "-I", "-S", str(LAUNCHER), "check", tmp],
                               capture_output=True, text=True, check=False, timeout=30)
    if check.returncode != 0:
        return f"cannot make a mount namespace with a tmpfs here: {check.stderr.strip()}"
    return None


def require() -> None:
    """Skip (or, under CI, fail) the calling test when the stand-in cannot run."""
    reason = unavailable_reason()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"{reason} (CI must run the kubelet stand-in's end-to-end tests)")
        pytest.skip(reason)


@contextlib.contextmanager
def run_kubelet(api: RunningEmulator, root: Path, *, images: Mapping[str, Image] | None = None,
                settings: Settings | None = None) -> Iterator[Node]:
    """A started :class:`Node` against ``api`` keeping its files under ``root``; stopped (pods, network) on exit.
    In a test, call :func:`require` first (the fixture does)."""
    node = Node(api, root, images=images, settings=settings)
    node.start()
    try:
        yield node
    finally:
        node.stop()


@pytest.fixture
def kubelet(kube_api: RunningEmulator, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    """The stand-in against the test's emulated API (``kube_api``, from :mod:`tests.support.kube_fixtures`)."""
    require()
    with run_kubelet(kube_api, tmp_path_factory.mktemp("kubelet")) as node:
        yield node
