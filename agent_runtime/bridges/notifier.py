"""The port a channel implements for the message keeper and the ballots (:mod:`agent_runtime.bridges`): post a
request's message, update it, tell one person something. Only the channel knows its wire; the bridge knows only a
message's :data:`Place` (the channel's own address of it) and the :meth:`Notifier.fingerprint` of what it showed.
"""

from __future__ import annotations

from typing import Any, Protocol

Place = dict[str, str]
"""Where a request's message is, in the channel's own terms (Slack: ``{"channel": "C…", "ts": "1712…"}``); kept on the
ToolApproval (:func:`agent_runtime.bridges.requests.place_annotation`) and compared key by key with the place a click
says it came from."""


class Refused(Exception):
    """The channel refused for a reason retrying cannot fix (no such channel, not allowed); ``str`` names it. Passing
    failures are the notifier's to retry: a call returns once it worked."""


class Notifier(Protocol):
    name: str  # the channel's name, in logs and task names: "slack"
    title: str  # how people call it, in what they are told: "Slack"
    annotation: str  # the ToolApproval annotation that keeps the message's place: "gatehouse.dev/slack-message"
    place_keys: tuple[str, ...]  # the keys of a Place, each required and non-empty

    def destination(self, agent: dict[str, Any]) -> str:
        """Where the Agent wants its requests shown in this channel (``spec.approval.notify.<channel>``); empty: not
        in this channel."""
        ...

    def fingerprint(self, obj: dict[str, Any]) -> str:
        """A short hash of the message ``obj`` should show now: equal means the message is up to date."""
        ...

    async def post(self, obj: dict[str, Any], destination: str) -> Place:
        """Show a new request at ``destination``; where its message is."""
        ...

    async def update(self, obj: dict[str, Any], place: Place) -> None:
        """Make the message at ``place`` show ``obj`` as it is now."""
        ...

    async def tell(self, place: Place, user: str, text: str) -> None:
        """Tell ``user`` (the channel's id of the person) ``text``, beside the message at ``place``, so only they see
        it where the channel can. Never raises: a person who cannot be told is logged."""
        ...


__all__ = ["Notifier", "Place", "Refused"]
