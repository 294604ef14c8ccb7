"""Tasks a parent agent delegated to this one: on whose behalf they run, and who a forwarded decision is from.

The parent authenticates as itself; what it says about the human (``relay.ON_BEHALF_OF``) counts only when it is one
of this agent's delegators (``spec.access.delegators``). The human a delegated task acts for and its depth are read
from the message that starts it and kept in the task's metadata, so every later run of the task (a resume that pauses
again) still knows who asked — separation of duties applies to the human, never to the parent's account.
"""

from __future__ import annotations

from typing import Any

from a2a.types import Message, Task
from google.protobuf.json_format import MessageToDict

from agent_runtime.contract.agent_config import AgentConfig
from agent_runtime.contract.principals import Identities, Principal
from agent_runtime.delegation import relay


def _metadata(message: Message) -> dict[str, Any]:
    return MessageToDict(message.metadata) if message.metadata.fields else {}  # most messages carry none


def start(message: Message, caller: Principal, config: AgentConfig, identities: Identities) -> dict[str, Any]:
    """The task metadata for a new task started by ``message`` (empty: not delegated); raises
    :class:`relay.DelegationRefused` with the reason a delegated task may not start here."""
    delegation = relay.read(_metadata(message), caller, config.access.delegators, identities)
    problem = relay.depth_problem(delegation.depth, config.access.max_delegation_depth)
    if problem:
        raise relay.DelegationRefused(problem)
    out: dict[str, Any] = {}
    if delegation.human is not None:
        out[relay.REQUESTER] = delegation.human.id
    if delegation.depth:
        out[relay.DEPTH] = delegation.depth
    return out


def of_task(task: Task | None) -> tuple[str, int]:
    """(the human a delegated task acts for or "", its depth) from the task's metadata."""
    if task is None or not task.metadata.fields:
        return "", 0
    metadata = MessageToDict(task.metadata)
    requester = metadata.get(relay.REQUESTER)
    depth = metadata.get(relay.DEPTH, 0)
    return (requester if isinstance(requester, str) else "",
            int(depth) if isinstance(depth, int | float) and not isinstance(depth, bool) else 0)


def voter(message: Message, caller: Principal, config: AgentConfig, identities: Identities) -> Principal:
    """Who a decision is from: the human a trusted delegator decides for, else the caller itself; raises
    :class:`relay.DelegationRefused` for a claim from anyone else."""
    delegation = relay.read(_metadata(message), caller, config.access.delegators, identities)
    return delegation.human or caller


__all__ = ["of_task", "start", "voter"]
