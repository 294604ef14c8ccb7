"""What travels between a parent agent and its sub-agent, and who may act on behalf of whom. Pure: no I/O.

A parent calls its sub-agent with its *own* credentials (the sub-agent sees the parent's principal) and says in the
message metadata on whose behalf it asks or decides (:data:`ON_BEHALF_OF`) and how many agents are above the
sub-agent (:data:`DEPTH`). The sub-agent believes the first only from a caller it lists as a delegator
(``spec.access.delegators``): then the human is the voter, judged against the sub-agent's own approvers (never the
parent's account, which would let a parent approve for anyone); from anyone else a decision "on behalf of" is
refused and decides nothing.

A sub-agent's pause becomes the parent's pause (:func:`nest`): the same data parts, each request marked with
``agent: {name, task_id, path}`` (``wire.Origin``), so a client shows where it comes from and a decision names the
request by its own id, which the parent forwards unchanged.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agent_runtime.contract.principals import Identities, Principal

ON_BEHALF_OF = "gatehouse/on_behalf_of"  # message metadata: {"principal": "<id>", "groups": ["..."]}
DEPTH = "gatehouse/delegation_depth"  # message metadata: how many agents are above the receiving one (1: a direct child)
REQUESTER = "gatehouse/requester"  # task metadata, kept by the sub-agent: the human its delegated task acts for
DELEGATED_VIA = "delegated"  # Principal.via of a human acting through a delegator
REQUEST_LISTS = ("action_requests", "requests", "elicitations")  # the request lists of the three kinds of pause


class DelegationRefused(ValueError):
    """A message that claims to act for someone else from a caller this agent does not trust to. ``str`` is for the
    client; nothing is decided."""


@dataclass(frozen=True)
class Delegation:
    """What a message says about the chain it came through: on whose behalf (``None``: the caller's own) and depth."""

    human: Principal | None
    depth: int


def on_behalf_metadata(principal: Principal, depth: int | None = None) -> dict[str, Any]:
    """The metadata a parent puts on every message to its sub-agent (``depth``: on a message that starts a task)."""
    metadata: dict[str, Any] = {ON_BEHALF_OF: {"principal": principal.id, "groups": sorted(principal.groups)}}
    if depth is not None:
        metadata[DEPTH] = depth
    return metadata


def read(
    metadata: Mapping[str, Any] | None, caller: Principal, delegators: Iterable[str], identities: Identities,
) -> Delegation:
    """The human a message acts for, resolved with this agent's identities, and its depth; raises
    :class:`DelegationRefused` for a malformed claim or one from a caller not in ``delegators``."""
    metadata = metadata or {}
    depth = metadata.get(DEPTH, 0)
    if isinstance(depth, float) and depth.is_integer():
        depth = int(depth)  # JSON numbers arrive as floats through protobuf Struct
    if depth is None:
        depth = 0
    if not isinstance(depth, int) or isinstance(depth, bool) or depth < 0:
        raise DelegationRefused(f"{DEPTH} must be a non-negative integer, got {depth!r}")
    claim = metadata.get(ON_BEHALF_OF)
    if claim is None:
        return Delegation(None, depth)
    if not isinstance(claim, Mapping):
        raise DelegationRefused(f"{ON_BEHALF_OF} must be an object {{principal, groups}}, got {type(claim).__name__}")
    name, groups = claim.get("principal"), claim.get("groups", [])
    if not isinstance(name, str) or not name.strip():
        raise DelegationRefused(f"{ON_BEHALF_OF}.principal must be a non-empty string")
    if not isinstance(groups, list | tuple) or not all(isinstance(g, str) for g in groups):
        raise DelegationRefused(f"{ON_BEHALF_OF}.groups must be a list of strings")
    if caller.id not in set(delegators):
        raise DelegationRefused(
            f"{caller.describe()} may not act on behalf of {name}: it is not a trusted delegator of this agent "
            "(spec.access.delegators); nothing was decided"
        )
    human = identities.resolve(name, groups, via=DELEGATED_VIA)
    return Delegation(Principal(human.id, human.groups, DELEGATED_VIA, f"{name} via {caller.id}"), depth)


def depth_problem(depth: int, cap: int) -> str:
    """Why a new task ``depth`` agents below the top may not start here (empty when it may)."""
    if depth > cap:
        return (f"This request came through {depth} agents; this agent accepts at most {cap} "
                "(spec.access.maxDelegationDepth). Nothing was run.")
    return ""


def nest(data: Mapping[str, Any], agent: str, task_id: str) -> dict[str, Any]:
    """A sub-agent's pause data part as this agent shows it: every request marked with where it comes from. A request
    the sub-agent relayed from further down keeps its origin; this agent's sub-agent is put in front of its path."""
    out = copy.deepcopy(dict(data))
    for key in REQUEST_LISTS:
        items = out.get(key)
        if not isinstance(items, list):
            continue
        for item in items:
            if not isinstance(item, dict):
                continue
            origin = item.get("agent")
            if isinstance(origin, dict) and origin.get("name"):
                known = origin.get("path")
                path: list[Any] = known if isinstance(known, list) else [origin["name"]]
                item["agent"] = {**origin, "path": [agent, *path]}
            else:
                item["agent"] = {"name": agent, "task_id": task_id, "path": [agent]}
    return out


def request_ids(data_parts: Iterable[Any]) -> list[str]:
    """The ids of the requests a pause lists (any kind)."""
    ids: list[str] = []
    for data in data_parts:
        for key in REQUEST_LISTS:
            items = data.get(key) if isinstance(data, Mapping) else None
            ids.extend(str(i["id"]) for i in items or [] if isinstance(i, Mapping) and i.get("id"))
    return ids


def earliest_expiry(data_parts: Iterable[Any]) -> float | None:
    """The earliest ``expires_at`` among a pause's requests (epoch seconds), or ``None`` when none says."""
    times = []
    for data in data_parts:
        for key in REQUEST_LISTS:
            items = data.get(key) if isinstance(data, Mapping) else None
            for item in items or []:
                raw = item.get("expires_at") if isinstance(item, Mapping) else None
                if isinstance(raw, str):
                    try:
                        times.append(datetime.fromisoformat(raw.replace("Z", "+00:00")).timestamp())
                    except ValueError:
                        continue
    return min(times) if times else None


def result_for_model(agent: str, state: str, text: str) -> dict[str, Any]:
    """What the model receives when its sub-agent's task ends in ``state`` (a2a spelling: completed, failed…)."""
    if state == "completed":
        return {"result": text or "(the sub-agent gave no reply)"}
    what = {"failed": "failed", "canceled": "was canceled", "rejected": "refused the request"}.get(state, f"ended {state}")
    return {"error": f"the sub-agent {agent} {what}: {text or 'no reason given'}"}


__all__ = [
    "DELEGATED_VIA", "DEPTH", "ON_BEHALF_OF", "REQUESTER", "REQUEST_LISTS", "Delegation", "DelegationRefused",
    "depth_problem", "earliest_expiry", "nest", "on_behalf_metadata", "read", "request_ids", "result_for_model",
]
