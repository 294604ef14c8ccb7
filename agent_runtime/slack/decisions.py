"""What a click in Slack does: Approve votes, Deny asks why (a dialog) and then votes, an option of a held
``AskUserQuestion`` votes Deny with the inbox's answer text (:func:`agent_runtime.slack.messages.answer_reason`), each
as the person the Slack user is (:class:`~agent_runtime.slack.people.SlackPeople`). The channel-free part (is the click
about the request its message shows and still pending, is the person mapped, the vote on their behalf) is
:class:`agent_runtime.bridges.ballots.Ballots`; this is Slack's: reading a click and a dialog, opening the dialog.
"""

from __future__ import annotations

from typing import Any

from agent_runtime.bridges.ballots import NOT_THIS_REQUEST, Ballots, unmapped
from agent_runtime.slack import messages
from agent_runtime.slack.api import SlackApi

UNMAPPED = unmapped("Slack")


class Decider:
    def __init__(self, ballots: Ballots, slack: SlackApi) -> None:
        self._ballots = ballots
        self._slack = slack

    async def click(self, payload: dict[str, Any], action_id: str, ref: messages.Ref) -> None:
        """A button: Approve votes at once; Deny opens the dialog that asks why."""
        user, place = _user(payload), _place(payload)
        channel, ts = place["channel"], place["ts"]
        obj = await self._ballots.current(ref, user, place)
        if obj is None:
            return
        person = await self._ballots.person(user, place)
        if person is None:
            return
        if action_id == messages.APPROVE:
            await self._ballots.vote(ref, person, "Approve", "", user, place)
        elif action_id == messages.DENY:
            await self._slack.call("views_open", attempts=3, trigger_id=payload.get("trigger_id", ""),
                                   view=messages.deny_dialog(ref, obj, channel, ts))

    async def answer(self, payload: dict[str, Any], ref: messages.Ref, question: int, option: int) -> None:
        """An option of a held ``AskUserQuestion`` (Slack asked the person to confirm it): a Deny vote whose reason is
        the answer, made from the ToolApproval as it is now; the runtime decides whether the person may decide, as
        for any vote."""
        user, place = _user(payload), _place(payload)
        obj = await self._ballots.current(ref, user, place)
        if obj is None:
            return
        reason = messages.answer_reason(obj, question, option)
        if reason is None:  # a button this request never showed
            await self._ballots.notifier.tell(place, user, NOT_THIS_REQUEST)
            return
        person = await self._ballots.person(user, place)
        if person is not None:
            await self._ballots.vote(ref, person, "Deny", reason, user, place)

    async def deny(self, payload: dict[str, Any], ref: messages.Ref, channel: str, ts: str, reason: str) -> None:
        """The dialog was sent with a reason: vote Deny with it."""
        user, place = _user(payload), {"channel": channel, "ts": ts}
        if await self._ballots.current(ref, user, place) is None:
            return
        person = await self._ballots.person(user, place)
        if person is not None:
            await self._ballots.vote(ref, person, "Deny", reason, user, place)


def _place(payload: dict[str, Any]) -> dict[str, str]:
    """The message a click came from: its channel and ``ts``."""
    channel = str((payload.get("channel") or {}).get("id") or "")
    ts = (payload.get("message") or {}).get("ts") or (payload.get("container") or {}).get("message_ts", "")
    return {"channel": channel, "ts": str(ts or "")}


def _user(payload: dict[str, Any]) -> str:
    return str((payload.get("user") or {}).get("id") or "")


__all__ = ["NOT_THIS_REQUEST", "UNMAPPED", "Decider"]
