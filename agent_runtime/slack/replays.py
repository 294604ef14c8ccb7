"""The bridge's memory of the signed Slack requests it accepted, kept where a restarted bridge and every other bridge
process see it: one ConfigMap in the bridge's namespace (:data:`NAME` unless told; the chart's is
``<fullname>-slack-replays``) whose ``data`` maps the SHA-256 of each accepted request's ``X-Slack-Signature`` to when
that request stops being valid (Unix seconds: its ``X-Slack-Request-Timestamp`` plus five minutes).

Why one ConfigMap written by compare-and-swap, rather than one object per request created under a hashed name: RBAC.
A Role cannot limit ``create`` to names, and sweeping per-request objects needs ``delete`` on every object of that kind
in the namespace (in the release namespace: the operator's leader-election Lease, the chart's ConfigMaps). One object
the chart creates lets the bridge's Role name it: ``get`` and ``patch`` on that ConfigMap and nothing else. Slack
requests come at the pace of people clicking, so the writes are few, and the object holds only the last five minutes
(~90 bytes a request).

Atomic: a request is remembered by a merge patch carrying the ``resourceVersion`` it read, which the API server applies
only if nobody wrote in between (409 Conflict otherwise: read again, try again). Two bridges accepting the same request
at once: one patch wins, the other reads the winner's entry and refuses the replay.

Swept: every write also drops the entries past their time, and :meth:`ReplayMemory.sweep` (every minute) drops them
when no request comes. An entry is kept :data:`SKEW` longer than its request is valid, for bridges whose clocks differ.

Fail closed: when the memory cannot be read or written, :class:`ReplayMemoryUnavailable` is raised and the request is
refused; an unreachable API never lets a replay through. A missing ConfigMap is created (outside the chart; the chart
creates it, so its bridge needs no ``create``).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from typing import Any

from agent_runtime.infra.periodic import PeriodicSweep
from agent_runtime.kube.client import KubeClient, KubeError

log = logging.getLogger(__name__)

NAME = "gatehouse-slack-replays"
SKEW = 60.0  # seconds an entry outlives its request: bridges' clocks may differ by this much
LABELS = {"app.kubernetes.io/name": "gatehouse", "app.kubernetes.io/component": "slack"}


class ReplayMemoryUnavailable(Exception):
    """The memory could not be read or written (``str`` says why): the request is refused, not let through."""


def key_of(signature: str) -> str:
    """The memory's key for a request: the SHA-256 of its ``X-Slack-Signature`` (a valid ConfigMap key; a valid
    signature is the one HMAC of that timestamp and body, so a replay has the same key)."""
    return hashlib.sha256(signature.encode()).hexdigest()


class ReplayMemory(PeriodicSweep):
    name = "gatehouse-slack-replay-sweep"

    def __init__(self, kube: KubeClient, namespace: str, configmap: str = NAME, clock: Callable[[], float] = time.time,
                 interval: float = 60.0, attempts: int = 30) -> None:
        super().__init__(interval)
        self._kube = kube
        self._namespace = namespace
        self._configmap = configmap
        self._clock = clock
        self._attempts = attempts  # compare-and-swap rounds before giving up (each lost round means another wrote)

    @property
    def where(self) -> str:
        return f"configmap {self._namespace}/{self._configmap}"

    async def first_time(self, signature: str, expires: float) -> bool:
        """Remember the request signed ``signature`` until ``expires``: True if no bridge had, False for a replay."""
        key = key_of(signature)
        accepted, _ = await self._write(lambda data: None if key in data else {key: str(int(expires))})
        return accepted

    async def sweep(self) -> int:
        """Drop the entries past their time; how many were dropped."""
        _, dropped = await self._write(lambda _: {})
        return dropped

    async def _write(self, change: Callable[[dict[str, str]], dict[str, str] | None]) -> tuple[bool, int]:
        """Apply ``change`` (the entries to add, or None: refuse) and the sweep, by compare-and-swap: (applied, dropped)."""
        for _ in range(self._attempts):
            current = await self._read()
            data: dict[str, str] = dict(current.get("data") or {})
            now = self._clock()
            added = change(data)
            if added is None:
                return False, 0
            stale: dict[str, str | None] = {k: None for k, v in data.items() if _expired(v, now)}
            patch = {**stale, **added}
            if not patch:
                return True, 0
            version = (current.get("metadata") or {}).get("resourceVersion", "")
            try:
                await self._kube.merge_patch(self._path(), {"metadata": {"resourceVersion": version}, "data": patch})
            except KubeError as exc:
                if exc.status == 409:
                    continue  # another bridge wrote since we read: read again
                raise ReplayMemoryUnavailable(f"cannot write {self.where}: {exc}") from None
            if stale:
                log.debug("slack: dropped %d expired entries from %s", len(stale), self.where)
            return True, len(stale)
        raise ReplayMemoryUnavailable(f"{self.where} kept changing under {self._attempts} writes")

    async def _read(self) -> dict[str, Any]:
        try:
            return await self._kube.get(self._path())
        except KubeError as exc:
            if exc.status != 404:
                raise ReplayMemoryUnavailable(f"cannot read {self.where}: {exc}") from None
        body = {"apiVersion": "v1", "kind": "ConfigMap", "data": {},
                "metadata": {"name": self._configmap, "namespace": self._namespace, "labels": LABELS}}
        try:
            return await self._kube.create(f"/api/v1/namespaces/{self._namespace}/configmaps", body)
        except KubeError as exc:
            if exc.status == 409:  # another bridge created it first
                try:
                    return await self._kube.get(self._path())
                except KubeError as again:
                    exc = again
            raise ReplayMemoryUnavailable(f"{self.where} is missing and cannot be created: {exc}") from None

    def _path(self) -> str:
        return f"/api/v1/namespaces/{self._namespace}/configmaps/{self._configmap}"


def _expired(value: str, now: float) -> bool:
    try:
        return now > float(value) + SKEW
    except ValueError:
        return True  # not ours to keep: an entry we never wrote


__all__ = ["NAME", "SKEW", "ReplayMemory", "ReplayMemoryUnavailable", "key_of"]
