"""The operator's own HTTP endpoint: ``/healthz`` (liveness) and ``/metrics`` (Prometheus, :mod:`gatehouse_operator.metrics`).

Served by every replica from its first startup handler on, the standby included: kopf's ``--liveness`` endpoint
starts only once every startup handler has finished, which a standby's never does while another replica leads
(:mod:`gatehouse_operator.leadership`); a liveness probe on it would restart the standby over and over.
``/healthz`` answers 200 while the event loop does, with ``leader`` or ``standby`` as its body.

``GATEHOUSE_OPERATOR_LISTEN`` (``HOST:PORT``, e.g. ``0.0.0.0:8080``; the chart sets it) turns it on; unset, nothing
listens.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import aiohttp.web
import prometheus_client

from gatehouse_operator import metrics

__all__ = ["LISTEN_ENV", "Server", "serve"]

LISTEN_ENV = "GATEHOUSE_OPERATOR_LISTEN"


async def _healthz(_: aiohttp.web.Request) -> aiohttp.web.Response:
    return aiohttp.web.Response(text="leader\n" if metrics.LEADER._value.get() else "standby\n")


async def _metrics(_: aiohttp.web.Request) -> aiohttp.web.Response:
    body = prometheus_client.generate_latest(prometheus_client.REGISTRY)
    return aiohttp.web.Response(body=body, headers={"Content-Type": prometheus_client.CONTENT_TYPE_LATEST})


@dataclass
class Server:
    runner: aiohttp.web.AppRunner | None

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()


def _address(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"{LISTEN_ENV}: {value!r} is not HOST:PORT")
    return host or "0.0.0.0", int(port)


async def serve(environ: Mapping[str, str]) -> Server:
    """Start listening where ``GATEHOUSE_OPERATOR_LISTEN`` says, in the running event loop (kopf's)."""
    listen = environ.get(LISTEN_ENV)
    if not listen:
        return Server(None)
    host, port = _address(listen)
    app = aiohttp.web.Application()
    app.router.add_get("/healthz", _healthz)
    app.router.add_get("/metrics", _metrics)
    runner = aiohttp.web.AppRunner(app, access_log=None)
    await runner.setup()
    await aiohttp.web.TCPSite(runner, host, port).start()
    return Server(runner)
