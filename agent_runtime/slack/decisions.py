"""What a click in Slack does: Approve votes, Deny asks why (a dialog) and then votes, each as the person the Slack
user is (:mod:`agent_runtime.slack.users`), written on the ToolApproval by the bridge on that person's behalf
(``spec.votes[].onBehalfOf``, :func:`agent_runtime.toolapproval_client.cast_vote`). The agent's runtime counts it as
that person only because the bridge is one of the Agent's ``spec.access.delegators``; approvers, N-of-M and separation
of duties are the runtime's, as for every channel.

Nothing is decided when the click is not about the request its message shows (the button's request id, and the
message it came from, must be the ones on the ToolApproval), when the request is no longer pending ("already decided by
…"), or when the Slack user is nobody we know; each of those is answered to that person only (an ephemeral message).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from agent_runtime import toolapproval_client
from agent_runtime.kube.client import KubeClient, KubeError
from agent_runtime.slack import messages
from agent_runtime.slack.api import SlackApi, SlackRefused
from agent_runtime.slack.keeper import object_path, posted
from agent_runtime.slack.users import Person, UserMap

log = logging.getLogger(__name__)

UNMAPPED = ("Your Slack account is not mapped to a Gatehouse principal, so you cannot decide here; ask your platform "
            "team to add you to the Slack bridge's user mapping. Nothing was decided.")
NOT_THIS_REQUEST = "This button does not belong to that request (or the request is gone); nothing was decided."


class Decider:
    def __init__(self, kube: KubeClient, votes_client: Any, slack: SlackApi, users: UserMap, wait: float = 10.0) -> None:
        self._kube = kube
        self._votes = votes_client  # a toolapproval_client.Kube: the bridge's own identity
        self._slack = slack
        self._users = users
        self._wait = wait

    async def click(self, payload: dict[str, Any], action_id: str, ref: messages.Ref) -> None:
        """A button: Approve votes at once; Deny opens the dialog that asks why."""
        user, channel = _user(payload), (payload.get("channel") or {}).get("id", "")
        ts = (payload.get("message") or {}).get("ts") or (payload.get("container") or {}).get("message_ts", "")
        obj = await self._current(ref, user, channel, ts)
        if obj is None:
            return
        person = await self._person(user, channel)
        if person is None:
            return
        if action_id == messages.APPROVE:
            await self._vote(ref, person, "Approve", "", user, channel)
        elif action_id == messages.DENY:
            await self._slack.call("views_open", attempts=3, trigger_id=payload.get("trigger_id", ""),
                                   view=messages.deny_dialog(ref, obj, channel, ts))

    async def deny(self, payload: dict[str, Any], ref: messages.Ref, channel: str, ts: str, reason: str) -> None:
        """The dialog was sent with a reason: vote Deny with it."""
        user = _user(payload)
        if await self._current(ref, user, channel, ts) is None:
            return
        person = await self._person(user, channel)
        if person is not None:
            await self._vote(ref, person, "Deny", reason, user, channel)

    async def _current(self, ref: messages.Ref, user: str, channel: str, ts: str) -> dict[str, Any] | None:
        """The ToolApproval the click is about, if the click came from its own message and it is still pending."""
        try:
            obj = await self._kube.get(object_path(ref.namespace, ref.name))
        except KubeError as exc:
            if exc.status != 404:
                raise
            await self.tell(channel, user, NOT_THIS_REQUEST)
            return None
        where = posted(obj)
        if (obj.get("spec") or {}).get("requestId") != ref.request_id or where is None \
                or (where["channel"], where["ts"]) != (channel, ts):
            log.warning("slack: %s clicked on a message that is not toolapproval %s/%s's; ignored", user, ref.namespace,
                        ref.name)
            await self.tell(channel, user, NOT_THIS_REQUEST)
            return None
        if messages.phase(obj) != "Pending":
            await self.tell(channel, user, messages.already_decided(obj))
            return None
        return obj

    async def _person(self, user: str, channel: str) -> Person | None:
        email = None
        if self._users.needs_email(user):
            try:
                info = await self._slack.call("users_info", attempts=3, user=user)
                email = ((info.get("user") or {}).get("profile") or {}).get("email")
            except SlackRefused as exc:
                log.warning("slack: cannot read the profile of %s: %s", user, exc)
        person = self._users.resolve(user, email)
        if person is None:
            log.warning("slack: %s is not mapped to a principal; nothing decided", user)
            await self.tell(channel, user, UNMAPPED)
        return person

    async def _vote(self, ref: messages.Ref, person: Person, action: str, reason: str, user: str, channel: str) -> None:
        try:
            written, key = await asyncio.to_thread(
                toolapproval_client.cast_vote, self._votes, ref.name, ref.namespace, action, reason,
                on_behalf_of=(person.principal, list(person.groups)),
            )
            verdict = await asyncio.to_thread(toolapproval_client.await_runtime, self._votes, written, key, action,
                                              self._wait, {})
            text = verdict.message
        except toolapproval_client.PluginError as exc:
            text = str(exc)
        log.info("slack: %s (%s) %s toolapproval %s/%s: %s", user, person.principal, action, ref.namespace, ref.name, text)
        await self.tell(channel, user, text)

    async def tell(self, channel: str, user: str, text: str) -> None:
        """An ephemeral answer: only ``user`` sees it, in ``channel``."""
        try:
            await self._slack.call("chat_postEphemeral", attempts=5, channel=channel, user=user, text=text)
        except SlackRefused as exc:
            log.warning("slack: cannot tell %s: %s", user, exc)


def _user(payload: dict[str, Any]) -> str:
    return str((payload.get("user") or {}).get("id") or "")


__all__ = ["NOT_THIS_REQUEST", "UNMAPPED", "Decider"]
