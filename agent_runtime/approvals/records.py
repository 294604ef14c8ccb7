"""What the runtime remembers about one gated call, and the pure helpers around it.

An :class:`ApprovalRecord` is created when the gate pauses a call and lives in the ``gatehouse_approvals``
table. Its life: ``status`` pending → approved | denied | expired (exactly once, by whoever decides first),
and for an approved call ``exec_state`` none → started (exactly once, committed before the tool is
called, so a restart or a replayed decision never runs it twice) → done (the tool returned), with what the
result said in ``exec_outcome`` (ran, failed, unknown, not_sent: approvals/execution.py) and ``exec_error``. A call
left ``started`` was cut short (a restart, or another replica still running it): whether it took effect is not
known, and it is never run again. ``args_hash`` binds an approval to the
exact arguments it was shown with.

``redact`` (``spec.approval.redact``, fixed when the call pauses) says what of the arguments others may see:
:attr:`ApprovalRecord.shown` is what leaves the database for a broader audience (ToolApprovals, Events, REST,
the event stream, webhooks); :meth:`ApprovalRecord.action_request`, the A2A pause, goes to the task's owner and
carries the real arguments.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from agent_runtime.approvals.execution import Outcome
from agent_runtime.contract import redaction, wire
from agent_runtime.contract.agent_config import ApproversConfig, RedactConfig
from agent_runtime.contract.authority import Vote, tally, who_may_decide
from agent_runtime.contract.edits import changed_fields

# ``abandoned``: a gateway's held call whose client stopped waiting and whose lifetime ended before it ran
# (agent_runtime/gateway/held.py; ApprovalService.abandon). Final: it never runs, a vote on it is refused.
ApprovalStatus = Literal["pending", "approved", "denied", "expired", "abandoned"]
ExecState = Literal["none", "started", "done"]
Source = str  # "a2a", "timeout", later "kubernetes", "rest"


def canonical_call(tool: str, args: dict[str, Any]) -> str:
    return json.dumps({"tool": tool, "args": args}, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def args_hash(tool: str, args: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of tool + arguments."""
    return hashlib.sha256(canonical_call(tool, args).encode()).hexdigest()


# A decided request's outcome as the ``gatehouse_decisions`` metric labels it.
OUTCOME_LABEL = {"approved": "approved", "denied": "denied", "expired": "timeout"}


def iso_utc(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Resolution:
    """How one request was decided. ``status`` approved | denied | expired (expired = timed out, not run)."""

    status: ApprovalStatus
    reason: str = ""
    scope: wire.Scope = "once"

    @classmethod
    def from_verdict(cls, verdict: wire.Verdict) -> Resolution:
        if verdict.approved:
            return cls("approved", verdict.reason, verdict.scope)
        return cls("denied", verdict.reason)


@dataclass(frozen=True)
class ApprovalRecord:
    id: str
    task_id: str
    context_id: str
    confirmation_id: str
    call_id: str
    tool: str
    server: str | None
    args: dict[str, Any]
    args_hash: str
    hint: str
    created_at: float
    expires_at: float
    position: int = 0
    status: ApprovalStatus = "pending"
    scope: str = "once"
    reason: str = ""
    source: str = ""
    decided_at: float | None = None
    exec_state: ExecState = "none"
    requested_by: str = ""  # the principal whose task asked for the call ("" before requests recorded it)
    approvers: ApproversConfig | None = None  # who may decide (agent_runtime.contract.authority); None: whoever reaches it
    redact: RedactConfig | None = None  # what others do not see of the arguments; None: the built-in secret shapes
    original_args: dict[str, Any] | None = None  # the arguments the model asked for, once an approver edited ``args``
    edited_by: str = ""  # who last edited the arguments (agent_runtime.contract.edits)
    exec_outcome: Outcome | None = None  # what the approved call's result said (None: not run, or still running)
    exec_error: str = ""  # ...the error it reported, redacted (failed, unknown, not_sent)
    executed_at: float | None = None  # ...when the result came back

    @property
    def requested_args(self) -> dict[str, Any]:
        """The arguments as the model made the call (ADK resumes the call with these)."""
        return self.original_args if self.original_args is not None else self.args

    @property
    def requested_hash(self) -> str:
        return args_hash(self.tool, self.original_args) if self.original_args is not None else self.args_hash

    def edited_view(self) -> wire.Edited | None:
        if self.original_args is None:
            return None
        return wire.Edited(by=self.edited_by, original_args=self.original_args,
                           changed=list(changed_fields(self.original_args, self.args)))

    @functools.cached_property
    def shown(self) -> redaction.Redacted:
        """The arguments as approvers and viewers see them, and which paths were redacted."""
        return redaction.redact(self.args, self.redact)

    @functools.cached_property
    def requested_shown(self) -> redaction.Redacted:
        """The model's arguments as approvers and viewers see them (what a ToolApproval's spec keeps after an edit)."""
        return self.shown if self.original_args is None else redaction.redact(self.original_args, self.redact)

    def action_request(self, votes: Sequence[Vote] = (), *, editable: bool = False) -> wire.ActionRequest:
        """As the task's owner sees it in the pause: the real arguments (they wrote them); ``votes``: the counted votes
        so far (shown when the call has approvers); ``editable``: the policy lets approvers change the arguments."""
        return wire.ActionRequest(
            id=self.id, name=self.tool, args=self.args, call_id=self.call_id, hint=self.hint,
            expires_at=iso_utc(self.expires_at), approval=None, approvers=self.approvers_view(votes),
            editable=editable, edited=self.edited_view(),
        )

    def approvers_view(self, votes: Sequence[Vote] = ()) -> wire.Approvers | None:
        a = self.approvers
        if a is None:
            return None
        counted = tally(a, self.requested_by, votes)
        waiting = "" if counted.outcome != "pending" else f"{counted.progress()}; {who_may_decide(a, self.requested_by)}"
        return wire.Approvers(
            required=a.required, users=list(a.users), groups=list(a.groups), allow_requester=a.allow_requester,
            requested_by=self.requested_by, votes=[wire.VoteView(by=v.principal, vote=v.ballot, via=v.channel) for v in votes],
            waiting_for=waiting,
        )

    def describe_decision(self) -> str:
        if self.status == "pending":
            return f"{self.id} ({self.tool}) is still pending"
        when = f" at {iso_utc(self.decided_at)}" if self.decided_at else ""
        if self.status == "expired":
            return f"{self.id} ({self.tool}) timed out{when}"
        if self.status == "abandoned":
            return f"{self.id} ({self.tool}) was abandoned{when}: {self.reason or 'nobody waited for it any more'}"
        by = f" by {self.source}" if self.source else ""
        return f"{self.id} ({self.tool}) was {self.status}{by}{when}"


__all__ = [
    "OUTCOME_LABEL", "ApprovalRecord", "ApprovalStatus", "ExecState", "Resolution", "args_hash", "canonical_call", "iso_utc",
]
