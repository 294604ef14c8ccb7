"""Keeps every request's message true in one channel: posts a new Pending ToolApproval to the destination its Agent
names for that channel (:meth:`~agent_runtime.bridges.notifier.Notifier.destination`) and updates the message whenever
the ToolApproval changes (votes counted, decided anywhere: a bridge, kubectl, REST, the inbox, A2A, a timeout).

The bridge has no state of its own: where a request's message is, and what it showed last, are kept on the
ToolApproval itself (the notifier's annotation: its place and ``fp``, the notifier's fingerprint of what was sent). It
lists the ToolApprovals of each namespace and watches from there (listing again after a broken watch or 410 Gone), so
after a restart it catches up from the objects: a Pending one never posted is posted, a message that is behind is
updated. One worker per object at a time, always on the newest version seen; the notifier retries its channel and the
API is retried here with backoff, so nothing is lost while either is unreachable. A request decided before it was ever
posted is not posted.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from agent_runtime.bridges import requests
from agent_runtime.bridges.notifier import Notifier, Refused
from agent_runtime.infra.tasks import cancel_and_wait
from agent_runtime.kube.client import KubeClient, KubeError

log = logging.getLogger(__name__)


class MessageKeeper:
    def __init__(self, kube: KubeClient, notifier: Notifier, namespaces: list[str], watch_seconds: float = 300.0,
                 max_backoff: float = 30.0) -> None:
        self._kube = kube
        self._notifier = notifier
        self._name = notifier.name
        self._namespaces = namespaces
        self._watch_seconds = watch_seconds
        self._max_backoff = max_backoff
        self._latest: dict[tuple[str, str], dict[str, Any]] = {}
        self._inflight: dict[tuple[str, str], asyncio.Task[None]] = {}
        self._written: dict[tuple[str, str], dict[str, str]] = {}  # annotations written, until the watch shows them
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._run(ns), name=f"gatehouse-{self._name}-watch-{ns}")
                       for ns in self._namespaces]

    async def stop(self) -> None:
        await cancel_and_wait([*self._tasks, *self._inflight.values()])

    async def _run(self, namespace: str) -> None:
        delay = 0.2
        while True:
            try:
                listed = await self._kube.get(requests.collection(namespace))
                for item in listed.get("items", []):
                    self.observe(item)
                version = listed.get("metadata", {}).get("resourceVersion", "")
                delay = 0.2
                while True:
                    started = asyncio.get_running_loop().time()
                    version = await self._watch(namespace, version)
                    if asyncio.get_running_loop().time() - started < 1.0:
                        await asyncio.sleep(1.0)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("%s: watching toolapprovals in %s failed (listing again in %.1fs): %s", self._name, namespace,
                            delay, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self._max_backoff)

    async def _watch(self, namespace: str, version: str) -> str:
        async for event in self._kube.watch(requests.collection(namespace), {"resourceVersion": version},
                                            self._watch_seconds):
            kind, obj = event.get("type"), event.get("object") or {}
            if kind == "ERROR":
                raise KubeError(int(obj.get("code") or 0), obj.get("message") or "watch error")
            version = obj.get("metadata", {}).get("resourceVersion") or version
            if kind in ("ADDED", "MODIFIED"):
                self.observe(obj)
            elif kind == "DELETED":
                meta = obj.get("metadata") or {}
                self._written.pop((meta.get("namespace", ""), meta.get("name", "")), None)
        return version

    def observe(self, obj: dict[str, Any]) -> None:
        """Look at one ToolApproval: bring its message up to date (in the background, on the newest version)."""
        if requests.is_question(obj):
            return  # a question from the model is answered in the chat, not approved through a bridge
        meta = obj.get("metadata") or {}
        key = (meta.get("namespace", ""), meta.get("name", ""))
        self._latest[key] = obj
        if key in self._inflight:
            return
        task = asyncio.create_task(self._keep(key), name=f"gatehouse-{self._name}-{key[0]}-{key[1]}")
        self._inflight[key] = task
        task.add_done_callback(lambda _: self._inflight.pop(key, None))

    async def _keep(self, key: tuple[str, str]) -> None:
        while (obj := self._latest.pop(key, None)) is not None:
            try:
                await self.sync(obj)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s: keeping the message of toolapproval %s/%s failed", self._name, *key)

    async def sync(self, obj: dict[str, Any]) -> None:
        """Post or update one ToolApproval's message so that it shows the object as it is."""
        meta = obj["metadata"]
        key = (meta["namespace"], meta["name"])
        keys = self._notifier.place_keys
        # what this process wrote last, else what the object says
        where = self._written.get(key) or requests.posted(obj, self._notifier.annotation, keys)
        fp = self._notifier.fingerprint(obj)
        if where is not None and where.get(requests.FINGERPRINT) == fp:
            return
        try:
            if where is None:
                if requests.phase(obj) != "Pending":
                    return  # decided before it was ever shown: nothing to ask anyone
                destination = await self._destination(requests.owner_path(meta["namespace"], obj.get("spec") or {}))
                if not destination:
                    return
                place = await self._notifier.post(obj, destination)
                log.info("%s: posted toolapproval %s/%s to %s", self._name, *key, destination)
            else:
                place = {k: where[k] for k in keys}
                await self._notifier.update(obj, place)
        except Refused as exc:
            log.error("%s: the channel refused the message of toolapproval %s/%s: %s", self._name, *key, exc)
            return
        self._written[key] = {**place, requests.FINGERPRINT: fp}
        await self._annotate(key, requests.place_annotation(place, fp))

    async def _annotate(self, key: tuple[str, str], value: str) -> None:
        delay = 0.2
        while True:
            try:
                await self._kube.merge_patch(requests.object_path(*key),
                                             {"metadata": {"annotations": {self._notifier.annotation: value}}})
                return
            except KubeError as exc:
                if exc.status == 404:
                    self._written.pop(key, None)
                    return  # deleted (retention): nothing to keep
                if exc.permanent:
                    log.error("%s: cannot annotate toolapproval %s/%s: %s", self._name, *key, exc)
                    return
                log.warning("%s: annotating toolapproval %s/%s failed (retrying in %.1fs): %s", self._name, *key, delay,
                            exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self._max_backoff)

    async def _destination(self, owner: str) -> str:
        """Where the Agent (or MCPGateway) at ``owner`` wants its requests shown in this channel; empty: it is gone, or
        names none."""
        try:
            obj = await self._kube.get(owner)
        except KubeError as exc:
            if exc.status == 404:
                return ""
            raise
        return self._notifier.destination(obj)


__all__ = ["MessageKeeper"]
