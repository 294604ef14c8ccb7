"""The decision watcher: a ``spec.decision`` written on a Pending ToolApproval decides that request.

It lists the agent's ToolApprovals (label ``gatehouse.dev/agent``) and watches from the list's
resourceVersion; when the watch ends, breaks, or the API answers 410 Gone (history compacted, or the API
server restarted) it lists again and carries on, so no decision is lost.

A decision is applied through :meth:`Resumer.resume <agent_runtime.server.resume.Resumer.resume>` for that
one request, with ``source="kubectl"``: the executor records it exactly once (a request decided elsewhere
first is left alone) and resumes the task as soon as none of its requests is pending, with every
resolution of the batch. Whatever happened, the mirror then writes the request's real outcome into the
ToolApproval's status, so a late kubectl decision shows who really decided.

A ``spec.decision`` on a ToolApproval that mirrors a ``hitl_request`` question (label ``gatehouse.dev/kind:
hitl_request``) is never applied: a question is answered in the chat (A2A), not approved or denied; the
watcher logs a warning (once per object) and the question stays open.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from agent_runtime.approvals import ApprovalRecord, ApprovalService, Resolution
from agent_runtime.kube import objects
from agent_runtime.kube.client import KubeClient, KubeError
from agent_runtime.kube.mirror import Mirror
from agent_runtime.server.resume import Resumer

log = logging.getLogger(__name__)


class DecisionWatcher:
    def __init__(
        self,
        client: KubeClient,
        mirror: Mirror,
        approvals: ApprovalService,
        resumer: Resumer,
        watch_seconds: float = 300.0,
        max_backoff: float = 30.0,
    ) -> None:
        self._client = client
        self._mirror = mirror
        self._approvals = approvals
        self._resumer = resumer
        self._watch_seconds = watch_seconds
        self._max_backoff = max_backoff
        self._inflight: dict[str, asyncio.Task[None]] = {}
        self._warned: set[str] = set()  # hitl_request ToolApprovals whose decision was ignored (warned once)
        self._task: asyncio.Task[None] | None = None
        self.relists = 0

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="gatehouse-kube-watch")

    async def stop(self) -> None:
        tasks = [t for t in [self._task, *self._inflight.values()] if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _run(self) -> None:
        delay = 0.2
        params = {"labelSelector": objects.selector(self._mirror.agent)}
        while True:
            try:
                listed = await self._client.get(self._mirror.collection, params)
                self.relists += 1
                for item in listed.get("items", []):
                    self.observe(item)
                version = listed.get("metadata", {}).get("resourceVersion", "")
                delay = 0.2
                while True:  # renew the watch from the last version seen until it is gone
                    started = asyncio.get_running_loop().time()
                    version = await self._watch(params, version)
                    if asyncio.get_running_loop().time() - started < 1.0:
                        await asyncio.sleep(1.0)  # a server ending watches at once is not hammered
            except asyncio.CancelledError:
                raise
            except _Gone:
                log.info("kube watch: resourceVersion gone, listing again")
                continue
            except Exception as exc:
                log.warning("kube watch failed (listing again in %.1fs): %s", delay, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self._max_backoff)

    async def _watch(self, params: dict[str, str], version: str) -> str:
        async for event in self._client.watch(
            self._mirror.collection, {**params, "resourceVersion": version}, self._watch_seconds
        ):
            kind, obj = event.get("type"), event.get("object") or {}
            if kind == "ERROR":
                if obj.get("code") == 410:
                    raise _Gone()
                raise KubeError(int(obj.get("code") or 0), obj.get("message") or "watch error")
            version = obj.get("metadata", {}).get("resourceVersion") or version
            if kind == "DELETED":
                self._mirror.forget(obj["metadata"]["name"])
            elif kind in ("ADDED", "MODIFIED"):
                self.observe(obj)
        return version

    def observe(self, obj: dict[str, Any]) -> None:
        """Look at one ToolApproval: start applying its decision if it is Pending and has one."""
        self._mirror.observe(obj)
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        decision = spec.get("decision")
        request_id = spec.get("requestId")
        if not decision or not request_id or status.get("phase", "Pending") != "Pending":
            return
        if objects.is_hitl(obj) or str(request_id).startswith("hitl-"):
            name = (obj.get("metadata") or {}).get("name", "")
            if name not in self._warned:
                self._warned.add(name)
                log.warning("kube: decision on %s ignored: it is a hitl_request question from the model, answered in "
                            "the chat (A2A), not approved or denied", name)
            return
        if request_id in self._inflight:
            return
        task = asyncio.create_task(self._apply(spec, decision), name=f"gatehouse-kube-decide-{request_id}")
        self._inflight[request_id] = task
        task.add_done_callback(lambda _: self._inflight.pop(request_id, None))

    async def _apply(self, spec: dict[str, Any], decision: dict[str, Any]) -> None:
        request_id, task_id = spec["requestId"], spec.get("taskId", "")
        try:
            record = _find(await self._approvals.for_task(task_id), request_id)
            if record is None:
                log.warning("kube: decision on unknown request %s (task %s) ignored", request_id, task_id)
                return
            if record.status == "pending":
                who = decision.get("decidedBy") or "kubectl"
                approve = decision.get("action") == "Approve"
                resolution = Resolution("approved" if approve else "denied", decision.get("reason") or "")
                self._mirror.note_decider(request_id, who)
                verb = "Approved" if approve else "Denied"
                why = f": {resolution.reason}" if resolution.reason else ""
                note = f"{verb} {request_id} ({record.tool}) by {who} via kubectl{why}."
                await self._resumer.resume(task_id, record.context_id, {request_id: resolution}, "kubectl", note)
                record = _find(await self._approvals.for_task(task_id), request_id) or record
            if record.source != "kubectl":
                self._mirror.sync(record)  # decided elsewhere first: show the real outcome
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("kube: applying the decision on %s failed; it is retried when the watch lists again", request_id)


class _Gone(Exception):
    pass


def _find(records: list[ApprovalRecord], request_id: str) -> ApprovalRecord | None:
    return next((r for r in records if r.id == request_id), None)


__all__ = ["DecisionWatcher"]
