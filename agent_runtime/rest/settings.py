"""Settings of the REST API, the event stream and the webhooks, read once at start-up (by ``serve``).

``load_rest_settings`` turns the command line and environment into a :class:`RestSettings`: webhook URLs,
their format and the signing secret, and how long an ``Idempotency-Key`` is remembered. A webhook URL may itself
be a secret (a Slack incoming webhook's is), so logs and errors name it by :func:`webhook_name` only: scheme and
host. Who may call the API is the runtime's one authenticator (:mod:`agent_runtime.access`), the same for every
channel.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from agent_runtime.contract.durations import parse_duration

WebhookFormat = Literal["json", "slack"]


@dataclass(frozen=True)
class RestSettings:
    webhooks: tuple[str, ...] = ()
    webhook_format: WebhookFormat = "json"
    webhook_secret: bytes = b""
    webhook_attempts: int = 5  # then the delivery is dead-lettered (counted, logged, not retried)
    webhook_backoff: float = 0.5  # seconds before the 2nd attempt, doubled after each failure
    webhook_timeout: float = 5.0
    webhook_queue: int = 1000
    retry_after: int = 5  # seconds, the Retry-After of a pending approval
    idempotency_ttl: float = 24 * 3600.0  # seconds an Idempotency-Key is remembered (rest/idempotency.py)


def webhook_name(url: str) -> str:
    """A webhook URL as logs and errors show it: scheme and host only, e.g. ``https://hooks.slack.com/…``."""
    return _scheme_and_host(url) or "<not an http(s) URL>"


def _scheme_and_host(url: str) -> str | None:
    try:
        parts = urlsplit(url)
        host, port = parts.hostname or "", parts.port
    except ValueError:  # a bad port or IPv6 literal
        return None
    if parts.scheme not in ("http", "https") or not host:
        return None
    host = f"[{host}]" if ":" in host else host
    netloc = host if port is None else f"{host}:{port}"
    hidden = "…" if parts.path not in ("", "/") or parts.query or parts.fragment else ""
    return f"{parts.scheme}://{netloc}/{hidden}"


def load_rest_settings(
    *,
    webhooks: Sequence[str] = (),
    webhook_format: str = "json",
    webhook_secret_file: Path | None = None,
    idempotency_ttl: str = "24h",
    env: Mapping[str, str] | None = None,
) -> RestSettings:
    """From options, else the environment: ``GATEHOUSE_WEBHOOKS`` (space-separated), ``GATEHOUSE_WEBHOOK_SECRET``.
    ``idempotency_ttl``: a duration (``24h``, ``90m``)."""
    env = os.environ if env is None else env
    urls = tuple(webhooks) or tuple(env.get("GATEHOUSE_WEBHOOKS", "").split())
    for n, url in enumerate(urls, 1):
        if _scheme_and_host(url) is None:
            raise ValueError(f"webhook {n} must be an http(s) URL with a host (not shown here: it may be a secret)")
    if webhook_format not in ("json", "slack"):
        raise ValueError(f"--webhook-format must be json or slack, not {webhook_format!r}")
    if webhook_secret_file is not None:
        secret = webhook_secret_file.read_text().strip().encode()
    else:
        secret = env.get("GATEHOUSE_WEBHOOK_SECRET", "").strip().encode()
    try:
        ttl = parse_duration(idempotency_ttl)
    except ValueError as exc:
        raise ValueError(f"--idempotency-ttl: {exc}") from None
    return RestSettings(
        webhooks=urls, webhook_format=webhook_format, webhook_secret=secret, idempotency_ttl=ttl,  # type: ignore[arg-type]
    )


__all__ = ["RestSettings", "WebhookFormat", "load_rest_settings", "webhook_name"]
