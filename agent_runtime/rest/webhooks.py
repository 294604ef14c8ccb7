"""Outgoing webhooks: POST each new request and each outcome to the configured URLs, never blocking the agent.

The approval-events listener only puts the record on one bounded queue per URL (a full queue drops the
delivery, with a log line and ``gatehouse_webhook_deliveries_total{result="dropped"}``); one worker per URL
renders and posts, in order, retrying a connection error, a 5xx or a 429 with exponential backoff for a
bounded number of attempts. A slow or failing receiver therefore delays only its own deliveries.

Bodies: ``json`` → :class:`~agent_runtime.rest.models.ApprovalEventData`; ``slack`` → ``{"text": "…"}`` (a
Slack incoming webhook, or anything that takes that shape). With a secret, ``X-Gatehouse-Signature:
sha256=<hex>`` is the HMAC-SHA256 of the exact body bytes (:func:`sign`, :func:`verify`).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import uuid

import httpx

from agent_runtime.approvals import ApprovalRecord
from agent_runtime.approvals.events import ApprovalEvent
from agent_runtime.database import Database
from agent_runtime.metrics import Metrics
from agent_runtime.rest.models import ApprovalEventData, ApprovalView
from agent_runtime.rest.settings import RestSettings
from agent_runtime.rest.views import views

log = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Gatehouse-Signature"
RETRY_STATUS = frozenset({408, 425, 429})


def sign(secret: bytes, body: bytes) -> str:
    """The ``X-Gatehouse-Signature`` value for ``body``."""
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def verify(secret: bytes, body: bytes, header: str | None) -> bool:
    """What a receiver does: recompute the signature and compare in constant time."""
    return bool(header) and hmac.compare_digest(sign(secret, body), header or "")


def slack_text(event: str, agent: str, view: ApprovalView) -> str:
    args = ", ".join(f"{k}={v!r}" for k, v in view.args.items())
    call = f"`{view.tool}({args})`"
    if event == "requested":
        return f"Approval needed: {agent} wants to run {call} [{view.id}], expires {view.expires_at}. {view.hint}".strip()
    outcome = {"approved": "approved", "denied": "denied", "expired": "timed out"}.get(view.status, view.status)
    by = f" by {view.decided_by}" if view.decided_by and view.status != "expired" else ""
    reason = f": {view.reason}" if view.reason else ""
    return f"{agent}: {call} [{view.id}] was {outcome}{by}{reason}"


def render(fmt: str, event: str, agent: str, view: ApprovalView) -> bytes:
    if fmt == "slack":
        return json.dumps({"text": slack_text(event, agent, view)}).encode()
    return ApprovalEventData(event=event, agent=agent, approval=view).model_dump_json().encode()  # type: ignore[arg-type]


class Webhooks:
    def __init__(self, db: Database, agent: str, settings: RestSettings, metrics: Metrics) -> None:
        self._db = db
        self._agent = agent
        self._settings = settings
        self._metrics = metrics
        self._queues = {url: asyncio.Queue[tuple[str, ApprovalRecord]](settings.webhook_queue) for url in settings.webhooks}
        self._workers: list[asyncio.Task[None]] = []
        self._client: httpx.AsyncClient | None = None

    def start(self) -> None:
        if not self._queues:
            return
        self._client = httpx.AsyncClient(timeout=self._settings.webhook_timeout, follow_redirects=False)
        self._workers = [
            asyncio.create_task(self._work(url, queue), name=f"gatehouse-webhook-{n}")
            for n, (url, queue) in enumerate(self._queues.items())
        ]

    async def stop(self) -> None:
        for worker in self._workers:
            worker.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)
        if self._client is not None:
            await self._client.aclose()

    def on_approval_event(self, event: ApprovalEvent) -> None:
        """The approval-events listener: queue only, never wait; drop (and say so) when a queue is full."""
        if event.kind == "voted":  # requests and decisions only, as before votes existed
            return
        for url, queue in self._queues.items():
            for record in event.records:
                try:
                    queue.put_nowait((event.kind, record))
                except asyncio.QueueFull:
                    self._metrics.webhook_deliveries.labels(result="dropped").inc()
                    log.error("webhook queue for %s is full (%d); dropped %s %s", url, queue.maxsize, event.kind, record.id)

    async def _work(self, url: str, queue: asyncio.Queue[tuple[str, ApprovalRecord]]) -> None:
        while True:
            kind, record = await queue.get()
            try:
                (view,) = await views(self._db, [record])
                body = render(self._settings.webhook_format, kind, self._agent, view)
                ok = await self._deliver(url, kind, body)
                self._metrics.webhook_deliveries.labels(result="ok" if ok else "failed").inc()
            except asyncio.CancelledError:
                raise
            except Exception:
                self._metrics.webhook_deliveries.labels(result="failed").inc()
                log.exception("webhook delivery to %s failed", url)

    async def _deliver(self, url: str, kind: str, body: bytes) -> bool:
        assert self._client is not None
        headers = {"Content-Type": "application/json", "X-Gatehouse-Event": kind, "X-Gatehouse-Delivery": str(uuid.uuid4())}
        if self._settings.webhook_secret:
            headers[SIGNATURE_HEADER] = sign(self._settings.webhook_secret, body)
        delay = self._settings.webhook_backoff
        for attempt in range(1, self._settings.webhook_attempts + 1):
            try:
                reply = await self._client.post(url, content=body, headers=headers)
            except httpx.HTTPError as exc:
                problem = f"{type(exc).__name__}: {exc}"
            else:
                if reply.is_success:
                    return True
                if reply.status_code < 500 and reply.status_code not in RETRY_STATUS:
                    log.error("webhook %s refused a %s delivery: HTTP %d", url, kind, reply.status_code)
                    return False
                problem = f"HTTP {reply.status_code}"
            if attempt < self._settings.webhook_attempts:
                log.warning("webhook %s: %s (attempt %d); retrying in %gs", url, problem, attempt, delay)
                await asyncio.sleep(delay)
                delay *= 2
        log.error("webhook %s: gave up on a %s delivery after %d attempts", url, kind, self._settings.webhook_attempts)
        return False


__all__ = ["SIGNATURE_HEADER", "Webhooks", "render", "sign", "slack_text", "verify"]
