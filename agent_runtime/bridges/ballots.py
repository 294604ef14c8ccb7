"""What a person's decision in a channel does, whatever the channel: a vote written on the ToolApproval by the bridge on
that person's behalf (``spec.votes[].onBehalfOf``, :func:`agent_runtime.kube.toolapproval_client.cast_vote`). The agent's
runtime counts it as that person only because the bridge is one of the Agent's ``spec.access.delegators``, and names
the channel it came through from that delegator entry (``channel:``), never from anything the bridge or the person
writes; approvers, N-of-M and separation of duties are the runtime's, as for every channel.

Nothing is decided when the click is not about the request its message shows (the request id, and the message it came
from, must be the ones on the ToolApproval), when the request is no longer pending ("already decided by …"), or when
the channel's user is nobody we know; each of those is told to that person only (:meth:`Notifier.tell`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from agent_runtime.bridges import requests
from agent_runtime.bridges.notifier import Notifier, Place
from agent_runtime.bridges.people import People, Person
from agent_runtime.bridges.requests import Ref
from agent_runtime.kube import toolapproval_client
from agent_runtime.kube.client import KubeClient, KubeError

log = logging.getLogger(__name__)

NOT_THIS_REQUEST = "This button does not belong to that request (or the request is gone); nothing was decided."


def unmapped(title: str) -> str:
    """What a person the channel's user mapping does not know is told."""
    return (f"Your {title} account is not mapped to a Gatehouse principal, so you cannot decide here; ask your platform "
            f"team to add you to the {title} bridge's user mapping. Nothing was decided.")


class Ballots:
    def __init__(self, kube: KubeClient, votes_client: Any, notifier: Notifier, people: People, wait: float = 10.0) -> None:
        self._kube = kube
        self._votes = votes_client  # a toolapproval_client.Kube: the bridge's own identity
        self.notifier = notifier
        self._people = people
        self._wait = wait
        self._name = notifier.name

    async def current(self, ref: Ref, user: str, place: Place) -> dict[str, Any] | None:
        """The ToolApproval a click is about, if the click came from its own message (``place``) and it is still
        pending; else None, and ``user`` was told why."""
        try:
            obj = await self._kube.get(requests.object_path(ref.namespace, ref.name))
        except KubeError as exc:
            if exc.status != 404:
                raise
            await self.notifier.tell(place, user, NOT_THIS_REQUEST)
            return None
        keys = self.notifier.place_keys
        where = requests.posted(obj, self.notifier.annotation, keys)
        if (obj.get("spec") or {}).get("requestId") != ref.request_id or where is None \
                or not requests.same_place(where, place, keys):
            log.warning("%s: %s clicked on a message that is not toolapproval %s/%s's; ignored", self._name, user,
                        ref.namespace, ref.name)
            await self.notifier.tell(place, user, NOT_THIS_REQUEST)
            return None
        if requests.phase(obj) != "Pending":
            await self.notifier.tell(place, user, requests.already_decided(obj))
            return None
        return obj

    async def person(self, user: str, place: Place) -> Person | None:
        """The person ``user`` is; None, and they were told so, when nobody we know."""
        person = await self._people.person(user)
        if person is None:
            log.warning("%s: %s is not mapped to a principal; nothing decided", self._name, user)
            await self.notifier.tell(place, user, unmapped(self.notifier.title))
        return person

    async def vote(self, ref: Ref, person: Person, action: str, reason: str, user: str, place: Place) -> None:
        """Vote ``action`` (``Approve``/``Deny``) for ``person`` and tell ``user`` what the runtime made of it (or that
        it was sent, when the runtime has not answered within the wait)."""
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
        log.info("%s: %s (%s) %s toolapproval %s/%s: %s", self._name, user, person.principal, action, ref.namespace,
                 ref.name, text)
        await self.notifier.tell(place, user, text)


__all__ = ["NOT_THIS_REQUEST", "Ballots", "unmapped"]
