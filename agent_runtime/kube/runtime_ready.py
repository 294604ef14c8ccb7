"""The runtime's own readiness on its Agent: the condition ``RuntimeReady``.

The operator knows whether pods are available; only the runtime knows why it is not ready (an MCP server
unreachable, the database unavailable: :mod:`agent_runtime.app.readiness`, what ``/readyz`` says; read here
through the :class:`Readiness` protocol). So it writes
that into the Agent's status, through the ``agents/status`` subresource it already patches::

    - type: RuntimeReady
      status: "True" | "False"
      reason: Ready | Starting | Recovering | ToolsUnreachable | DatabaseUnavailable
      message: "pod <pod name>: <what /readyz says>"
      lastTransitionTime: <when status last flipped>

Only on change (never per probe): the reporter looks at the runtime's readiness every second and writes when
it differs from what it wrote last. ``Starting`` and ``Recovering`` are written only when they last (``settle``
seconds: a quick start goes straight to ``Ready``), ``Stopping`` never (another pod may be taking over). Every
``recheck`` seconds it reads the Agent and writes again when the condition is missing (the Agent was
recreated, or someone wrote back an older status) or shows this pod with another state; a condition that
names another pod is left alone: with several replicas the last writer wins.

The write is a read-modify-write of ``status.conditions`` guarded by the Agent's ``resourceVersion`` (a JSON
merge patch replaces a list whole): the other conditions (the operator's ``Accepted``, ``Ready``,
``AdmissionPolicy``) are kept as they are, and a 409 Conflict reads again and retries.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

from agent_runtime.infra.tasks import cancel_and_wait
from agent_runtime.kube.client import KubeClient, KubeError

log = logging.getLogger(__name__)

_TRANSIENT = frozenset({"Starting", "Recovering"})  # stages of a normal start: written only when they last

CONDITION = "RuntimeReady"


class Readiness(Protocol):
    """The runtime's readiness (:class:`agent_runtime.app.readiness.Readiness`)."""

    @property
    def ready(self) -> bool: ...
    @property
    def reason(self) -> str: ...  # one CamelCase word; Starting, Recovering and Stopping are transient (see the module docstring)
    @property
    def message(self) -> str: ...


def condition(readiness: Readiness, pod: str, now: str) -> dict[str, Any]:
    """The condition for ``readiness`` of pod ``pod``; ``lastTransitionTime`` ``now`` (:func:`merge` keeps an older
    one while the status does not flip)."""
    return {
        "type": CONDITION,
        "status": "True" if readiness.ready else "False",
        "reason": readiness.reason,
        "message": f"pod {pod}: {readiness.message}"[:4096],
        "lastTransitionTime": now,
    }


def merge(existing: list[dict[str, Any]], new: dict[str, Any]) -> list[dict[str, Any]]:
    """``new`` in place of the condition of its type (or appended); the others untouched and in order."""
    out, placed = [], False
    for old in existing:
        if old.get("type") != new["type"]:
            out.append(old)
            continue
        if old.get("status") == new["status"] and old.get("lastTransitionTime"):
            new = {**new, "lastTransitionTime": old["lastTransitionTime"]}
        out.append(new)
        placed = True
    return out if placed else [*out, new]


def shown(agent: dict[str, Any]) -> dict[str, Any] | None:
    """The Agent's ``RuntimeReady`` condition, if any."""
    conditions = (agent.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == CONDITION), None)


class RuntimeReadyReporter:
    def __init__(
        self, client: KubeClient, agent_status_path: str, pod: str, *,
        poll: float = 1.0, settle: float = 10.0, recheck: float = 60.0, clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._path = agent_status_path
        self.pod = pod
        self._poll = poll
        self._settle = settle
        self._recheck = recheck
        self._clock = clock
        self._task: asyncio.Task[None] | None = None
        self.written: Readiness | None = None  # what this pod last wrote
        self.writes = 0
        self._missing_logged = False

    def start(self, readiness: Callable[[], Readiness]) -> None:
        self._task = asyncio.create_task(self._run(readiness), name="gatehouse-kube-runtime-ready")

    async def stop(self) -> None:
        await cancel_and_wait([self._task])

    def _mine(self, readiness: Readiness) -> dict[str, Any]:
        return condition(readiness, self.pod, datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))

    async def report(self, readiness: Readiness, tries: int = 5) -> bool:
        """Write ``readiness`` into the Agent's conditions; False when there is no Agent (yet). Raises KubeError when
        the API refused or stayed in conflict ``tries`` times."""
        for attempt in range(tries):
            try:
                agent = await self._client.get(self._path)
            except KubeError as exc:
                if exc.status != 404:
                    raise
                if not self._missing_logged:
                    log.warning("kube: no Agent at %s: condition %s not written", self._path, CONDITION)
                    self._missing_logged = True
                self.written = readiness  # nothing to write to: recheck() writes it once the Agent exists
                return False
            conditions = merge(list((agent.get("status") or {}).get("conditions") or []), self._mine(readiness))
            version = (agent.get("metadata") or {}).get("resourceVersion")
            body = {"metadata": {"resourceVersion": version}, "status": {"conditions": conditions}}
            try:
                await self._client.merge_patch(self._path, body)
            except KubeError as exc:
                if exc.status != 409 or attempt == tries - 1:
                    raise
                continue  # someone else wrote the Agent's status in between: read it again
            self.written = readiness
            self.writes += 1
            return True
        return False

    async def recheck(self) -> bool:
        """Write what this pod last wrote again when the Agent lost it; True when it wrote."""
        if self.written is None:
            return False
        try:
            current = shown(await self._client.get(self._path))
        except KubeError as exc:
            if exc.status == 404:
                return False
            raise
        mine = self._mine(self.written)
        if current is not None:
            if not str(current.get("message", "")).startswith(f"pod {self.pod}: "):
                return False  # another replica wrote last: it is as true as ours
            if all(current.get(k) == mine[k] for k in ("status", "reason", "message")):
                return False
        log.info("kube: the Agent's %s condition is missing or older than this pod's: writing it again", CONDITION)
        return await self.report(self.written)

    async def _run(self, readiness: Callable[[], Readiness]) -> None:
        held, held_since = readiness(), self._clock()
        checked, delay = self._clock(), self._poll
        while True:
            now = self._clock()
            current = readiness()
            if current != held:
                held, held_since = current, now
            settled = current.reason not in _TRANSIENT or now - held_since >= self._settle
            try:
                if current != self.written and current.reason != "Stopping" and settled:
                    await self.report(current)
                    checked = now
                elif self._recheck > 0 and now - checked >= self._recheck:
                    await self.recheck()
                    checked = now
                delay = self._poll
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("kube: writing the Agent's %s condition failed (retrying in %.0fs): %s", CONDITION, delay, exc)
                delay = min(delay * 2, 30.0)
            await asyncio.sleep(delay)


__all__ = ["CONDITION", "Readiness", "RuntimeReadyReporter", "condition", "merge", "shown"]
