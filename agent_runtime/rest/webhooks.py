"""Outgoing webhooks: POST each new request and each outcome to the configured URLs, never blocking the agent.

The approval-events listener only puts the record on one bounded queue per URL (a full queue drops the
delivery, with a log line and ``gatehouse_webhook_deliveries_total{result="dropped"}``); one worker per URL
renders and posts, in order, retrying a connection error, a 5xx or a 429 with exponential backoff for a
bounded number of attempts, then dead-letters it (``result="dead_letter"``, one error line). A slow or failing
receiver therefore delays only its own deliveries.

Bodies: ``json`` → :class:`~agent_runtime.rest.models.ApprovalEventData`; ``slack`` → ``{"text": "…"}`` (a
Slack incoming webhook, or anything that takes that shape). Every attempt carries ``X-Gatehouse-Delivery`` (one id
per delivery, the same on each retry) and ``X-Gatehouse-Event``; with a secret, also ``X-Gatehouse-Signature``,
made afresh on each attempt (:mod:`agent_runtime.rest.signing`).

A webhook URL may be a secret (a Slack incoming webhook's is): every line logged here names it as ``webhook <n>
<scheme://host/…>`` (:func:`~agent_runtime.rest.settings.webhook_name`), and while the workers run a filter on the
``httpx`` logger does the same to httpx's own ``HTTP Request:`` lines.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Callable

import httpx

from agent_runtime.approvals import ApprovalRecord
from agent_runtime.approvals.events import ApprovalEvent
from agent_runtime.infra.database import Database
from agent_runtime.infra.tasks import cancel_and_wait
from agent_runtime.rest import signing
from agent_runtime.rest.models import ApprovalEventData, ApprovalView
from agent_runtime.rest.settings import RestSettings, webhook_name
from agent_runtime.rest.views import views
from agent_runtime.telemetry.metrics import Metrics

log = logging.getLogger(__name__)

RETRY_STATUS = frozenset({408, 425, 429})


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
    # event: "requested" or "decided"
    return ApprovalEventData(event=event, agent=agent, approval=view).model_dump_json().encode()  # type: ignore[arg-type]


class Webhooks:
    def __init__(
        self, db: Database, agent: str, settings: RestSettings, metrics: Metrics, clock: Callable[[], float] = time.time
    ) -> None:
        self._db = db
        self._agent = agent
        self._settings = settings
        self._metrics = metrics
        self._clock = clock
        self._queues = {url: asyncio.Queue[tuple[str, ApprovalRecord]](settings.webhook_queue) for url in settings.webhooks}
        self._names = {url: f"webhook {n} {webhook_name(url)}" for n, url in enumerate(self._queues, 1)}
        self._hide = _HideUrls(self._names)
        self._workers: list[asyncio.Task[None]] = []
        self._client: httpx.AsyncClient | None = None

    def start(self) -> None:
        if not self._queues:
            return
        logging.getLogger("httpx").addFilter(self._hide)
        self._client = httpx.AsyncClient(timeout=self._settings.webhook_timeout, follow_redirects=False)
        self._workers = [
            asyncio.create_task(self._work(url, queue), name=f"gatehouse-webhook-{n}")
            for n, (url, queue) in enumerate(self._queues.items(), 1)
        ]

    async def stop(self) -> None:
        await cancel_and_wait(self._workers)
        if self._client is not None:
            await self._client.aclose()
        logging.getLogger("httpx").removeFilter(self._hide)
        for url, queue in self._queues.items():
            if self._workers and queue.qsize():
                log.warning("%s: %d queued deliveries not sent (stopping)", self._names[url], queue.qsize())

    def on_approval_event(self, event: ApprovalEvent) -> None:
        """The approval-events listener: queue only, never wait; drop (and say so) when a queue is full."""
        if event.kind in ("voted", "executed"):  # requests and decisions only, as before votes existed
            return
        for url, queue in self._queues.items():
            for record in event.records:
                try:
                    queue.put_nowait((event.kind, record))
                except asyncio.QueueFull:
                    self._metrics.webhook_deliveries.labels(result="dropped").inc()
                    log.error("%s: queue full (%d); dropped the %s delivery for %s", self._names[url], queue.maxsize,
                              event.kind, record.id)

    async def _work(self, url: str, queue: asyncio.Queue[tuple[str, ApprovalRecord]]) -> None:
        name = self._names[url]
        while True:
            kind, record = await queue.get()
            try:
                (view,) = await views(self._db, [record])
                body = render(self._settings.webhook_format, kind, self._agent, view)
            except asyncio.CancelledError:
                raise
            except Exception:
                self._metrics.webhook_deliveries.labels(result="error").inc()
                log.exception("%s: could not render the %s delivery for %s", name, kind, record.id)
                continue
            result = await self._deliver(url, f"{name}: the {kind} delivery for {record.id}", kind, body)
            self._metrics.webhook_deliveries.labels(result=result).inc()

    async def _deliver(self, url: str, what: str, kind: str, body: bytes) -> str:
        """Post with retries: ``ok``, ``refused`` (a 4xx worth no retry), ``dead_letter`` (every attempt failed) or ``error``."""
        assert self._client is not None
        delivery = str(uuid.uuid4())
        what = f"{what} ({delivery})"
        attempts = self._settings.webhook_attempts
        delay = self._settings.webhook_backoff
        problem = "no attempt"
        for attempt in range(1, attempts + 1):
            try:
                reply = await self._client.post(url, content=body, headers=self._headers(kind, delivery, body))
            except httpx.HTTPError as exc:  # a connection error or a timeout: worth another attempt
                problem = self._hide.scrub(f"{type(exc).__name__}: {exc}")
            except Exception as exc:  # httpx.InvalidURL, say: another attempt will not help
                log.error("%s could not be sent: %s", what, self._hide.scrub(f"{type(exc).__name__}: {exc}"))
                return "error"
            else:
                if reply.is_success:
                    return "ok"
                if reply.status_code < 500 and reply.status_code not in RETRY_STATUS:
                    log.error("%s was refused: HTTP %d (not retried)", what, reply.status_code)
                    return "refused"
                problem = f"HTTP {reply.status_code}"
            if attempt < attempts:
                log.warning("%s: %s (attempt %d of %d); retrying in %gs", what, problem, attempt, attempts, delay)
                await asyncio.sleep(delay)
                delay *= 2
        log.error("%s: dead-lettered after %d attempts; the last: %s", what, attempts, problem)
        return "dead_letter"

    def _headers(self, kind: str, delivery: str, body: bytes) -> dict[str, str]:
        """One attempt's headers: signed now, so a retry is never outside the receiver's window."""
        headers = {"Content-Type": "application/json", signing.DELIVERY_HEADER: delivery, signing.EVENT_HEADER: kind}
        if self._settings.webhook_secret:
            timestamp = int(self._clock())
            headers |= signing.sign(self._settings.webhook_secret, body, delivery=delivery, event=kind, timestamp=timestamp)
        return headers


class _HideUrls(logging.Filter):
    """Every spelling of each webhook URL (as given, as httpx prints it) → its name, in log arguments and in text."""

    def __init__(self, names: dict[str, str]) -> None:
        super().__init__()
        self._names: dict[str, str] = {}
        for url, name in names.items():
            self._names[url] = name
            try:
                self._names[str(httpx.URL(url))] = name
            except Exception:  # an invalid URL: settings refuse them, a hand-made RestSettings may not
                pass

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(self._names.get(str(a), a) if isinstance(a, str | httpx.URL) else a for a in record.args)
        return True

    def scrub(self, text: str) -> str:
        for spelling in sorted(self._names, key=len, reverse=True):
            text = text.replace(spelling, self._names[spelling])
        return text


__all__ = ["Webhooks", "render", "slack_text"]
