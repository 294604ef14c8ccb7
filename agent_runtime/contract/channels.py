"""The channels a decision can come through: one list, shared by the runtime, the ToolApproval CRD and its status.

A decision's channel is recorded with it (``source`` on the approvals table and the ToolApproval's status, the audit
log's ``channel``) and shown wherever the outcome is (``Denied by bob … (slack)``). It is derived from how the vote
arrived and who cast it — a ballot written by the configured Slack bridge (a delegator with ``channel: slack``) is
``slack``, one written by any other bridge (:mod:`agent_runtime.bridges`) or person is ``kubectl`` — never from a
field the voter writes (a REST or A2A decision naming one is refused; a ballot's is not read).
``tests/contract/test_channels.py`` checks the CRD's enum against this list.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

Channel = Literal["a2a", "rest", "kubectl", "inbox", "slack", "timeout", "grant", "cancel"]
"""a2a: an A2A message; rest: the REST API; kubectl: a ballot on a ToolApproval; inbox: the approvals inbox;
slack: a ballot the Slack bridge cast for a person; timeout, grant, cancel: the runtime itself."""

CHANNELS: Final[tuple[Channel, ...]] = get_args(Channel)

BridgeChannel = Literal["slack"]
"""The channels of bridges that cast ballots on a person's behalf, named on the bridge's delegator entry."""

BALLOT_CHANNELS: Final[frozenset[Channel]] = frozenset({"kubectl", "slack"})
"""The channels whose votes arrive as ballots on a ToolApproval (``spec.decision``)."""

__all__ = ["BALLOT_CHANNELS", "CHANNELS", "BridgeChannel", "Channel"]
