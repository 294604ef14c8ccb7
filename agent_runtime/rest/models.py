"""The REST API's bodies: one pydantic model per shape, and the one parser for a decision body.

Server, tests and any client parse with these (``DecisionBody.parse``, ``ApprovalView.model_validate``…).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from agent_runtime.approvals import ApprovalRecord, execution, iso_utc
from agent_runtime.contract import redaction, wire
from agent_runtime.contract.authority import Vote

State = Literal["pending", "approved", "denied", "expired", "abandoned", "all"]
STATES: tuple[str, ...] = ("pending", "approved", "denied", "expired", "abandoned", "all")  # abandoned: gateways


class BodyError(ValueError):
    """A request body that cannot be used; ``str(exc)`` says exactly what is wrong."""


class ExecutionView(BaseModel):
    """What became of an approved call once it was let run (agent_runtime/approvals/execution.py): ``ran``; ``failed``
    with the ``error`` it reported (redacted like the arguments); ``unknown``, it may have reached the server; or
    ``not_sent``. ``at``: when its result came back."""

    outcome: execution.Outcome
    error: str = ""
    at: str | None = None

    @classmethod
    def of(cls, record: ApprovalRecord) -> ExecutionView | None:
        if record.exec_outcome is None:
            return None
        return cls(outcome=record.exec_outcome, error=record.exec_error,
                   at=iso_utc(record.executed_at) if record.executed_at is not None else None)


class ApprovalView(BaseModel):
    """One approval request as the REST API, the event stream and the webhooks show it: to every caller, the task's
    owner included, with the arguments redacted (``spec.approval.redact``: ``redacted`` names the paths replaced by
    ``«redacted»``) and ``args_hash``, the sha256 of the tool and the real arguments the approval is bound to. Only the
    A2A pause, which goes to the task's owner, carries the real arguments."""

    id: str
    task_id: str
    context_id: str
    tool: str
    server: str | None = None
    args: dict[str, Any]
    args_hash: str = ""
    redacted: list[str] = []
    hint: str
    status: Literal["pending", "approved", "denied", "expired", "abandoned"]
    created_at: str
    expires_at: str
    decided_by: str | None = None
    decided_at: str | None = None
    reason: str = ""
    source: str = ""
    requested_by: str = ""
    approvers: wire.Approvers | None = None  # who may decide and the votes so far, when the Agent names approvers
    edited: wire.Edited | None = None  # an approver changed the arguments (``args``); the model's, redacted alike
    execution: ExecutionView | None = None  # approved and let run: what became of the call (None: not run, or running)

    @classmethod
    def of(cls, record: ApprovalRecord, decided_by: str | None = None, votes: list[Vote] | None = None) -> ApprovalView:
        decided = record.status != "pending"
        return cls(
            id=record.id, task_id=record.task_id, context_id=record.context_id, tool=record.tool, server=record.server,
            args=record.shown.args, args_hash=record.args_hash, redacted=list(record.shown.paths), hint=record.hint,
            status=record.status, created_at=iso_utc(record.created_at),
            expires_at=iso_utc(record.expires_at), decided_by=(decided_by or record.source) if decided else None,
            decided_at=iso_utc(record.decided_at) if decided and record.decided_at else None,
            reason=record.reason, source=record.source, requested_by=record.requested_by,
            approvers=record.approvers_view(votes or []), edited=_edited(record), execution=ExecutionView.of(record),
        )


def _edited(record: ApprovalRecord) -> wire.Edited | None:
    edited = record.edited_view()
    if edited is None:
        return None
    return edited.model_copy(update={"original_args": redaction.redact(edited.original_args, record.redact).args})


class ApprovalList(BaseModel):
    approvals: list[ApprovalView]
    next_cursor: str | None = None  # more to list: ask again with ?cursor=<this> (agent_runtime/rest/paging.py)


class DecisionBody(BaseModel):
    """``POST /approvals/{id}/decision``: ``{"decision": "approve"|"deny", "reason": "…"}``; an approval may carry
    ``arguments``, the call's complete new arguments as REST shows them, where the Agent allows editing
    (agent_runtime/contract/edits.py): a field left ``«redacted»`` keeps its real value, a changed redacted field is refused."""

    model_config = ConfigDict(extra="forbid")

    decision: Literal["approve", "deny"]
    reason: str = ""
    arguments: dict[str, Any] | None = None
    args_hash: str | None = None  # the arguments' hash the caller saw (ApprovalView.args_hash): 409 if edited since

    @model_validator(mode="after")
    def _edit_approves(self) -> DecisionBody:
        if self.arguments is not None and self.decision != "approve":
            raise ValueError("arguments (an edit) go with decision approve only")
        return self

    @classmethod
    def parse(cls, raw: bytes) -> DecisionBody:
        try:
            data = json.loads(raw or b"null")
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise BodyError(f"the body is not JSON ({exc}); send {_EXAMPLE}") from None
        if not isinstance(data, dict):
            raise BodyError(f"the body must be a JSON object like {_EXAMPLE}")
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors())
            raise BodyError(f"{problems}; send {_EXAMPLE}") from None

    def fingerprint(self, request_id: str) -> str:
        """What an idempotency key is bound to: this request id and this decision."""
        # exclude_none: a body without arguments keeps the fingerprint it had before edits existed (stored keys)
        canonical = json.dumps({"id": request_id, **self.model_dump(exclude_none=True)}, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()


_EXAMPLE = '{"decision": "approve"|"deny", "reason": "…"}'


class DecisionResult(BaseModel):
    """200: this vote decided the request (durably; the task runs on once none of its requests is pending).
    202: the vote was recorded and counts, but more approvals are needed (``approval.approvers`` shows how many)."""

    applied: bool = True  # the request is decided now
    counted: bool = True
    message: str = ""
    approval: ApprovalView


class ProblemDetails(BaseModel):
    """Every 4xx answer. On 409 ``approval`` shows who decided what; on 403 (a vote that does not count) ``error``
    names who may decide."""

    error: str
    approval: ApprovalView | None = None


class ApprovalEventData(BaseModel):
    """The JSON of one server-sent event and of one webhook delivery (format ``json``)."""

    event: Literal["requested", "decided"]
    agent: str
    approval: ApprovalView


class StreamReset(BaseModel):
    """The JSON of ``event: reset``: the stream cannot resume from the client's ``Last-Event-ID``; list again."""

    event: Literal["reset"] = "reset"
    agent: str
    reason: str


__all__ = [
    "STATES", "ApprovalEventData", "ApprovalList", "ApprovalView", "BodyError", "DecisionBody", "DecisionResult",
    "ExecutionView", "ProblemDetails", "State", "StreamReset",
]
