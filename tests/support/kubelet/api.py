"""How the stand-in talks to the emulated API: plain HTTP as its admin, list + watch caches, a few verbs.

Like a real controller it never polls: an :class:`Informer` lists once and then holds one watch request open
(resuming from the last ``resourceVersion``; relisting after ``410 Gone``), so a quiet cluster stays quiet in the
emulator's request log (tests that wait for the API to settle still can). Writes are merge patches; status goes
through the ``/status`` subresource.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx

__all__ = ["Api", "Informer", "Key"]

Key = tuple[str, str]  # (namespace, name)


class Api:
    """A few verbs over an ``httpx.AsyncClient``; ``None`` for 404 on reads, errors raised as ``httpx.HTTPStatusError``."""

    def __init__(self, url: str) -> None:
        self.http = httpx.AsyncClient(base_url=url, trust_env=False, timeout=httpx.Timeout(10.0))

    async def aclose(self) -> None:
        await self.http.aclose()

    async def get(self, path: str) -> dict[str, Any] | None:
        reply = await self.http.get(path)
        if reply.status_code == 404:
            return None
        reply.raise_for_status()
        return dict(reply.json())

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        reply = await self.http.post(path, json=body)
        reply.raise_for_status()
        return dict(reply.json())

    async def merge_patch(self, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
        headers = {"Content-Type": "application/merge-patch+json"}
        reply = await self.http.patch(path, content=json.dumps(body), headers=headers)
        if reply.status_code == 404:
            return None
        reply.raise_for_status()
        return dict(reply.json())

    async def delete(self, path: str) -> None:
        reply = await self.http.delete(path)
        if reply.status_code != 404:
            reply.raise_for_status()


class Informer:
    """A cache of one resource across namespaces (``/apis/apps/v1/deployments``), kept by list + watch.

    ``on_event(type, object)`` runs in the loop for every change (``ADDED``/``MODIFIED``/``DELETED``), relists
    included (as synthetic events), so the cache and what its users saw never disagree.
    """

    def __init__(self, api: Api, path: str, on_event: Callable[[str, dict[str, Any]], None]) -> None:
        self.api = api
        self.path = path
        self.on_event = on_event
        self.cache: dict[Key, dict[str, Any]] = {}
        self.synced = asyncio.Event()
        self._rv = ""

    @staticmethod
    def key(obj: dict[str, Any]) -> Key:
        meta = obj.get("metadata") or {}
        return (meta.get("namespace") or "", meta.get("name") or "")

    def _apply(self, kind: str, obj: dict[str, Any]) -> None:
        key = self.key(obj)
        if kind == "DELETED":
            self.cache.pop(key, None)
        else:
            self.cache[key] = obj
        self.on_event(kind, obj)

    async def _relist(self) -> None:
        listed = await self.api.get(self.path)
        assert listed is not None, f"cannot list {self.path}"
        fresh = {self.key(o): o for o in listed.get("items", [])}
        for key in set(self.cache) - set(fresh):
            self._apply("DELETED", self.cache[key])
        for key, obj in fresh.items():
            if self.cache.get(key) != obj:
                self._apply("MODIFIED" if key in self.cache else "ADDED", obj)
        self._rv = str(listed.get("metadata", {}).get("resourceVersion", ""))
        self.synced.set()

    async def _watch(self) -> bool:
        """One watch request; ``False`` when the history is gone (relist)."""
        params = {"watch": "true", "resourceVersion": self._rv, "timeoutSeconds": "3600"}
        timeout = httpx.Timeout(10.0, read=None)
        async with self.api.http.stream("GET", self.path, params=params, timeout=timeout) as reply:
            if reply.status_code == 410:
                return False
            reply.raise_for_status()
            async for line in reply.aiter_lines():
                if not line.strip():
                    continue
                event = json.loads(line)
                obj = event.get("object") or {}
                if event.get("type") == "ERROR":
                    return False
                if event.get("type") == "BOOKMARK":
                    self._rv = obj.get("metadata", {}).get("resourceVersion", self._rv)
                    continue
                self._rv = obj.get("metadata", {}).get("resourceVersion", self._rv)
                self._apply(str(event.get("type")), obj)
        return True

    async def run(self) -> None:
        """List, then watch for ever (cancel the task to stop)."""
        relist = True
        while True:
            try:
                if relist:
                    await self._relist()
                relist = not await self._watch()
            except (httpx.HTTPError, AssertionError, ValueError):
                relist = True
                await asyncio.sleep(0.2)
