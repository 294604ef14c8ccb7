"""Nothing stays Pending for ever: a ToolApproval whose request the runtime has no record of becomes ``Orphaned``.

At start-up and then every ``interval`` seconds (:meth:`Orphans.sweep`) the runtime lists its ToolApprovals
(label ``gatehouse.dev/agent``, in its namespace) and looks each Pending one up in its store: a request id
the approvals table does not hold, or a ``hitl_request`` question the question table does not hold, means
the object outlived the state behind it — an ``emptyDir`` database that went with its pod, a deleted
database — or was made by another runtime with the same agent name. Nothing will ever decide it, so its
status becomes ``phase: Orphaned`` with a ``reason`` saying so (and a Warning Event ``Orphaned`` on it),
instead of a Pending that ``kubectl gatehouse approvals`` lists for ever. The vote watcher does the same at
once when someone votes on such an object (:meth:`Orphans.orphan`), so the voter learns it.

Why this never orphans a live request:

- the store is looked up *after* the list, and the mirror creates a ToolApproval only after its request is
  committed: whatever the list shows that is ours is in the store already, however new;
- replicas sharing a database (Postgres) share the store, so every replica knows every replica's requests;
- a lookup that fails (the database unreachable) orphans nothing: the sweep is retried;
- a request the runtime does know, shown as Orphaned (another runtime with the same agent name judged it, or
  the database came back from a backup), gets its real status back (:meth:`Orphans.restore`).

The writes go through the mirror's queue, in order with its own; the sweep also recounts the Agent's
``status.pendingApprovals``.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import Any

from agent_runtime.approvals import ApprovalService
from agent_runtime.kube import objects
from agent_runtime.kube.client import KubeClient
from agent_runtime.kube.mirror import Mirror
from agent_runtime.questions.store import QuestionStore

log = logging.getLogger(__name__)

ORPHANED = "Orphaned"


class Orphans:
    def __init__(
        self, client: KubeClient, mirror: Mirror, approvals: ApprovalService, questions: QuestionStore | None = None,
        interval: float = 60.0,
    ) -> None:
        self._client = client
        self._mirror = mirror
        self._approvals = approvals
        self._questions = questions
        self.interval = interval  # seconds between sweeps; 0: at start-up only
        self.sweeps = 0

    async def known(self, obj: dict[str, Any]) -> bool | None:
        """Whether the store holds the request ``obj`` mirrors; None when that cannot be told (no request id, or a
        question without a question store). A failing lookup raises: it proves nothing."""
        spec = obj.get("spec") or {}
        request_id = spec.get("requestId")
        if not request_id:
            return None
        if objects.is_question(obj):
            if self._questions is None:
                return None
            return any(q.id == request_id for q in await self._questions.for_task(spec.get("taskId") or ""))
        return await self._approvals.get(request_id) is not None

    async def check(self, items: list[dict[str, Any]]) -> list[str]:
        """Orphan the Pending ones of ``items`` (listed just now) whose request is unknown, give known ones shown as
        Orphaned their real status back; return the names orphaned."""
        orphaned = []
        for obj in items:
            current = (obj.get("status") or {}).get("phase") or "Pending"
            if current not in ("Pending", ORPHANED):
                continue
            known = await self.known(obj)
            if known is None:
                continue
            if current == "Pending" and not known:
                self.orphan(obj)
                orphaned.append(obj["metadata"]["name"])
            elif current == ORPHANED and known:
                self.restore(obj)
        return orphaned

    async def sweep(self) -> list[str]:
        """List the agent's ToolApprovals, then :meth:`check` them; recount ``pendingApprovals``."""
        listed = await self._client.get(self._mirror.collection, {"labelSelector": self._mirror.selector})
        orphaned = await self.check(listed.get("items", []))
        self._mirror.recount()
        self.sweeps += 1
        return orphaned

    async def run(self) -> None:
        """Sweep every ``interval`` seconds (the first sweep is the bridge's, at start-up)."""
        if self.interval <= 0:
            return
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.sweep()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("kube: looking for orphaned ToolApprovals failed (again in %.0fs): %s", self.interval, exc)

    def orphan(self, obj: dict[str, Any]) -> None:
        """Queue: ``obj`` (Pending, its request unknown to the store) becomes Orphaned, with a Warning Event."""
        name, request_id = obj["metadata"]["name"], (obj.get("spec") or {}).get("requestId", "")
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        status = objects.orphaned_status(request_id, self._mirror.instance, now)
        log.warning("kube: %s is Orphaned: %s", name, status["reason"])

        async def write() -> None:
            await self._client.merge_patch(f"{self._mirror.path(name)}/status", {"status": objects.replacing(status)})
            self._mirror.observe({**obj, "status": status})  # deleted after the retention, like a decided one

        self._mirror.enqueue(name, f"orphan {name}", write)
        self._mirror.warn(obj, ORPHANED, f"{name}: {status['reason']}")

    def restore(self, obj: dict[str, Any]) -> None:
        """Queue: ``obj`` is shown as Orphaned but the store knows its request: write its real status back (read when
        the write runs, so an outcome queued meanwhile is not undone)."""
        name, spec = obj["metadata"]["name"], obj.get("spec") or {}
        log.warning("kube: %s was marked Orphaned, but this runtime knows request %s: its status is restored "
                    "(does another runtime use the agent name %s in this namespace?)", name, spec.get("requestId"),
                    self._mirror.agent)

        async def write() -> None:
            status = await self._status_of(obj)
            if status is None:
                return
            self._mirror.forget(name)
            await self._client.merge_patch(f"{self._mirror.path(name)}/status", {"status": objects.replacing(status)})
            self._mirror.observe({**obj, "status": status})

        self._mirror.enqueue(name, f"restore {name}", write)

    async def _status_of(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        spec = obj.get("spec") or {}
        request_id = spec.get("requestId", "")
        if objects.is_question(obj):
            found = await self._questions.for_task(spec.get("taskId") or "") if self._questions is not None else []
            return next((objects.question_status(q) for q in found if q.id == request_id), None)
        record = await self._approvals.get(request_id)
        if record is None or await self._approvals.object_uid(request_id) != (obj.get("metadata") or {}).get("uid"):
            return None  # not the object this runtime created (a copy): it gets no status from the runtime
        cast = (await self._approvals.cast_votes([request_id])).get(request_id, [])
        decided_by = await self._mirror.decider(record, cast) if record.status != "pending" else ""
        return objects.status(record, decided_by, cast)


__all__ = ["ORPHANED", "Orphans"]
