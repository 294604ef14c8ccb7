"""The channel-free half of every cluster bridge: a process that shows each agent's pending ToolApprovals in a chat
channel and turns a person's click there into a vote cast on that person's behalf (docs/design.md, "Adding a channel").

A channel implements :class:`~agent_runtime.bridges.notifier.Notifier` (post, update, tell) and
:class:`~agent_runtime.bridges.people.People` (who one of its users is); everything else is here, shared:
``requests`` (pure: which request an object or a button is, its phase, the message's place kept in an annotation),
``keeper`` (watch ToolApprovals, one worker per object, post and update their messages) and ``ballots`` ("is this still
the request / is the person mapped / vote on their behalf"). The channel a vote came through is never decided here:
the runtime derives it from who cast the ballot (the bridge's delegator entry, ``channel:``). Slack is the first
channel (:mod:`agent_runtime.slack`); this package never imports it.
"""

from agent_runtime.bridges.ballots import Ballots
from agent_runtime.bridges.keeper import MessageKeeper
from agent_runtime.bridges.notifier import Notifier, Place, Refused
from agent_runtime.bridges.people import People, Person
from agent_runtime.bridges.requests import Ref

__all__ = ["Ballots", "MessageKeeper", "Notifier", "People", "Person", "Place", "Ref", "Refused"]
