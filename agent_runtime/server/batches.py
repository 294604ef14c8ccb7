"""A task's pause as a batch of requests, and what a decision's sender is told about it: pure helpers of
:mod:`agent_runtime.server.executor` (and of the channels that decide one request at a time).

A batch is one model turn's gated calls, resumed as a whole (ADK needs an answer for every paused call); REST,
kubectl and the inbox decide one request at a time, so a batch may be partly decided for a while.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from a2a.helpers import get_data_parts
from a2a.types import Message

from agent_runtime.approvals import ApprovalRecord, Voted
from agent_runtime.approvals.records import OUTCOME_LABEL
from agent_runtime.contract import edits
from agent_runtime.contract.authority import who_may_decide
from agent_runtime.contract.policy import PolicySource


def plan_edits(
    config: PolicySource, pending: list[ApprovalRecord], proposed: dict[str, dict[str, Any]],
) -> dict[str, edits.EditPlan]:
    """Check each proposed edit against the policy (:func:`agent_runtime.contract.edits.plan`); raises
    :class:`~agent_runtime.contract.edits.EditRefused` naming the request. An edit equal to the current arguments is no edit."""
    by_id = {r.id: r for r in pending}
    plans = {}
    for request_id, new_args in proposed.items():
        r = by_id[request_id]
        try:
            found = edits.plan(config, server=r.server, tool=r.tool, requested_args=r.requested_args, current_args=r.args,
                               current_approvers=r.approvers, new_args=new_args)
        except edits.EditRefused as exc:
            raise edits.EditRefused(f"{request_id} ({r.tool}): {exc}") from None
        if found is not None:
            plans[request_id] = found
    return plans


def batch_after(records: list[ApprovalRecord], decided: list[ApprovalRecord]) -> list[ApprovalRecord]:
    """The task's latest batch of requests (one model turn's gated calls), with ``decided`` applied.

    A batch is resumed as a whole (ADK needs an answer for every paused call); an internal channel such as
    kubectl decides one request at a time, so the batch may be partly decided for a while.
    """
    if not records:
        return list(decided)
    latest = max(r.created_at for r in records)
    fresh = {r.id: r for r in decided}
    batch = [fresh.get(r.id, r) for r in records if r.created_at == latest]
    batch += [r for r in decided if r.id not in {b.id for b in batch}]
    return sorted(batch, key=lambda r: r.position)


def partly_decided(decided: list[ApprovalRecord], still: list[ApprovalRecord]) -> str:
    done = "; ".join(f"{r.id} ({r.tool}) {OUTCOME_LABEL[r.status]} via {r.source}" for r in decided)
    return f"Recorded: {done}. {waiting_for(still)}"


def waiting_for(still: list[ApprovalRecord]) -> str:
    waiting = ", ".join(f"{r.id} ({r.tool})" for r in still)
    return f"Still waiting for a decision on {waiting}; the task resumes once every request is decided."


def votes_text(voted: list[Voted], still: list[ApprovalRecord], edited: Collection[str] = ()) -> str:
    """What a voter is told when their votes did not finish the pause (``edited``: the requests this message edited)."""
    lines = []
    for v in voted:
        r, j = v.record, v.judgement
        if r.id in edited and r.original_args is not None and r.edited_by == j.vote.principal:
            changed = ", ".join(edits.changed_fields(r.original_args, r.args))
            lines.append(f"Edited {r.id} ({r.tool}): {changed}; votes cast before the edit no longer count.")
        if not j.counted:
            lines.append(f"Not counted: {r.id} ({r.tool}): {j.refused}.")
        elif v.decided:
            lines.append(f"{r.id} ({r.tool}) {OUTCOME_LABEL[r.status]}.")
        else:
            lines.append(f"Recorded {j.vote.principal}'s approval of {r.id} ({r.tool}): {j.tally.progress()}; "
                         f"who may decide: {who_may_decide(r.approvers, r.requested_by)}.")
    waiting = ", ".join(f"{r.id} ({r.tool})" for r in still)
    lines.append(f"Still waiting for a decision on {waiting}; the task resumes once every request is decided.")
    return " ".join(lines)


def already_decided_ids(message: Message, records: list[ApprovalRecord]) -> list[ApprovalRecord]:
    """Requests of this task that the message names but that are no longer pending (a replay)."""
    named: set[str] = set()
    for data in get_data_parts(message.parts):
        decisions = data.get("decisions") if isinstance(data, dict) else None
        if isinstance(decisions, dict):
            named.update(decisions)
        elif isinstance(decisions, list):
            named.update(d["id"] for d in decisions if isinstance(d, dict) and isinstance(d.get("id"), str))
    return [r for r in records if r.id in named and r.status != "pending"]


def with_decided_siblings(records: list[ApprovalRecord], decided: list[ApprovalRecord]) -> list[ApprovalRecord]:
    """``decided`` plus the requests of the same pause decided earlier one by one (REST, kubectl): the resumed
    turn must answer every call of that pause, in the order the model made them."""
    ids = {r.id for r in decided}
    pauses = {r.created_at for r in decided}
    earlier = [r for r in records if r.id not in ids and r.status != "pending" and r.created_at in pauses]
    return sorted([*earlier, *decided], key=lambda r: (r.created_at, r.position))


def decided_elsewhere(records: list[ApprovalRecord]) -> str:
    last = max(r.created_at for r in records)
    details = "; ".join(r.describe_decision() for r in records if r.created_at == last)
    return f"Already decided: {details}. This message decided nothing."


def decisions_metadata(decided: list[ApprovalRecord] | None) -> dict[str, Any]:
    return {
        r.id: {"tool": r.tool, "outcome": OUTCOME_LABEL[r.status], "source": r.source, "reason": r.reason, "scope": r.scope}
        for r in decided or []
    }


def timeout_note(records: list[ApprovalRecord]) -> str:
    lines = []
    for r in records:
        seconds = f"{r.expires_at - r.created_at:g}"
        if r.status == "approved":
            lines.append(f"{r.id} ({r.tool}): timeout, no decision within {seconds}s; onTimeout approve, the call ran.")
        else:
            lines.append(f"{r.id} ({r.tool}): timeout, no decision within {seconds}s; the call was not run.")
    return "\n".join(lines)


__all__ = [
    "OUTCOME_LABEL", "already_decided_ids", "batch_after", "decided_elsewhere", "decisions_metadata", "partly_decided",
    "plan_edits", "timeout_note", "votes_text", "waiting_for", "with_decided_siblings",
]
