"""Slack as a channel of the bridge (:class:`agent_runtime.bridges.notifier.Notifier`): a request's message is posted
with ``chat.postMessage`` to the channel its Agent names (``spec.approval.notify.slack.channel``), kept true with
``chat.update``, and a person is answered with ``chat.postEphemeral`` (only they see it). The message's place is the
Slack channel id and the message's ``ts``, kept on the ToolApproval in :data:`ANNOTATION` (``{"channel", "ts",
"fp"}``: ``fp`` is :func:`~agent_runtime.slack.messages.fingerprint` of what was sent).
"""

from __future__ import annotations

import logging
from typing import Any

from agent_runtime.bridges.notifier import Place
from agent_runtime.slack import messages
from agent_runtime.slack.api import SlackApi, SlackRefused

log = logging.getLogger(__name__)

ANNOTATION = "gatehouse.dev/slack-message"


class SlackNotifier:
    name: str = "slack"
    title: str = "Slack"
    annotation: str = ANNOTATION
    place_keys: tuple[str, ...] = ("channel", "ts")

    def __init__(self, slack: SlackApi) -> None:
        self._slack = slack

    def destination(self, agent: dict[str, Any]) -> str:
        slack = (((agent.get("spec") or {}).get("approval") or {}).get("notify") or {}).get("slack") or {}
        return str(slack.get("channel") or "")

    def fingerprint(self, obj: dict[str, Any]) -> str:
        return messages.fingerprint(obj)

    async def post(self, obj: dict[str, Any], destination: str) -> Place:
        reply = await self._slack.call("chat_postMessage", channel=destination, text=messages.summary(obj),
                                       blocks=messages.blocks(obj))
        # Slack answers with the channel's id (``C0…``) for a name (``#ops``): the id is what clicks carry
        return {"channel": str(reply.get("channel") or destination), "ts": str(reply["ts"])}

    async def update(self, obj: dict[str, Any], place: Place) -> None:
        await self._slack.call("chat_update", channel=place["channel"], ts=place["ts"], text=messages.summary(obj),
                               blocks=messages.blocks(obj))

    async def tell(self, place: Place, user: str, text: str) -> None:
        """An ephemeral answer: only ``user`` sees it, in the message's channel."""
        try:
            await self._slack.call("chat_postEphemeral", attempts=5, channel=place.get("channel", ""), user=user,
                                   text=text)
        except SlackRefused as exc:
            log.warning("slack: cannot tell %s: %s", user, exc)


__all__ = ["ANNOTATION", "SlackNotifier"]
