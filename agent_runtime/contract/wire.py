"""The public wire contract of a paused task (docs/wire-contract.md; the design in docs/design.md).

One module owns every shape that crosses A2A for approvals, and the one parser of decisions. The server,
the CLI chat client and the tests all use it, so they cannot drift apart.

Security rule of this module: :func:`parse_decision` returns approvals only for a message that names
every pending request exactly once, or approves all of them explicitly. Anything malformed, partial,
ambiguous or unknown raises :class:`DecisionError` with a message saying what was wrong and how to answer;
it never yields a partial approval.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

INTERRUPT_TOOL_APPROVAL: Final = "tool_approval"
HITL_TOOL_NAME: Final = "hitl_request"
"""The built-in tool with which the model asks the human a question; also its pause's ``interrupt_type``."""
HITL_TOOL_ALIASES = (HITL_TOOL_NAME, "human_intervention_request")
INTERRUPT_HITL: Final = HITL_TOOL_NAME
INTERRUPT_ELICITATION: Final = "elicitation"  # an MCP tool asks the user (agent_runtime/elicitations/)
RELAYED_PAUSE: Final = "delegation"
"""The status message's metadata key of a sub-agent's pause relayed by its parent (whatever its ``interrupt_type``)."""

APPROVE_WORDS = frozenset({"approve", "approved", "yes", "proceed"})
DENY_WORDS = frozenset({"deny", "denied", "reject", "no", "cancel"})

Scope = Literal["once", "session"]


class WireModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


class VoteView(WireModel):
    """One counted vote on a request."""

    by: str
    vote: Literal["approve", "deny"]
    via: str = ""  # the channel: a2a, rest, kubectl


class Approvers(WireModel):
    """Who may decide a request and how far it got: enough for a client to show "1 of 2, waiting for sre"."""

    required: int = 1
    users: list[str] = Field(default_factory=list)
    groups: list[str] = Field(default_factory=list)
    allow_requester: bool = True
    requested_by: str = ""
    votes: list[VoteView] = Field(default_factory=list)
    waiting_for: str = ""  # in words: who may still decide


class Edited(WireModel):
    """A request whose arguments an approver changed: ``args`` are now the edited ones, to be approved as such."""

    by: str
    original_args: dict[str, Any]
    changed: list[str]  # the argument names whose values differ (added, removed or changed)


class Origin(WireModel):
    """Where a relayed request comes from: a sub-agent paused inside this agent's call (``agent_runtime.delegation``).
    A decision names the request by its ``id`` as usual; the agent forwards it to the sub-agent that owns it."""

    name: str  # the agent that paused (the innermost one, at any depth)
    task_id: str  # its task, on that agent
    path: list[str] = Field(default_factory=list)  # the agents the request came through, from this agent's tool down


class ActionRequest(WireModel):
    """One gated call waiting for a decision, as the client sees it."""

    id: str
    name: str
    args: dict[str, Any]
    call_id: str
    hint: str = ""
    expires_at: str
    approval: str | None = None
    approvers: Approvers | None = None  # present when the Agent names approvers for this call
    editable: bool = False  # the policy lets an approver approve it with changed arguments (``edits``)
    edited: Edited | None = None  # an approver changed its arguments; votes from before the edit no longer count
    agent: Origin | None = None  # relayed from a sub-agent: which one, and its task (absent: this agent's own call)


class ApprovalInterrupt(WireModel):
    """The data part of an input-required status message for gated tool calls."""

    interrupt_type: Literal["tool_approval"] = INTERRUPT_TOOL_APPROVAL
    action_requests: list[ActionRequest] = Field(min_length=1)


# --- decisions (client -> server) ---------------------------------------------------------------


class GrantGlob(WireModel):
    """With ``scope: session``: the grant covers later calls whose ``argument`` (a path) matches ``glob``, instead
    of the approved call's exact arguments (``*`` stays within one path segment, ``**`` spans segments)."""

    argument: str = Field(min_length=1)
    glob: str = Field(min_length=1)


Edits = dict[str, dict[str, Any]]
"""Edit and approve: ``{"<request id>": {<the call's complete new arguments>}}`` (where the policy allows it,
``allowEdit``); the edited call is checked against the whole policy again before the approval counts."""


class ApproveAll(WireModel):
    decision_type: Literal["approve"]
    scope: Scope = "once"
    reason: str = ""
    grant: GrantGlob | None = None
    edits: Edits = Field(default_factory=dict)


class DenyAll(WireModel):
    decision_type: Literal["deny"]
    reason: str = ""


class BatchItem(WireModel):
    id: str
    decision: Literal["approve", "deny"]
    reason: str = ""
    args: dict[str, Any] | None = None  # approve with these arguments instead (edit and approve)


class Batch(WireModel):
    decision_type: Literal["batch"]
    decisions: dict[str, Literal["approve", "deny"]] | list[BatchItem]
    reasons: dict[str, str] = Field(default_factory=dict)
    scope: Scope = "once"
    grant: GrantGlob | None = None
    edits: Edits = Field(default_factory=dict)


class Answer(WireModel):
    decision_type: Literal["answer"]
    answers: dict[str, str]


class Confirm(WireModel):
    decision_type: Literal["confirm"]


class Cancel(WireModel):
    decision_type: Literal["cancel"]


DECISION_MODELS: dict[str, type[WireModel]] = {
    "approve": ApproveAll,
    "deny": DenyAll,
    "batch": Batch,
    "answer": Answer,
    "confirm": Confirm,
    "cancel": Cancel,
}

HOW_TO_ANSWER = (
    'Answer with one data part: {"decision_type": "approve"} or {"decision_type": "deny", "reason": "..."} '
    'for every pending request, or {"decision_type": "batch", "decisions": {"<id>": "approve"|"deny", ...}, '
    '"reasons": {"<id>": "..."}} naming each pending id exactly once; or the single word approve or deny.'
)


class DecisionError(ValueError):
    """A decision message that changes nothing. ``str(exc)`` is what the client is told."""

    def __init__(self, problem: str) -> None:
        self.problem = problem
        super().__init__(f"{problem} Nothing was decided; the request is still pending. {HOW_TO_ANSWER}")


@dataclass(frozen=True)
class Verdict:
    approved: bool
    reason: str = ""
    scope: Scope = "once"
    grant: GrantGlob | None = None  # with scope session: a glob over one path argument instead of the exact arguments
    args: dict[str, Any] | None = None  # approved with these arguments instead of the requested ones (edit and approve)


def _text_word(text: str) -> str:
    return text.strip().strip(".!").strip().lower()


def _json_text(text: str) -> dict[str, Any] | None:
    """A text that is, as a whole, one JSON object naming a ``decision_type``: what clients that can only send text
    send for a decision (google-adk's ``RemoteA2aAgent`` renders a function response that way). Anything else: None."""
    stripped = text.strip()
    if not stripped.startswith("{"):
        return None
    try:
        value = json.loads(stripped)
    except ValueError:
        return None
    return value if isinstance(value, dict) and "decision_type" in value else None


def parse_payload(data_parts: list[Any], text: str) -> WireModel | str:
    """Parse the shape of a decision message: a validated model, or the fallback word ``approve``/``deny``. A message
    with no data part whose whole text is a JSON decision object is read as that data part."""
    if not data_parts and (as_data := _json_text(text)) is not None:
        data_parts = [as_data]
    if len(data_parts) > 1:
        raise DecisionError(f"The message has {len(data_parts)} data parts; send exactly one.")
    if data_parts:
        data = data_parts[0]
        if not isinstance(data, dict):
            raise DecisionError("The data part is not a JSON object.")
        # kagent's hitl/v1 dialect: translated into one of our decisions, then validated below like any other.
        # Imported where it is used, so this contract module's own imports stay as they are.
        from agent_runtime.contract import kagent_hitl

        if kagent_hitl.is_payload(data):
            try:
                data = kagent_hitl.decision(data)
            except kagent_hitl.KagentError as exc:
                raise DecisionError(exc.problem) from None
        kind = data.get("decision_type")
        if not isinstance(kind, str) or kind not in DECISION_MODELS:
            raise DecisionError(
                f"Unknown decision_type {kind!r}; expected one of {', '.join(sorted(DECISION_MODELS))}."
            )
        try:
            return DECISION_MODELS[kind].model_validate(data)
        except ValidationError as exc:
            details = "; ".join(
                f"{'.'.join(str(x) for x in e['loc']) or 'message'}: {e['msg']}" for e in exc.errors()
            )
            raise DecisionError(f"Malformed {kind} decision ({details}).") from None
    word = _text_word(text)
    if word in APPROVE_WORDS:
        return "approve"
    if word in DENY_WORDS:
        return "deny"
    if not word:
        raise DecisionError("The message is empty.")
    raise DecisionError(f"Could not read a decision from the text {text.strip()[:80]!r}.")


def parse_decision(
    data_parts: list[Any], text: str, pending_ids: list[str], *, allow_session: bool
) -> dict[str, Verdict]:
    """Turn a decision message into one verdict per pending id, or raise :class:`DecisionError`."""
    if not pending_ids:
        raise DecisionError("There is no pending request on this task.")
    payload = parse_payload(data_parts, text)
    if payload == "approve":
        return {i: Verdict(True) for i in pending_ids}
    if payload == "deny":
        return {i: Verdict(False, "") for i in pending_ids}
    if isinstance(payload, ApproveAll):
        _check_scope(payload.scope, allow_session, payload.grant)
        _check_edits(payload.edits, pending_ids, payload.scope)
        return {i: Verdict(True, payload.reason, payload.scope, payload.grant, payload.edits.get(i)) for i in pending_ids}
    if isinstance(payload, DenyAll):
        return {i: Verdict(False, payload.reason) for i in pending_ids}
    if isinstance(payload, Batch):
        return _batch(payload, pending_ids, allow_session)
    kind = getattr(payload, "decision_type", payload)  # an answer, confirm or cancel (the question's payloads)
    raise DecisionError(f"A {kind!r} decision answers a hitl_request question; this task waits for a tool approval.")


def _check_scope(scope: Scope, allow_session: bool, grant: GrantGlob | None = None) -> None:
    if scope == "session" and not allow_session:
        raise DecisionError("Session grants are not allowed by this agent's policy (allowSessionGrants is false).")
    if grant is not None and scope != "session":
        raise DecisionError('A "grant" glob applies to an approval with "scope": "session" only.')


def _check_edits(edits: Edits, pending_ids: list[str], scope: Scope, denied: frozenset[str] = frozenset()) -> None:
    """The shape of edits (whether the policy allows them is the runtime's check: :mod:`agent_runtime.contract.edits`)."""
    unknown = sorted(set(edits) - set(pending_ids))
    if unknown:
        raise DecisionError(f"Edits given for unknown ids: {', '.join(unknown)}. Pending ids: {', '.join(pending_ids)}.")
    refused = sorted(set(edits) & denied)
    if refused:
        raise DecisionError(f"Edits given for denied ids: {', '.join(refused)}; an edit approves the call with new arguments.")
    if edits and scope == "session":
        raise DecisionError('An edited approval covers that one call: send it with "scope": "once".')


def _batch(batch: Batch, pending_ids: list[str], allow_session: bool) -> dict[str, Verdict]:
    edits = dict(batch.edits)
    if isinstance(batch.decisions, list):
        ids = [item.id for item in batch.decisions]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            raise DecisionError(f"Duplicate ids in decisions: {', '.join(duplicates)}.")
        decided = {item.id: (item.decision, item.reason) for item in batch.decisions}
        twice = sorted(item.id for item in batch.decisions if item.args is not None and item.id in edits)
        if twice:
            raise DecisionError(f"Arguments given twice (in decisions and in edits) for: {', '.join(twice)}.")
        edits.update({item.id: item.args for item in batch.decisions if item.args is not None})
    else:
        decided = {k: (v, "") for k, v in batch.decisions.items()}
    unknown = sorted(set(decided) - set(pending_ids))
    missing = [i for i in pending_ids if i not in decided]
    if unknown or missing:
        parts = []
        if unknown:
            parts.append(f"unknown ids: {', '.join(unknown)}")
        if missing:
            parts.append(f"missing ids: {', '.join(missing)}")
        raise DecisionError(
            f"A batch must decide every pending request exactly once ({'; '.join(parts)}). "
            f"Pending ids: {', '.join(pending_ids)}."
        )
    stray = sorted(set(batch.reasons) - set(decided))
    if stray:
        raise DecisionError(f"Reasons given for unknown ids: {', '.join(stray)}.")
    if any(d == "approve" for d, _ in decided.values()):
        _check_scope(batch.scope, allow_session, batch.grant)
    _check_edits(edits, pending_ids, batch.scope, frozenset(i for i, (d, _) in decided.items() if d == "deny"))
    out = {}
    for request_id in pending_ids:
        decision, reason = decided[request_id]
        reason = batch.reasons.get(request_id, reason)
        approved = decision == "approve"
        out[request_id] = Verdict(approved, reason, batch.scope if approved else "once", batch.grant if approved else None,
                                  edits.get(request_id))
    return out


# --- helpers for clients ------------------------------------------------------------------------


def approve_all(scope: Scope = "once") -> dict[str, Any]:
    return {"decision_type": "approve"} if scope == "once" else {"decision_type": "approve", "scope": scope}


def approve_edited(edits: dict[str, dict[str, Any]], reason: str = "") -> dict[str, Any]:
    """Approve every pending request, the ones named in ``edits`` with those arguments instead."""
    return {"decision_type": "approve", "edits": edits, **({"reason": reason} if reason else {})}


def deny_all(reason: str) -> dict[str, Any]:
    return {"decision_type": "deny", "reason": reason}


def batch(decisions: dict[str, bool], reasons: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "decision_type": "batch",
        "decisions": {k: "approve" if v else "deny" for k, v in decisions.items()},
        "reasons": dict(reasons or {}),
    }


def describe_requests(requests: list[ActionRequest]) -> str:
    """The human-readable text part that accompanies the data part of a pause."""
    lines = [f"Approval needed for {len(requests)} tool call{'s' if len(requests) != 1 else ''}:"]
    for r in requests:
        args = ", ".join(f"{k}={v!r}" for k, v in r.args.items())
        lines.append(f"- [{r.id}] {r.name}({args}) — {r.hint} (expires {r.expires_at})")
    lines.append('Reply "approve" or "deny", or send a decision data part (see the agent\'s README).')
    return "\n".join(lines)
