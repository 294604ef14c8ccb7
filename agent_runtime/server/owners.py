"""Whose task is it: the principal on an A2A call context, and the owner a run acts for.

The app's call-context builder puts a :class:`CallerUser` (the authenticated :class:`Principal`) on every
A2A request; a2a-sdk's task store files each task under ``user.user_name``, so a task belongs to the
principal who created it and nobody else finds it. The runtime's own resumers (REST and kubectl decisions,
timeouts) act *for* the task's owner with :func:`acting_for`, so they still find it. The ADK session of a
conversation is filed under the owner too (``user_id``), so a message into another principal's context id
never rides on that conversation's history or grants.
"""

from __future__ import annotations

from contextvars import ContextVar

from a2a.auth.user import User
from a2a.server.context import ServerCallContext

from agent_runtime.contract.principals import INTERNAL, Principal, anonymous


class CallerUser(User):
    """An a2a-sdk user that carries the Gatehouse principal (with its groups)."""

    def __init__(self, principal: Principal) -> None:
        self.principal = principal

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def user_name(self) -> str:
        return self.principal.id


def acting_for(owner: str) -> CallerUser:
    """The runtime itself, acting on behalf of ``owner`` (a resume after a REST or kubectl decision, a timeout)."""
    return CallerUser(Principal(owner, frozenset(), "internal", INTERNAL))


def caller(context: ServerCallContext | None) -> Principal:
    """The principal of a call context; ``anonymous`` where none was set (local mode, in-process tests)."""
    user = context.user if context is not None else None
    if isinstance(user, CallerUser):
        return user.principal
    if user is not None and user.user_name:
        return Principal(user.user_name, frozenset(), "a2a", user.user_name)
    return anonymous()


def owner_name(context: ServerCallContext | None) -> str:
    """The owner name a task of this call context is filed under."""
    return caller(context).id


# The principal the current agent run acts for (set by the executor around each run; read by the turn runner
# for the ADK session's user and by the gate for who asked).
TASK_OWNER: ContextVar[str] = ContextVar("gatehouse_task_owner", default="")
# For a task a parent agent delegated here: the human it acts for (who asked, for separation of duties) and how many
# agents are above this one (agent_runtime/delegation/relay.py); kept in the task's metadata, set around each run.
TASK_REQUESTER: ContextVar[str] = ContextVar("gatehouse_task_requester", default="")
TASK_DEPTH: ContextVar[int] = ContextVar("gatehouse_task_depth", default=0)


__all__ = ["TASK_DEPTH", "TASK_OWNER", "TASK_REQUESTER", "CallerUser", "acting_for", "caller", "owner_name"]
