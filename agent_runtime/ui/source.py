"""What the inbox pages read and decide through: one protocol, two implementations.

- the runtime's own (:class:`agent_runtime.ui.runtime_inbox.RuntimeInbox`): the approvals table of one agent,
  decisions through ``DecideOne`` (the path of REST and kubectl), questions of the viewer's own tasks;
- ``kubectl gatehouse inbox`` (:class:`agent_runtime.clients.kubectl_inbox.ClusterInbox`): the ToolApprovals the user can
  list, votes appended with the user's kubeconfig (RBAC and the admission policy judge them, the runtime counts them).

Who may see and decide is never decided here: the runtime source asks the one authority function, the cluster source
the API server and the runtime behind it.

Edit and approve is a capability a source may have (:class:`EditingSource`: the runtime's has it): the pages offer
the form on cards marked :attr:`~agent_runtime.ui.cards.Card.editable` (False unless a source sets it) and send an
edit only to a source that has :meth:`EditingSource.approve_edited`; any other source answers it "invalid". A source
without it (``kubectl gatehouse inbox`` today) needs no change.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal, Protocol, runtime_checkable

from agent_runtime.contract.principals import Principal
from agent_runtime.ui.cards import Card, Filters, Outcome, Question

Ballot = Literal["approve", "deny"]
Listener = Callable[[str], None]  # called with the id of a request or question that appeared or changed


class InboxSource(Protocol):
    title: str  # what the inbox covers: "agent file-manager", "namespace default", "all namespaces"
    chat: bool  # whether a chat tab talks A2A to this agent (the runtime's page only)
    agents: tuple[str, ...]  # the agents it covers, for the history filter
    problem: str  # why the last listing came back empty or partial (RBAC refused it…), in words; "" when fine

    async def pending(self, viewer: Principal) -> list[Card]: ...

    async def questions(self, viewer: Principal) -> list[Question]: ...

    async def history(self, viewer: Principal, filters: Filters) -> list[Card]: ...

    async def card(self, viewer: Principal, key: str) -> Card | None:
        """One request the viewer may see (``key`` is :attr:`Card.key`), pending or decided; None otherwise."""
        ...

    async def decide(self, viewer: Principal, key: str, ballot: Ballot, reason: str, session: bool) -> Outcome: ...

    async def sees(self, viewer: Principal, changed: str) -> bool:
        """Whether a change announced to listeners concerns something ``viewer`` may see."""
        ...

    def subscribe(self, listener: Listener) -> Callable[[], None]: ...


@runtime_checkable
class EditingSource(InboxSource, Protocol):
    """A source whose cards may be approved with changed arguments (where the Agent's policy allows it)."""

    async def approve_edited(self, viewer: Principal, key: str, changes: Mapping[str, Any], seen: str) -> Outcome:
        """Approve ``key`` with ``changes`` (argument name -> new value) applied to its arguments; every other field
        keeps its value, redacted ones included (the viewer never saw them). ``seen``: the arguments hash the viewer's
        page showed (:attr:`Card.args_hash`); when the request has changed since (another edit), nothing is decided."""
        ...


__all__ = ["Ballot", "EditingSource", "InboxSource", "Listener"]
