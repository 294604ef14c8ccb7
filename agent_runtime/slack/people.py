"""Who a Slack user is (:class:`agent_runtime.bridges.people.People`): the mapping (:mod:`agent_runtime.slack.users`),
with the profile's e-mail read from Slack (``users.info``) only when the mapping would look at it."""

from __future__ import annotations

import logging

from agent_runtime.bridges.people import Person
from agent_runtime.slack.api import SlackApi, SlackRefused
from agent_runtime.slack.users import UserMap

log = logging.getLogger(__name__)


class SlackPeople:
    def __init__(self, users: UserMap, slack: SlackApi) -> None:
        self._users = users
        self._slack = slack

    async def person(self, user: str) -> Person | None:
        email = None
        if self._users.needs_email(user):
            try:
                info = await self._slack.call("users_info", attempts=3, user=user)
                email = ((info.get("user") or {}).get("profile") or {}).get("email")
            except SlackRefused as exc:
                log.warning("slack: cannot read the profile of %s: %s", user, exc)
        return self._users.resolve(user, email)


__all__ = ["SlackPeople"]
