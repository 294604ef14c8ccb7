"""The operator killed (``kill -9``) mid-reconcile converges on restart.

``tests/gatehouse_operator/test_e2e.py`` restarts a gracefully stopped operator between reconciles; here the
operator runs as a real process (``kopf run -m gatehouse_operator``) and is killed while one reconcile is half
done: the Secret, ServiceAccount and RBAC are created, the Deployment's create request is held by the
emulated API server and never lands. The restarted operator must finish the job: every child exactly once,
owned by the Agent, and the Agent Accepted. (A request that lands after its client died cannot be staged
here: aiohttp cancels the handler when the connection drops.)
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kmock
import pytest

from agent_runtime.clients import processes
from tests.support.kube_emulator import KubeEmulator
from tests.support.kube_fixtures import Kubectl, kube_api, kubectl
from tests.support.kube_server import RunningEmulator

__all__ = ["kube_api", "kubectl"]

pytestmark = pytest.mark.e2e

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "file-manager"
# The generated token Secret (<agent>-access) is a child too: exactly one of each after the restart.
KINDS = {"secrets": ["file-manager-access", "file-manager-config"], "serviceaccounts": ["file-manager"],
         "roles": ["file-manager-runtime"], "rolebindings": ["file-manager-runtime"], "deployments": ["file-manager"],
         "services": ["file-manager"]}


class OperatorProcess:
    def __init__(self, log: Path) -> None:
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None
        kopf = shutil.which("kopf", path=str(Path(sys.executable).parent)) or "kopf"
        self.args = [kopf, "run", "-m", "gatehouse_operator", "--all-namespaces", "--standalone"]

    def start(self) -> None:
        env = {
            **os.environ, "GATEHOUSE_RESYNC_SECONDS": "3600", "GATEHOUSE_RUNTIME_IMAGE": "ghcr.io/gatehouse-dev/gatehouse:test"
        }
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(self.args, stdout=out, stderr=subprocess.STDOUT, env=env)

    def kill9(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None:
            processes.stop(self.proc, grace=15)


class DeploymentGate:
    """Holds the first POST of a Deployment in the emulator until released, then fails it; later ones pass."""

    def __init__(self) -> None:
        self.held = threading.Event()
        self.released = threading.Event()
        self.active = True

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        original = KubeEmulator._handle
        gate = self

        async def handle(self: KubeEmulator, request: Any) -> Any:
            res = request.resource
            method = str(request.method.value).upper()
            if gate.active and method == "POST" and res is not None and res.plural == "deployments":
                gate.held.set()
                while not gate.released.is_set():
                    await _sleep()
                gate.active = False
                raise kmock.KubernetesError(status=503, reason="ServiceUnavailable", message="held by the test")
            return await original(self, request)

        monkeypatch.setattr(KubeEmulator, "_handle", handle)


async def _sleep() -> None:
    import asyncio

    await asyncio.sleep(0.05)


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> DeploymentGate:
    g = DeploymentGate()
    g.install(monkeypatch)
    return g


@pytest.fixture
def operator_process(kube_api: RunningEmulator, tmp_path: Path) -> Iterator[OperatorProcess]:
    process = OperatorProcess(tmp_path / "operator.log")
    try:
        yield process
    finally:
        process.stop()


def _children(api: RunningEmulator) -> dict[str, list[dict[str, Any]]]:
    def collect() -> dict[str, list[dict[str, Any]]]:
        found: dict[str, list[dict[str, Any]]] = {}
        for (res, ns, _name), obj in list(api.emulator._objects.items()):
            if ns == "default" and res.plural in KINDS and not obj.deleted:
                found.setdefault(res.plural, []).append(dict(obj.raw))
        return found

    return api.call(collect)


def test_operator_killed_mid_reconcile_converges_on_restart(
    kube_api: RunningEmulator, kubectl: Kubectl, gate: DeploymentGate, operator_process: OperatorProcess
) -> None:
    for name in ("modelconfig", "mcp-server", "agent"):
        kubectl("apply", "--validate=false", "-f", str(EXAMPLE / f"{name}.yaml"))
    operator_process.start()
    assert gate.held.wait(90), operator_process.log.read_text()[-3000:]
    half = _children(kube_api)
    assert "secrets" in half and "deployments" not in half, sorted(half)
    operator_process.kill9()
    gate.released.set()
    time.sleep(0.3)
    assert "deployments" not in _children(kube_api)

    operator_process.start()
    kubectl.run("wait", "--for=condition=Accepted", "agent/file-manager", "--timeout=90s", timeout=100)
    agent_uid = json.loads(kubectl("get", "agent", "file-manager", "-o", "json"))["metadata"]["uid"]
    children = _children(kube_api)
    for plural, names in KINDS.items():
        objs = children.get(plural, [])
        assert sorted(o["metadata"]["name"] for o in objs) == names, (plural, objs)
        for obj in objs:
            (owner,) = obj["metadata"]["ownerReferences"]
            assert owner["kind"] == "Agent" and owner["name"] == "file-manager"
            assert owner["uid"] == agent_uid
