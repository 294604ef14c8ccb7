"""Pure builders for what the runtime writes to Kubernetes: ToolApprovals, their status, Events.

No I/O here; :mod:`agent_runtime.kube.mirror` sends what these functions return. A ToolApproval's name is
derived from the agent and the request id alone (:func:`approval_name`), so the runtime can name it in the
A2A pause before the object exists.

Everything here is read by namespace viewers (ToolApprovals) or by anyone with the built-in ``view`` role (Events),
so the arguments are always the redacted ones (:attr:`~agent_runtime.approvals.records.ApprovalRecord.shown`,
``spec.approval.redact``): a ToolApproval carries them with ``argumentsHash`` (of the real arguments, which the
approval is bound to) and ``redacted`` (the paths that were replaced).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from agent_runtime.approvals import ApprovalRecord, execution, iso_utc
from agent_runtime.approvals.votes import CastVote
from agent_runtime.contract import redaction
from agent_runtime.contract.authority import tally, who_may_decide
from agent_runtime.contract.channels import CHANNELS
from agent_runtime.contract.resources import API_VERSION
from agent_runtime.contract.resources.tool_approval import (
    KIND_APPROVAL,
    KIND_HITL,
    LABEL_AGENT,
    LABEL_CONTEXT,
    LABEL_GATEWAY,
    LABEL_KIND,
)
from agent_runtime.questions.store import QuestionRecord

COMPONENT = "gatehouse.dev"
FINAL_PHASES = frozenset({"Approved", "Denied", "Expired", "Canceled", "Granted", "Orphaned"})
STATUS_FIELDS = ("phase", "summary", "decidedBy", "decidedAt", "reason", "source", "approvals", "required", "waitingFor",
                 "votes", "execution")
SUMMARY_LIMIT = 60  # characters of the arguments' summary `kubectl get toolapprovals` shows
SOURCES = frozenset(CHANNELS)

_NOT_DNS = re.compile(r"[^a-z0-9-]+")
_NOT_LABEL = re.compile(r"[^A-Za-z0-9_.-]+")


def dns_label(text: str, limit: int = 63) -> str:
    """Lower-case letters, digits and '-', starting and ending alphanumeric, at most ``limit`` characters."""
    cleaned = _NOT_DNS.sub("-", text.lower())[:limit].strip("-")
    return cleaned or "x"


def label_value(text: str) -> str:
    """A valid label value: [A-Za-z0-9_.-], at most 63 characters, alphanumeric at both ends (or empty)."""
    cleaned = _NOT_LABEL.sub("-", text)[:63]
    return re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", cleaned)


@dataclass(frozen=True)
class OwnerKind:
    """Whose runtime mirrors the requests: an Agent's, or an MCPGateway's (its held calls, docs/gateway.md), which
    names itself in ``spec.gatewayRef`` and the ``gatehouse.dev/gateway`` label instead."""

    kind: str
    plural: str
    label: str
    ref: str


AGENT = OwnerKind("Agent", "agents", LABEL_AGENT, "agentRef")
GATEWAY = OwnerKind("MCPGateway", "mcpgateways", LABEL_GATEWAY, "gatewayRef")


def approval_name(agent: str, request_id: str) -> str:
    """``<agent>-<request id without its 'apr-' prefix>``, DNS-safe and at most 63 characters."""
    suffix = dns_label(request_id.removeprefix("apr-"), 40)
    return f"{dns_label(agent, 62 - len(suffix))}-{suffix}"


def selector(agent: str, of: OwnerKind = AGENT) -> str:
    return f"{of.label}={label_value(agent)}"


def owner_reference(agent: dict[str, Any], of: OwnerKind = AGENT) -> dict[str, Any]:
    meta = agent["metadata"]
    return {"apiVersion": API_VERSION, "kind": of.kind, "name": meta["name"], "uid": meta["uid"],
            "controller": False, "blockOwnerDeletion": False}


def tool_approval(
    record: ApprovalRecord, agent: str, namespace: str, owner: dict[str, Any] | None, of: OwnerKind = AGENT,
) -> dict[str, Any]:
    """The ToolApproval for a pending request (its status is written separately: it is a subresource); the arguments
    redacted, with the real arguments' hash and the paths that were redacted. ``of``: an Agent's or a gateway's."""
    metadata: dict[str, Any] = {
        "name": approval_name(agent, record.id),
        "namespace": namespace,
        "labels": {
            of.label: label_value(agent),
            LABEL_CONTEXT: label_value(record.context_id),
            LABEL_KIND: KIND_APPROVAL,
        },
    }
    if owner is not None:
        metadata["ownerReferences"] = [owner_reference(owner, of)]
    return {
        "apiVersion": API_VERSION,
        "kind": "ToolApproval",
        "metadata": metadata,
        "spec": {
            of.ref: agent,
            "contextId": record.context_id,
            "taskId": record.task_id,
            "requestId": record.id,
            "callId": record.call_id,
            "tool": record.tool,
            "arguments": record.requested_shown.args,  # the call the model made: the request never changes (edits: status)
            "argumentsHash": record.requested_hash,
            "redacted": list(record.requested_shown.paths),
            "hint": record.hint,
            "requestedBy": record.requested_by,
            "requestedAt": iso_utc(record.created_at),
            "expiresAt": iso_utc(record.expires_at),
        },
    }


@dataclass(frozen=True)
class Ballot:
    """One vote written on a ToolApproval: an entry of ``spec.votes``, or the legacy ``spec.decision``."""

    by: str
    groups: tuple[str, ...]
    ballot: Literal["approve", "deny"]
    reason: str
    arguments: dict[str, Any] | None = None  # an approval with the call's complete new arguments (edit and approve)
    # ``onBehalfOf`` as written ({user, groups}; anything else is kept as is and refused by the watcher): a delegator's
    # vote for a human, believed only from the Agent's spec.access.delegators (delegation.relay.read). None: by's own.
    on_behalf_of: Any = None

    @property
    def key(self) -> str:
        """Who cast it, as the runtime records it (``seenAs``): ``by``, or ``<user> via <by>`` for a delegated vote, so
        a delegator may vote once per human it relays."""
        if self.on_behalf_of is None:
            return self.by
        user = self.on_behalf_of.get("user") if isinstance(self.on_behalf_of, dict) else None
        return f"{user if isinstance(user, str) else '?'} via {self.by}"


def ballots(spec: dict[str, Any]) -> list[Ballot]:
    """The votes on a ToolApproval in the order they were cast (a legacy ``decision`` first: it came before votes)."""
    found = []
    decision = spec.get("decision")
    if isinstance(decision, dict) and decision.get("decidedBy") and decision.get("action") in ("Approve", "Deny"):
        found.append(Ballot(str(decision["decidedBy"]), (), "approve" if decision["action"] == "Approve" else "deny",
                            str(decision.get("reason") or "")))
    for vote in spec.get("votes") or []:
        if isinstance(vote, dict) and vote.get("by") and vote.get("action") in ("Approve", "Deny"):
            groups = tuple(str(g) for g in vote.get("groups") or [] if isinstance(g, str))
            arguments = vote.get("arguments") if vote["action"] == "Approve" else None
            found.append(Ballot(str(vote["by"]), groups, "approve" if vote["action"] == "Approve" else "deny",
                                str(vote.get("reason") or ""), arguments if isinstance(arguments, dict) else None,
                                vote.get("onBehalfOf")))
    return found


def same_request(spec: dict[str, Any], record: ApprovalRecord) -> bool:
    """The ToolApproval still shows exactly the request the runtime wrote (nobody changed what is being approved):
    the redacted arguments, the paths redacted and the real arguments' hash; or, on a ToolApproval written before
    redaction (no ``argumentsHash``), the real arguments. Always the call the model made (an edit shows in the status)."""
    if (spec.get("requestId"), spec.get("taskId"), spec.get("tool")) != (record.id, record.task_id, record.tool):
        return False
    arguments = spec.get("arguments") or {}
    if "argumentsHash" not in spec and "redacted" not in spec:
        return bool(arguments == record.requested_args)
    shown = record.requested_shown
    return (spec.get("argumentsHash"), arguments, list(spec.get("redacted") or [])) == (
        record.requested_hash, shown.args, list(shown.paths))


def is_question(obj: dict[str, Any]) -> bool:
    """Whether a ToolApproval mirrors a ``hitl_request`` question (the kind label; the tool name as a fallback)."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels.get(LABEL_KIND) == KIND_HITL or (obj.get("spec") or {}).get("tool") == KIND_HITL


def question_approval(record: QuestionRecord, agent: str, namespace: str, owner: dict[str, Any] | None) -> dict[str, Any]:
    """The ToolApproval mirroring a ``hitl_request`` question: visible to kubectl, never decided through it."""
    args = record.args
    metadata: dict[str, Any] = {
        "name": approval_name(agent, record.id),
        "namespace": namespace,
        "labels": {
            LABEL_AGENT: label_value(agent),
            LABEL_CONTEXT: label_value(record.context_id),
            LABEL_KIND: KIND_HITL,
        },
    }
    if owner is not None:
        metadata["ownerReferences"] = [owner_reference(owner)]
    arguments: dict[str, Any] = {"question": args.question, "options": list(args.options),
                                 "requireConfirmation": args.requireConfirmation}
    if args.defaultOption is not None:
        arguments["defaultOption"] = args.defaultOption
    if args.metadata:
        arguments["metadata"] = args.metadata
    shown = redaction.redact(arguments)  # the model's question, shown to viewers: the built-in secret shapes go
    return {
        "apiVersion": API_VERSION,
        "kind": "ToolApproval",
        "metadata": metadata,
        "spec": {
            "agentRef": agent,
            "contextId": record.context_id,
            "taskId": record.task_id,
            "requestId": record.id,
            "callId": record.call_id,
            "tool": KIND_HITL,
            "arguments": shown.args,
            "redacted": list(shown.paths),
            "hint": redaction.redact_text(args.question),
            "requestedAt": iso_utc(record.created_at),
            "expiresAt": iso_utc(record.expires_at),
        },
    }


_HITL_PHASES = {"confirmed": "Approved", "canceled": "Denied", "timeout": "Expired", "error": "Denied"}


def question_status(record: QuestionRecord) -> dict[str, Any]:
    """A question's status: Pending while open; then Approved (confirmed), Denied (canceled), Expired (timeout).

    A question ended by canceling its task is Canceled, as a tool approval is. ``reason`` is the result's
    message and the selected option.
    """
    brief = summary({"question": redaction.redact_text(record.args.question)})
    if record.open or record.result is None:
        if record.stage == "confirm" and record.selected is not None:
            return {"phase": "Pending", "summary": brief, "reason": f"chose {record.selected!r}; waiting for a confirmation"}
        return {"phase": "Pending", "summary": brief}
    result = record.result
    timed_out = result.source == "timeout" or record.source == "timeout"
    current = "Canceled" if record.source == "cancel" else _HITL_PHASES.get(result.status, "Denied")
    reason = result.message
    if result.selected_option is not None:
        reason = f"{reason}; selected option: {result.selected_option}"
    out: dict[str, Any] = {
        "phase": current,
        "summary": brief,
        "source": "timeout" if timed_out else "a2a",
        "decidedBy": default_decider("timeout" if timed_out else "a2a"),
        "reason": reason,
    }
    if record.updated_at:
        out["decidedAt"] = iso_utc(record.updated_at)
    return out


def phase(record: ApprovalRecord) -> str:
    if record.status == "pending":
        return "Pending"
    if record.source == "cancel":
        return "Canceled"
    if record.source == "grant":
        return "Granted"
    return {"approved": "Approved", "denied": "Denied", "expired": "Expired", "abandoned": "Abandoned"}[record.status]


def votes_status(record: ApprovalRecord, cast: Sequence[CastVote] = ()) -> dict[str, Any]:
    """``approvals: "1/2"``, ``required``, every vote with whether it counted (and why not), the channel it came
    through and the name that channel authenticated (``seenAs``: how ``kubectl gatehouse`` finds its own vote);
    while the request is pending and has approvers, ``waitingFor``: who may still decide, in words."""
    required = record.approvers.required if record.approvers is not None else 1
    counted = tally(record.approvers, record.requested_by, [c.vote for c in cast if c.counted])
    out: dict[str, Any] = {
        "approvals": f"{len(counted.approvals)}/{required}",
        "required": required,
        "votes": [
            {"by": c.vote.principal, "action": "Approve" if c.vote.ballot == "approve" else "Deny", "counted": c.counted,
             "note": c.note, "via": c.vote.channel, "seenAs": c.vote.seen_as or c.vote.principal}
            for c in cast
        ],
    }
    if record.status == "pending" and record.approvers is not None:
        out["waitingFor"] = who_may_decide(record.approvers, record.requested_by)
    edited = record.edited_view()
    if edited is not None:
        out["edited"] = {"by": edited.by, "arguments": record.shown.args, "argumentsHash": record.args_hash,
                         "redacted": list(record.shown.paths), "changed": edited.changed}
    return out


def voters(record: ApprovalRecord, cast: Sequence[CastVote]) -> str:
    """Who decided by their votes: the approvers whose approvals counted, or the one who denied ("" if nobody voted)."""
    counted = tally(record.approvers, record.requested_by, [c.vote for c in cast if c.counted])
    return counted.decided_by if counted.denied_by is not None or record.status == "approved" else ""


def summary(arguments: dict[str, Any], limit: int = SUMMARY_LIMIT) -> str:
    """A call's (redacted) arguments in one short line for a table column: ``path=old.txt, force=true``; strings as
    they are, other values as compact JSON, cut at ``limit`` characters with an ellipsis."""
    def shown(value: Any) -> str:
        return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), ensure_ascii=False)

    text = " ".join(", ".join(f"{key}={shown(value)}" for key, value in arguments.items()).split())  # one line
    return text if len(text) <= limit else text[: limit - 1] + "…"


def status(record: ApprovalRecord, decided_by: str = "", cast: Sequence[CastVote] = ()) -> dict[str, Any]:
    """The ToolApproval's status for a record: Pending, or the outcome with who, when, why and through what; with the
    arguments' redacted summary (as approved, after an edit) for ``kubectl get``'s SUMMARY column."""
    brief = summary(record.shown.args)
    if record.status == "pending":
        return {"phase": "Pending", "summary": brief, **votes_status(record, cast)}
    out: dict[str, Any] = {"phase": phase(record), "summary": brief, **votes_status(record, cast)}
    source = "a2a" if record.source == "cancel" else record.source
    if source in SOURCES:
        out["source"] = source
    out["decidedBy"] = decided_by or default_decider(record.source)
    if record.decided_at is not None:
        out["decidedAt"] = iso_utc(record.decided_at)
    out["reason"] = record.reason
    ran = execution_status(record)
    if ran is not None:
        out["execution"] = ran
    return out


def execution_status(record: ApprovalRecord) -> dict[str, Any] | None:
    """``execution``: what became of an approved call once it ran (``outcome`` Ran, Failed, Unknown or NotSent, the
    column ``kubectl get toolapprovals`` shows), with the error it reported (redacted) and when; None before."""
    if record.exec_outcome is None:
        return None
    out: dict[str, Any] = {"outcome": execution.KUBE_NAMES[record.exec_outcome]}
    if record.exec_error:
        out["error"] = record.exec_error
    if record.executed_at is not None:
        out["at"] = iso_utc(record.executed_at)
    return out


def replacing(status: dict[str, Any]) -> dict[str, Any]:
    """The merge patch that makes a ToolApproval's status exactly ``status``: the fields it lacks are set to null
    (removed), so nothing of an earlier status lingers (a ``waitingFor`` once decided, an Orphaned ``reason``)."""
    return {**{name: None for name in STATUS_FIELDS if name not in status}, **status}


def orphaned_status(request_id: str, instance: str, now: str) -> dict[str, Any]:
    """``Orphaned``: the runtime has no record of ``request_id`` (found by pod ``instance`` at ``now``)."""
    return {
        "phase": "Orphaned",
        "decidedAt": now,
        "reason": f"the runtime has no record of request {request_id}: its state was lost (an ephemeral volume, a deleted "
                  f"database) or it belongs to another runtime; nothing will decide it (found by {instance})",
    }


def default_decider(source: str) -> str:
    """Who decided, when the channel does not say (an A2A peer is not authenticated as a person)."""
    return {"a2a": "a2a client", "timeout": "gatehouse (onTimeout)", "cancel": "a2a client (task canceled)"}.get(
        source, source or "unknown"
    )


_REASONS = {"Pending": "ApprovalRequested", "Approved": "ApprovalApproved", "Denied": "ApprovalDenied",
            "Expired": "ApprovalExpired", "Canceled": "ApprovalCanceled", "Granted": "ApprovalGranted"}


def event(
    record: ApprovalRecord, agent: dict[str, Any], instance: str, now: str, decided_by: str = "", of: OwnerKind = AGENT,
) -> dict[str, Any]:
    """A core/v1 Event on the Agent about one request: requested, approved, denied, expired or canceled."""
    meta = agent["metadata"]
    current = phase(record)
    name = approval_name(meta["name"], record.id)
    if current == "Pending":
        message = f"{_call(record)} waits for approval: toolapproval {name}"
    else:
        who = decided_by or default_decider(record.source)
        why = f": {record.reason}" if record.reason else ""
        message = f"{_call(record)} {current.lower()} by {who} via {record.source}{why} (toolapproval {name})"
    return _event(agent, of.kind, instance, now, _REASONS[current], message, "Normal",
                  "Decide" if current != "Pending" else "Request")


_EXECUTION_REASONS: dict[execution.Outcome, str] = {
    "ran": "ToolCallRan", "failed": "ToolCallFailed", "unknown": "ToolCallOutcomeUnknown", "not_sent": "ToolCallNotSent",
}


def execution_event(
    record: ApprovalRecord, agent: dict[str, Any], instance: str, now: str, of: OwnerKind = AGENT,
) -> dict[str, Any] | None:
    """A core/v1 Event on the Agent about what became of an approved call: Normal when it ran, Warning otherwise."""
    if record.exec_outcome is None:
        return None
    meta = agent["metadata"]
    name = approval_name(meta["name"], record.id)
    said = execution.describe(record.exec_outcome, record.exec_error)
    return _event(agent, of.kind, instance, now, _EXECUTION_REASONS[record.exec_outcome],
                  f"{_call(record)} was approved, then {said} (toolapproval {name})",
                  "Normal" if record.exec_outcome == "ran" else "Warning", "Execute")


def warning_event(obj: dict[str, Any], instance: str, now: str, reason: str, message: str) -> dict[str, Any]:
    """A Warning Event on a ToolApproval (``kubectl describe`` shows it): e.g. votes on it were ignored, and why."""
    return _event(obj, "ToolApproval", instance, now, reason, message, "Warning", "Vote")


def _call(record: ApprovalRecord) -> str:
    """``delete_file(path='x.txt')``, the arguments redacted: an Event is readable by the view role."""
    return f"{record.tool}({', '.join(f'{k}={v!r}' for k, v in record.shown.args.items())})"


def _event(about: dict[str, Any], kind: str, instance: str, now: str, reason: str, message: str, type_: str,
           action: str) -> dict[str, Any]:
    """A core/v1 Event on ``about`` (an Agent or a ToolApproval), from this runtime."""
    meta = about.get("metadata") or {}
    name = meta.get("name", kind.lower())
    involved = {"apiVersion": API_VERSION, "kind": kind, "name": meta.get("name", ""), "namespace": meta.get("namespace")}
    if meta.get("uid"):
        involved["uid"] = meta["uid"]
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{dns_label(name, 50)}.", "namespace": meta.get("namespace")},
        "involvedObject": involved,
        "reason": reason,
        "message": message[:1024],
        "type": type_,
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "reportingInstance": instance,
        "action": action,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }


__all__ = [
    "FINAL_PHASES",
    "Ballot",
    "approval_name",
    "ballots",
    "dns_label",
    "event",
    "execution_event",
    "execution_status",
    "is_question",
    "label_value",
    "orphaned_status",
    "owner_reference",
    "phase",
    "question_approval",
    "question_status",
    "replacing",
    "same_request",
    "selector",
    "status",
    "tool_approval",
]
