"""The emulated API, also served where pods can reach it: HTTPS on the bridge address, with the stand-in's CA.

The emulator object is one aiohttp handler; :class:`ApiListener` adds one more listener for it, created and
closed inside the emulator's own event loop (the emulator's locks and watch queues belong to that loop), next to
the 127.0.0.1 listeners :mod:`tests.support.kube_server` opened. Port 443 when free (pods see
``KUBERNETES_SERVICE_PORT=443`` as in a cluster), else any free port. Nothing in the emulator changes: requests
are authenticated by their bearer token as on the other listeners (a pod's ServiceAccount token).
"""

from __future__ import annotations

import asyncio
import ssl
from typing import Any

import aiohttp.web
import aiohttp.web_runner

from tests.support.kube_server import RunningEmulator

__all__ = ["ApiListener"]


class ApiListener:
    def __init__(self, running: RunningEmulator, host: str, context: ssl.SSLContext) -> None:
        self.running = running
        self.host = host
        self.context = context
        self.port = 0
        self._runner: aiohttp.web_runner.ServerRunner | None = None

    def _in_loop(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.running.loop).result(timeout=30)

    async def _start(self, port: int) -> int:
        runner = aiohttp.web_runner.ServerRunner(aiohttp.web.Server(self.running.emulator, access_log=None),
                                                 shutdown_timeout=2.0)
        await runner.setup()
        try:
            site = aiohttp.web.TCPSite(runner, self.host, port, ssl_context=self.context)
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        return int(runner.addresses[0][1])

    def start(self, port: int = 443) -> str:
        """Listen on ``host:port`` (``port`` taken: any free one); returns the ``https://`` URL."""
        try:
            self.port = self._in_loop(self._start(port))
        except OSError:
            self.port = self._in_loop(self._start(0))
        return f"https://{self.host}:{self.port}"

    def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None and not self.running.loop.is_closed():
            self._in_loop(runner.cleanup())
