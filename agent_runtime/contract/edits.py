"""Edit and approve: whether an approver may approve a paused call with changed arguments, and what then follows.

Pure: a function of the AgentConfig, the request and the proposed arguments. The policy is asked twice:

1. about the call as the model made it: only a ``require`` verdict with ``allow_edit`` (a rule's ``allowEdit``, or the
   tool in ``spec.approval.editableTools``) lets its approvers propose other arguments;
2. about the edited call, as if the model had made it: a ``deny`` refuses the edit (nothing is decided); a
   ``require`` says who decides the edited call (its approvers, which may be other people: the edit then waits for
   them); an ``allow`` keeps the request's approvers (an edit never makes a call need fewer approvals than the
   approval it is part of).

The edited arguments replace the request's arguments whole (not merged), so what is approved is exactly what an
approver saw. Votes cast before an edit were cast on other arguments and stop counting
(:meth:`~agent_runtime.approvals.service.ApprovalService.vote`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent_runtime.contract import policy
from agent_runtime.contract.agent_config import ApproversConfig


class EditRefused(ValueError):
    """An edit that the policy does not allow. ``str(exc)`` is what the approver is told."""


@dataclass(frozen=True)
class EditPlan:
    """An accepted edit: the new arguments, who decides the edited call, and what changed (for the model and audit)."""

    args: dict[str, Any]
    approvers: ApproversConfig | None
    hint: str
    changed: tuple[str, ...]


def changed_fields(before: dict[str, Any], after: dict[str, Any]) -> tuple[str, ...]:
    """The argument names whose values differ: added, removed or changed (sorted)."""
    return tuple(sorted(k for k in before.keys() | after.keys() if k not in before or k not in after or before[k] != after[k]))


def editable(config: policy.PolicySource, server: str | None, tool: str, requested_args: dict[str, Any]) -> bool:
    """Whether the call as the model made it may be approved with other arguments."""
    decision = policy.evaluate(config, server, tool, requested_args)
    return decision.verdict == "require" and decision.allow_edit


def plan(
    config: policy.PolicySource, *, server: str | None, tool: str, requested_args: dict[str, Any], current_args: dict[str, Any],
    current_approvers: ApproversConfig | None, new_args: dict[str, Any],
) -> EditPlan | None:
    """Check an edit of a pending call (``requested_args``: as the model made it; ``current_args``: as it stands, after
    earlier edits). None when ``new_args`` are the current ones (a plain approval); :class:`EditRefused` when the policy
    does not allow the edit or refuses the edited call."""
    if new_args == current_args:
        return None
    if not editable(config, server, tool, requested_args):
        raise EditRefused(
            f"This agent's policy does not let approvers change the arguments of {tool} calls (allowEdit on the rule "
            "that gates it, or the tool in spec.approval.editableTools); approve or deny the call as it is."
        )
    decision = policy.evaluate(config, server, tool, new_args)
    if decision.verdict == "deny":
        raise EditRefused(f"The edited call would be refused by policy ({decision.hint}).")
    if decision.verdict == "require":
        return EditPlan(dict(new_args), decision.approvers, decision.hint, changed_fields(requested_args, new_args))
    hint = f"edited by an approver; as requested: {policy.evaluate(config, server, tool, requested_args).hint}"
    return EditPlan(dict(new_args), current_approvers, hint, changed_fields(requested_args, new_args))


def describe(changed: tuple[str, ...], by: str, before: dict[str, Any], after: dict[str, Any]) -> str:
    """What the model is told about a call that ran with edited arguments."""
    parts = []
    for name in changed:
        if name not in after:
            parts.append(f"{name} removed (was {before[name]!r})")
        elif name not in before:
            parts.append(f"{name} added ({after[name]!r})")
        else:
            parts.append(f"{name} changed from {before[name]!r} to {after[name]!r}")
    return f"An approver ({by}) edited this call before approving it; it ran with: {'; '.join(parts)}."


__all__ = ["EditPlan", "EditRefused", "changed_fields", "describe", "editable", "plan"]
