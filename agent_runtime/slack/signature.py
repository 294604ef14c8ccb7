"""Is a request really from Slack, and new? The ``v0`` signature Slack documents ("Verifying requests from Slack"),
checked by the official ``slack_sdk.signature.SignatureVerifier`` with the app's signing secret: HMAC-SHA256 over
``v0:<X-Slack-Request-Timestamp>:<body>``, compared in constant time, and a timestamp more than five minutes off is
refused (a replay of an old request).

Within those five minutes a captured request could be sent again: :class:`RequestCheck` also remembers every request
it accepts, until its timestamp is five minutes old, in the :class:`~agent_runtime.slack.replays.ReplayMemory` that a
restarted bridge and every other bridge process share, and refuses one seen before.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from slack_sdk.signature import Clock, SignatureVerifier

from agent_runtime.slack.replays import ReplayMemory

WINDOW = 5 * 60  # seconds: Slack's documented limit
REPLAYED = "replayed request"


class Refused(Exception):
    """Not Slack's, or too old: ``str`` says why."""


@dataclass(frozen=True)
class Signed:
    signature: str  # X-Slack-Signature, checked
    expires: float  # when its timestamp is more than five minutes old: until then a replay would pass the age check


def verify(signing_secret: str, body: bytes, headers: Mapping[str, str], now: float) -> Signed:
    """The request's checked signature; :class:`Refused` when it is unsigned, badly signed or stale."""
    timestamp = headers.get("x-slack-request-timestamp")
    signature = headers.get("x-slack-signature")
    if not timestamp or not signature:
        raise Refused("unsigned request")
    try:
        sent = int(timestamp)
    except ValueError:
        raise Refused("malformed timestamp") from None
    if abs(now - sent) > WINDOW:
        raise Refused("stale timestamp (more than five minutes off): refused as a replay")
    if not SignatureVerifier(signing_secret, clock=_Clock(now)).is_valid(body, timestamp, signature):
        raise Refused("bad signature")
    return Signed(signature, sent + WINDOW)  # a timestamp up to five minutes ahead is valid for up to ten


@dataclass
class RequestCheck:
    signing_secret: str
    memory: ReplayMemory
    clock: Callable[[], float] = time.time

    async def refusal(self, body: bytes, headers: Mapping[str, str]) -> str:
        """Why the request is refused, or empty when it is Slack's and no bridge has seen it before. Raises
        :class:`~agent_runtime.slack.replays.ReplayMemoryUnavailable` when that cannot be known."""
        try:
            signed = verify(self.signing_secret, body, headers, self.clock())
        except Refused as exc:
            return str(exc)
        return "" if await self.memory.first_time(signed.signature, signed.expires) else REPLAYED


class _Clock(Clock):
    """slack_sdk's clock, fixed at the time this check runs."""

    def __init__(self, now: float) -> None:
        self._now = now

    def now(self) -> float:
        return self._now


__all__ = ["REPLAYED", "WINDOW", "Refused", "RequestCheck", "Signed", "verify"]
