"""Keeps every request's Slack message true: posts a new Pending ToolApproval to the channel its Agent names
(``spec.approval.notify.slack.channel``) and updates the message whenever the ToolApproval changes (votes counted,
decided anywhere: Slack, kubectl, REST, the inbox, A2A, a timeout).

The bridge has no state of its own: where a request's message is, and what it showed last, are kept on the
ToolApproval itself (annotation :data:`ANNOTATION`, ``{"channel", "ts", "fp"}``: ``fp`` is
:func:`~agent_runtime.slack.messages.fingerprint` of what was sent). It lists the ToolApprovals of each namespace and
watches from there (listing again after a broken watch or 410 Gone), so after a restart it catches up from the objects:
a Pending one never posted is posted, a message that is behind is updated. One worker per object at a time, always on
the newest version seen; Slack and the API are retried with backoff (:class:`~agent_runtime.slack.api.SlackApi`), so
nothing is lost while Slack is unreachable. A request decided before it was ever posted is not posted.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from agent_runtime.kube.client import KubeClient, KubeError
from agent_runtime.resources import GROUP, VERSION
from agent_runtime.resources.tool_approval import KIND_HITL, LABEL_KIND, PLURAL
from agent_runtime.slack import messages
from agent_runtime.slack.api import SlackApi, SlackRefused

log = logging.getLogger(__name__)

ANNOTATION = "gatehouse.dev/slack-message"


def collection(namespace: str) -> str:
    return f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}"


def object_path(namespace: str, name: str) -> str:
    return f"{collection(namespace)}/{name}"


def posted(obj: dict[str, Any]) -> dict[str, str] | None:
    """Where the request's message is (``channel``, ``ts``) and what it last showed (``fp``), from the annotation."""
    raw = ((obj.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION)
    try:
        data = json.loads(raw) if raw else None
    except ValueError:
        return None
    if not isinstance(data, dict) or not data.get("channel") or not data.get("ts"):
        return None
    return {k: str(data.get(k) or "") for k in ("channel", "ts", "fp")}


class MessageKeeper:
    def __init__(self, kube: KubeClient, slack: SlackApi, namespaces: list[str], watch_seconds: float = 300.0,
                 max_backoff: float = 30.0) -> None:
        self._kube = kube
        self._slack = slack
        self._namespaces = namespaces
        self._watch_seconds = watch_seconds
        self._max_backoff = max_backoff
        self._latest: dict[tuple[str, str], dict[str, Any]] = {}
        self._inflight: dict[tuple[str, str], asyncio.Task[None]] = {}
        self._written: dict[tuple[str, str], dict[str, str]] = {}  # annotations written, until the watch shows them
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._run(ns), name=f"gatehouse-slack-watch-{ns}") for ns in self._namespaces]

    async def stop(self) -> None:
        tasks = [*self._tasks, *self._inflight.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _run(self, namespace: str) -> None:
        delay = 0.2
        while True:
            try:
                listed = await self._kube.get(collection(namespace))
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
                log.warning("slack: watching toolapprovals in %s failed (listing again in %.1fs): %s", namespace, delay, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self._max_backoff)

    async def _watch(self, namespace: str, version: str) -> str:
        async for event in self._kube.watch(collection(namespace), {"resourceVersion": version}, self._watch_seconds):
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
        meta = obj.get("metadata") or {}
        if (meta.get("labels") or {}).get(LABEL_KIND) == KIND_HITL or (obj.get("spec") or {}).get("tool") == KIND_HITL:
            return  # a question from the model is answered in the chat, not approved in Slack
        key = (meta.get("namespace", ""), meta.get("name", ""))
        self._latest[key] = obj
        if key in self._inflight:
            return
        task = asyncio.create_task(self._keep(key), name=f"gatehouse-slack-{key[0]}-{key[1]}")
        self._inflight[key] = task
        task.add_done_callback(lambda _: self._inflight.pop(key, None))

    async def _keep(self, key: tuple[str, str]) -> None:
        while (obj := self._latest.pop(key, None)) is not None:
            try:
                await self.sync(obj)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("slack: keeping the message of toolapproval %s/%s failed", *key)

    async def sync(self, obj: dict[str, Any]) -> None:
        """Post or update one ToolApproval's message so that it shows the object as it is."""
        meta = obj["metadata"]
        key = (meta["namespace"], meta["name"])
        where = self._written.get(key) or posted(obj)  # what this process wrote last, else what the object says
        fp = messages.fingerprint(obj)
        if where is not None and where.get("fp") == fp:
            return
        text, blocks = messages.summary(obj), messages.blocks(obj)
        try:
            if where is None:
                if messages.phase(obj) != "Pending":
                    return  # decided before it was ever shown: nothing to ask anyone
                channel = await self._channel(meta["namespace"], (obj.get("spec") or {}).get("agentRef", ""))
                if not channel:
                    return
                reply = await self._slack.call("chat_postMessage", channel=channel, text=text, blocks=blocks)
                where = {"channel": str(reply.get("channel") or channel), "ts": str(reply["ts"])}
                log.info("slack: posted toolapproval %s/%s to %s", *key, where["channel"])
            else:
                await self._slack.call("chat_update", channel=where["channel"], ts=where["ts"], text=text, blocks=blocks)
        except SlackRefused as exc:
            log.error("slack: Slack refused the message of toolapproval %s/%s: %s", *key, exc)
            return
        written = {"channel": where["channel"], "ts": where["ts"], "fp": fp}
        self._written[key] = written
        await self._annotate(key, written)

    async def _annotate(self, key: tuple[str, str], written: dict[str, str]) -> None:
        delay = 0.2
        while True:
            try:
                await self._kube.merge_patch(object_path(*key), {"metadata": {"annotations": {
                    ANNOTATION: json.dumps(written, separators=(",", ":"), sort_keys=True)}}})
                return
            except KubeError as exc:
                if exc.status == 404:
                    self._written.pop(key, None)
                    return  # deleted (retention): nothing to keep
                if exc.permanent:
                    log.error("slack: cannot annotate toolapproval %s/%s: %s", *key, exc)
                    return
                log.warning("slack: annotating toolapproval %s/%s failed (retrying in %.1fs): %s", *key, delay, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self._max_backoff)

    async def _channel(self, namespace: str, agent: str) -> str:
        """The channel the Agent names for its requests (``spec.approval.notify.slack.channel``); empty: none."""
        try:
            obj = await self._kube.get(f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/agents/{agent}")
        except KubeError as exc:
            if exc.status == 404:
                return ""
            raise
        slack = (((obj.get("spec") or {}).get("approval") or {}).get("notify") or {}).get("slack") or {}
        return str(slack.get("channel") or "")


__all__ = ["ANNOTATION", "MessageKeeper", "collection", "object_path", "posted"]
