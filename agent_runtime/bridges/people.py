"""Who a channel's user is: the canonical principal (and groups) a bridge votes for. Each channel maps its own users
(Slack: by id or by the profile's e-mail, :mod:`agent_runtime.slack.users`); a user it cannot map is nobody, and
nothing is decided for them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Person:
    """The principal a channel's user acts as, with its groups."""

    principal: str
    groups: tuple[str, ...] = ()


class People(Protocol):
    async def person(self, user: str) -> Person | None:
        """The person the channel's ``user`` is, or None: nobody we know."""
        ...


__all__ = ["People", "Person"]
