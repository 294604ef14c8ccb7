"""The few Slack Web API calls the bridge makes, through the official ``slack_sdk.WebClient``, retried with backoff.

``chat.postMessage`` and ``chat.update`` keep a request's message true; ``chat.postEphemeral`` answers one person;
``views.open`` shows the Deny dialog; ``users.info`` reads a profile's e-mail (for the e-mail domain mapping).

A call that fails for a passing reason (Slack unreachable, 5xx, 429 rate limited: Slack's ``Retry-After`` is honoured)
is tried again, waiting twice as long each time up to ``max_backoff``; one Slack refuses for good (``channel_not_found``,
``not_in_channel``, ``invalid_auth``…) raises :class:`SlackRefused` at once. The ``WebClient`` is synchronous (urllib):
each call runs in a thread, so the bridge's event loop never waits on Slack.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from agent_runtime.bridges.notifier import Refused

log = logging.getLogger(__name__)

_PASSING = frozenset({"ratelimited", "internal_error", "fatal_error", "request_timeout", "service_unavailable"})


class SlackRefused(Refused):
    """Slack answered ``ok: false`` for a reason retrying cannot fix; ``str`` names it."""


class SlackApi:
    def __init__(self, client: WebClient, max_backoff: float = 60.0, first_delay: float = 0.5) -> None:
        self._client = client
        self._max_backoff = max_backoff
        self._first_delay = first_delay

    @classmethod
    def connect(cls, token: str, base_url: str | None = None, max_backoff: float = 60.0) -> SlackApi:
        """A client for the bot ``token``; ``base_url``: another Web API (a stand-in in tests), else Slack's own."""
        kwargs: dict[str, Any] = {"token": token, "timeout": 10}
        if base_url:
            kwargs["base_url"] = base_url.rstrip("/") + "/"
        return cls(WebClient(**kwargs), max_backoff)

    async def call(self, method: str, attempts: int | None = None, **arguments: Any) -> dict[str, Any]:
        """``method`` (``chat_postMessage``…) with ``arguments``: its answer's data. Retried while the failure passes,
        at most ``attempts`` times (None: until it works or the task is cancelled)."""
        delay, tried = self._first_delay, 0
        while True:
            tried += 1
            try:
                reply = await asyncio.to_thread(getattr(self._client, method), **arguments)
                return dict(reply.data) if isinstance(reply.data, dict) else {}
            except SlackApiError as exc:
                error = str(exc.response.get("error") or "")
                status = exc.response.status_code
                if error not in _PASSING and status != 429 and status < 500:
                    raise SlackRefused(f"{method}: {error or status}") from None
                wait = _retry_after(exc) or delay
                problem = f"{error or status}"
            except Exception as exc:  # unreachable, reset, timed out: slack_sdk raises urllib's errors
                wait, problem = delay, f"{type(exc).__name__}: {exc}"
            if attempts is not None and tried >= attempts:
                raise SlackRefused(f"{method}: gave up after {tried} attempts ({problem})")
            log.warning("slack: %s failed (%s); retrying in %.1fs", method, problem, wait)
            await asyncio.sleep(wait)
            delay = min(delay * 2, self._max_backoff)


def _retry_after(exc: SlackApiError) -> float:
    headers = getattr(exc.response, "headers", None) or {}
    for key, value in headers.items():
        if key.lower() == "retry-after":
            raw = value[0] if isinstance(value, list) else value
            try:
                return float(raw)
            except (TypeError, ValueError):
                return 0.0
    return 0.0


__all__ = ["SlackApi", "SlackRefused"]
