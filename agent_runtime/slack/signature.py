"""Is a request really from Slack? The ``v0`` signature Slack documents ("Verifying requests from Slack"), checked by
the official ``slack_sdk.signature.SignatureVerifier`` with the app's signing secret: HMAC-SHA256 over
``v0:<X-Slack-Request-Timestamp>:<body>``, compared in constant time, and a timestamp more than five minutes off is
refused (a replay of an old request).

Within those five minutes a captured request could be sent again: :class:`RequestCheck` also remembers the
signatures it accepted for that long and refuses one seen before. (A replay after a restart is still harmless: the
bridge votes once per person on a ToolApproval, and the admission policy and the runtime refuse a second vote.)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from slack_sdk.signature import Clock, SignatureVerifier

WINDOW = 5 * 60  # seconds: Slack's documented limit


@dataclass
class RequestCheck:
    signing_secret: str
    clock: Callable[[], float] = time.time
    _seen: dict[str, float] = field(default_factory=dict)  # signature -> when it was accepted

    def refusal(self, body: bytes, headers: Mapping[str, str]) -> str:
        """Why the request is refused, or empty when it is Slack's and new."""
        timestamp = headers.get("x-slack-request-timestamp")
        signature = headers.get("x-slack-signature")
        if not timestamp or not signature:
            return "unsigned request"
        try:
            sent = int(timestamp)
        except ValueError:
            return "malformed timestamp"
        now = self.clock()
        if abs(now - sent) > WINDOW:
            return "stale timestamp (more than five minutes off): refused as a replay"
        verifier = SignatureVerifier(self.signing_secret, clock=_Clock(now))
        if not verifier.is_valid(body, timestamp, signature):
            return "bad signature"
        for seen, at in list(self._seen.items()):
            if now - at > WINDOW:
                del self._seen[seen]
        if signature in self._seen:
            return "replayed request"
        self._seen[signature] = now
        return ""


class _Clock(Clock):
    """slack_sdk's clock, fixed at the time this check runs."""

    def __init__(self, now: float) -> None:
        self._now = now

    def now(self) -> float:
        return self._now


__all__ = ["WINDOW", "RequestCheck"]
