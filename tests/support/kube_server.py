"""Serve a :class:`tests.support.kube_emulator.KubeEmulator` on 127.0.0.1 from a background thread.

:func:`serve` gives the emulator its own thread and event loop -- so kopf (in another thread, via
``KopfRunner``), the ``kubernetes`` client and ``kubectl`` all reach it over real HTTP -- and
:func:`write_kubeconfig` writes a kubeconfig pointing at it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp.test_utils
import aiohttp.web_runner
import kmock
import yaml

from tests.support import crd_validation
from tests.support.kube_emulator import KubeEmulator

__all__ = ["RunningEmulator", "serve", "write_kubeconfig"]


def write_kubeconfig(path: Path, server: str) -> Path:
    """A kubeconfig with one context pointing at ``server`` (plain HTTP, no credentials)."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "emulated", "cluster": {"server": server}}],
        "users": [{"name": "tester", "user": {}}],
        "contexts": [{"name": "emulated", "context": {"cluster": "emulated", "user": "tester", "namespace": "default"}}],
        "current-context": "emulated",
    }
    path.write_text(yaml.safe_dump(config))
    return path


class _QuietServer(aiohttp.test_utils.RawTestServer):
    """kmock's default server without aiohttp's per-request access log line and debug mode (a real API server
    does not log every request either; under load the formatting alone cost the emulator ~10% of its time)."""

    async def _make_runner(self, debug: bool = True, **kwargs: Any) -> aiohttp.web_runner.ServerRunner:
        return await super()._make_runner(debug=False, access_log=None, **kwargs)


@dataclass
class RunningEmulator:
    """A served emulator: its URL, and a way to run coroutines in its event loop."""

    emulator: KubeEmulator
    url: str
    loop: asyncio.AbstractEventLoop

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` in the emulator's loop (for touching ``emulator.objects`` safely)."""
        async def run() -> Any:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout=10)


@contextlib.contextmanager
def serve(crd_dir: Path | None = crd_validation.CRD_DIR, host: str = "127.0.0.1") -> Iterator[RunningEmulator]:
    """Serve a fresh :class:`KubeEmulator` (with the CRDs of ``crd_dir``) on ``host`` from a background thread."""
    emulator = KubeEmulator()
    if crd_dir is not None:
        emulator.add_crds_from(crd_dir)
    started: threading.Event = threading.Event()
    stop: list[asyncio.Event] = []
    box: dict[str, Any] = {}

    async def main() -> None:
        try:
            async with emulator, kmock.Server(emulator, host=host, server_cls=_QuietServer) as server:
                box["url"] = f"http://{host}:{server.port}"
                box["loop"] = asyncio.get_running_loop()
                stop.append(asyncio.Event())
                started.set()
                await stop[0].wait()
                emulator.stop_watches()
                for _ in range(10):  # let open watch streams notice and end
                    if not emulator.open_watches:
                        break
                    await asyncio.sleep(0.1)
        except BaseException as exc:
            box["error"] = exc
            started.set()
            raise

    thread = threading.Thread(target=asyncio.run, args=(main(),), name="kube-emulator", daemon=True)
    thread.start()
    started.wait(timeout=30)
    if "error" in box or "url" not in box:
        raise RuntimeError(f"the emulated API server did not start: {box.get('error')!r}")
    try:
        yield RunningEmulator(emulator, box["url"], box["loop"])
    finally:
        box["loop"].call_soon_threadsafe(stop[0].set)
        thread.join(timeout=30)
