"""Webhook signatures, as payment providers do them: the HMAC binds a timestamp, the delivery and the event to the body.

Each delivery carries three headers::

    X-Gatehouse-Delivery:  <delivery id>        the same on every retry of one delivery (receivers dedupe on it)
    X-Gatehouse-Event:     requested | decided
    X-Gatehouse-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<delivery>.<event>." + body)>

The timestamp is taken, and the signature made, on every attempt. A receiver recomputes the HMAC over the raw body
bytes, compares in constant time and refuses a timestamp more than :data:`TOLERANCE` seconds from its clock, so a
captured delivery stops verifying after five minutes and none of the three headers can be swapped onto another
body. The delivery id and the event are tokens without a ``.``, so the signed string splits one way only.
A header may carry several ``v1=`` (one per secret, for a rotation); one matching is enough.

:func:`verify` is that receiver, for Python receivers to import; ``docs/rest.md`` shows the same in ten lines.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass

SIGNATURE_HEADER = "X-Gatehouse-Signature"
DELIVERY_HEADER = "X-Gatehouse-Delivery"
EVENT_HEADER = "X-Gatehouse-Event"
TOLERANCE = 300  # seconds either side of the receiver's clock
SCHEME = "v1"

_TOKEN = re.compile(r"[A-Za-z0-9_-]{1,200}")
_TIMESTAMP = re.compile(r"[0-9]{1,12}")
_HEX = re.compile(r"[0-9a-f]{64}")


class SignatureError(ValueError):
    """A delivery that does not verify; the message says why (for the receiver's log, not for the sender)."""


@dataclass(frozen=True)
class Verified:
    """What the signature vouches for: use these, not the raw headers."""

    delivery: str
    event: str
    timestamp: int


def signed_content(timestamp: int, delivery: str, event: str, body: bytes) -> bytes:
    """The bytes the HMAC covers: ``<t>.<delivery>.<event>.<body>``."""
    return f"{timestamp}.{delivery}.{event}.".encode() + body


def signature(secret: bytes, timestamp: int, delivery: str, event: str, body: bytes) -> str:
    return hmac.new(secret, signed_content(timestamp, delivery, event, body), hashlib.sha256).hexdigest()


def sign(secret: bytes, body: bytes, *, delivery: str, event: str, timestamp: int) -> dict[str, str]:
    """The three headers of one attempt."""
    for name, value in (("delivery", delivery), ("event", event)):
        if not _TOKEN.fullmatch(value):
            raise ValueError(f"a webhook {name} must be letters, digits, '-' or '_', not {value!r}")
    return {
        DELIVERY_HEADER: delivery,
        EVENT_HEADER: event,
        SIGNATURE_HEADER: f"t={timestamp},{SCHEME}={signature(secret, timestamp, delivery, event, body)}",
    }


def verify(
    secret: bytes, headers: Mapping[str, str], body: bytes, *, now: float | None = None, tolerance: float = TOLERANCE
) -> Verified:
    """What a receiver does; raises :class:`SignatureError` unless the headers and the exact ``body`` verify at ``now``.

    ``headers`` may be any mapping (names are matched case-insensitively); ``now`` defaults to the clock.
    """
    found = {name.lower(): value for name, value in headers.items()}
    header = found.get(SIGNATURE_HEADER.lower())
    delivery = found.get(DELIVERY_HEADER.lower(), "")
    event = found.get(EVENT_HEADER.lower(), "")
    if not header:
        raise SignatureError(f"no {SIGNATURE_HEADER} header")
    pairs = [(key, value) for key, _, value in (part.strip().partition("=") for part in header.split(","))]
    stamps = [value for key, value in pairs if key == "t"]
    candidates = [value for key, value in pairs if key == SCHEME]
    if len(stamps) != 1 or not _TIMESTAMP.fullmatch(stamps[0]) or not candidates:
        raise SignatureError(f"malformed {SIGNATURE_HEADER}: expected t=<unix seconds>,{SCHEME}=<hex>")
    if not _TOKEN.fullmatch(delivery) or not _TOKEN.fullmatch(event):
        raise SignatureError(f"missing or malformed {DELIVERY_HEADER} or {EVENT_HEADER}")
    timestamp = int(stamps[0])
    expected = signature(secret, timestamp, delivery, event, body)
    if not any(_HEX.fullmatch(c) and hmac.compare_digest(c, expected) for c in candidates):
        raise SignatureError("signature mismatch (another secret, or a changed body, delivery or event)")
    now = time.time() if now is None else now
    if abs(now - timestamp) > tolerance:
        raise SignatureError(f"timestamp {timestamp} is {now - timestamp:+.0f}s from now, outside ±{tolerance:g}s (a replay?)")
    return Verified(delivery, event, timestamp)


__all__ = [
    "DELIVERY_HEADER", "EVENT_HEADER", "SIGNATURE_HEADER", "TOLERANCE", "SignatureError", "Verified", "sign",
    "signature", "signed_content", "verify",
]
