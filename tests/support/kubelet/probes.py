"""Probes as the kubelet runs them: ``httpGet`` (2xx/3xx passes), ``tcpSocket`` (a connection), ``exec`` (exit 0
inside the container's namespaces and root), with ``initialDelaySeconds``, ``periodSeconds``, ``timeoutSeconds``,
``successThreshold`` and ``failureThreshold``. ``grpc`` probes are not emulated (the pod never turns ready).

Timing: readiness and startup probes are polled at most ``period_cap`` apart (0.25 s by default) with the failure
threshold scaled up to keep the same window (``periodSeconds: 5, failureThreshold: 3`` → every 0.25 s, 60 failures),
so a test sees readiness within a fraction of a second rather than after a full period. Liveness probes run exactly
as specified: compressing them would shorten the time a slow start is allowed before a restart.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

__all__ = ["Probe", "attempt", "container_port"]


def container_port(port: int | str, container: Mapping[str, Any]) -> int:
    """A port number, or the number of the container's port of that name."""
    if isinstance(port, int) or str(port).isdigit():
        return int(port)
    for declared in container.get("ports") or []:
        if declared.get("name") == port:
            return int(declared["containerPort"])
    raise LookupError(f'container {container.get("name")} has no port named "{port}"')


@dataclass
class Probe:
    action: Mapping[str, Any]
    initial_delay: float
    period: float
    timeout: float
    success_threshold: int
    failure_threshold: int
    successes: int = 0
    failures: int = 0
    next_at: float = 0.0

    @classmethod
    def parse(cls, spec: Mapping[str, Any], period_cap: float | None = None) -> Probe:
        period = float(spec.get("periodSeconds", 10))
        failures = int(spec.get("failureThreshold", 3))
        if period_cap is not None and period > period_cap:
            failures = math.ceil(failures * period / period_cap)
            period = period_cap
        return cls(
            action=spec, initial_delay=float(spec.get("initialDelaySeconds", 0)), period=period,
            timeout=float(spec.get("timeoutSeconds", 1)), success_threshold=int(spec.get("successThreshold", 1)),
            failure_threshold=failures,
        )

    def start(self, now: float) -> None:
        self.successes = self.failures = 0
        self.next_at = now + self.initial_delay

    def due(self, now: float) -> bool:
        return now >= self.next_at

    def record(self, ok: bool, now: float) -> str | None:
        """Count one result; ``"success"``/``"failure"`` when a threshold is reached, else ``None``."""
        self.next_at = now + self.period
        if ok:
            self.successes, self.failures = self.successes + 1, 0
            return "success" if self.successes >= self.success_threshold else None
        self.successes, self.failures = 0, self.failures + 1
        return "failure" if self.failures >= self.failure_threshold else None


async def attempt(
    probe: Probe, ip: str, container: Mapping[str, Any], http: httpx.AsyncClient,
    run_exec: Callable[[list[str], float], Awaitable[int]],
) -> bool:
    """One try of ``probe`` against the pod at ``ip``."""
    action = probe.action
    try:
        if "httpGet" in action:
            get = action["httpGet"]
            host = get.get("host") or ip
            port = container_port(get.get("port", 80), container)
            scheme = str(get.get("scheme", "HTTP")).lower()
            headers = {h["name"]: h["value"] for h in get.get("httpHeaders") or []}
            path = get.get("path", "/")
            reply = await http.get(f"{scheme}://{host}:{port}{path}", headers=headers, timeout=probe.timeout)
            return 200 <= reply.status_code < 400
        if "tcpSocket" in action:
            port = container_port(action["tcpSocket"]["port"], container)
            _, writer = await asyncio.wait_for(asyncio.open_connection(action["tcpSocket"].get("host") or ip, port),
                                               probe.timeout)
            writer.close()
            return True
        if "exec" in action:
            return await run_exec(list(action["exec"]["command"]), probe.timeout) == 0
    except (OSError, httpx.HTTPError, TimeoutError, LookupError):
        return False
    return False  # grpc and anything else: not emulated
