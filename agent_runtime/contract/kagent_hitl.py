"""kagent's human-in-the-loop A2A extension, ``hitl/v1``, spoken alongside Gatehouse's own payloads.

Written from kagent's published description of the extension (``docs/architecture/human-in-the-loop.md`` in
kagent-dev/kagent and the kagent.dev "Human in the loop" page) with its Go and Python type definitions read as a
specification; what we send and accept is in docs/wire-contract.md ("kagent hitl/v1").

Pure: the shapes and two translations, nothing else.

- Out: a pause is described a second time in kagent's shape (:func:`tool_approval_request`,
  :func:`ask_user_request`), which the runtime puts in the status message's metadata under :data:`URI`; a sub-agent's
  pause relayed by this agent carries kagent's ``nested`` field (:func:`nested_request`).
- In: a kagent decision is translated into the *data* of one of our own decisions (:func:`decision`), which
  :func:`agent_runtime.contract.wire.parse_payload` then validates like any other. So there is still one parser, and its
  security rule (partial, malformed or ambiguous never approves) holds for kagent's dialect unchanged: every
  id must be decided exactly once (``_batch`` checks unknown, missing and duplicate ids), ``approved`` must be a
  JSON boolean, and a reason on an approval is refused as contradictory.

This module imports nothing of the runtime (``wire`` imports it), so the two never form a cycle.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError

URI: Final = "https://kagent.dev/extensions/hitl/v1"
"""The extension's URI: the agent card declares it, a message lists it in ``extensions`` and keys its payload by it."""
DESCRIPTION: Final = "kagent human-in-the-loop: tool approval and ask-user payloads, alongside Gatehouse's own"

TOOL_APPROVAL_REQUEST: Final = "tool_approval_request"
ASK_USER_REQUEST: Final = "ask_user_request"
TOOL_APPROVAL_RESPONSE: Final = "tool_approval_response"
ASK_USER_RESPONSE: Final = "ask_user_response"

CONFIRM_SUFFIX: Final = "/confirm"
"""The confirmation step of a ``hitl_request`` is a second ask-user request; a fresh id (the question's id with this
suffix) keeps a kagent client from taking it for the question it already answered."""
CONFIRM_CHOICES: Final = ("confirm", "cancel")


class KagentError(ValueError):
    """A kagent payload that decides nothing; ``problem`` says what was wrong."""

    def __init__(self, problem: str) -> None:
        self.problem = problem
        super().__init__(problem)


class _Shape(BaseModel):
    # A field we do not know could change the meaning of a decision: refuse it rather than guess.
    model_config = ConfigDict(extra="forbid")


_M = TypeVar("_M", bound=_Shape)


class HitlTool(_Shape):
    """One pending call: ``id`` is the opaque correlation a decision returns; ``call_id`` the model's call id."""

    id: str = Field(min_length=1)
    call_id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    args: dict[str, Any] = Field(default_factory=dict)


class Nested(_Shape):
    """A sub-agent's pause inside this agent's call: which sub-agent, its task, and the calls (or the question) the
    human actually decides. A kagent client shows ``tools`` and answers with *their* ids, which the parent forwards
    to the sub-agent's task (at any depth, ``tools`` are the innermost ones)."""

    subagent_name: str | None = None
    task_id: str | None = None
    context_id: str | None = None
    tools: list[HitlTool] = Field(min_length=1)


class ToolApprovalRequest(_Shape):
    type: Literal["tool_approval_request"] = TOOL_APPROVAL_REQUEST
    hint: str | None = None
    tools: list[HitlTool] = Field(min_length=1)
    nested: Nested | None = None


class Question(_Shape):
    question: str
    choices: list[str]
    multiple: bool = False


class AskUserRequest(_Shape):
    type: Literal["ask_user_request"] = ASK_USER_REQUEST
    id: str = Field(min_length=1)
    questions: list[Question] = Field(min_length=1)
    nested: Nested | None = None


class _RelayedAskUser(_Shape):
    """A sub-agent's ask-user request as kagent defines it: its questions kept as sent (a kagent agent's may carry
    fields ours do not), relayed, not interpreted."""

    type: Literal["ask_user_request"]
    id: str = Field(min_length=1)
    questions: list[dict[str, Any]]
    nested: Nested | None = None


class _RelayedAskUserOut(_RelayedAskUser):
    type: Literal["ask_user_request"] = ASK_USER_REQUEST


class ToolApproval(_Shape):
    id: str = Field(min_length=1)
    approved: StrictBool  # "true", 1 or "yes" is not an approval
    rejection_reason: str | None = None


class ToolApprovalResponse(_Shape):
    type: Literal["tool_approval_response"]
    approvals: list[ToolApproval] = Field(min_length=1)


class AskUserAnswer(_Shape):
    answer: list[str]


class AskUserResponse(_Shape):
    type: Literal["ask_user_response"]
    id: str = Field(min_length=1)
    answers: list[AskUserAnswer] | None = None


# --- out: a pause in kagent's shape ----------------------------------------------------------------


class PendingCall(Protocol):
    """What a request needs of one gated call (:class:`agent_runtime.contract.wire.ActionRequest` has it)."""

    @property
    def id(self) -> str: ...
    @property
    def call_id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def args(self) -> dict[str, Any]: ...
    @property
    def hint(self) -> str: ...


class QuestionPrompt(Protocol):
    """What a request needs of one question (:class:`agent_runtime.questions.question_wire.QuestionPrompt` has it)."""

    @property
    def id(self) -> str: ...
    @property
    def question(self) -> str: ...
    @property
    def options(self) -> list[str]: ...
    @property
    def stage(self) -> str: ...
    @property
    def selected_option(self) -> str | None: ...
    @property
    def confirmation_message(self) -> str | None: ...


def hint(calls: Sequence[PendingCall]) -> str:
    """The pause in one line, composed as kagent's documentation says every runtime composes it: the hints the
    calls supplied followed by the tool names in parentheses, or, with no hints, the tool names alone."""
    names = ", ".join(dict.fromkeys(c.name for c in calls))
    hints = "; ".join(dict.fromkeys(c.hint for c in calls if c.hint))
    return f"{hints} ({names})" if hints else f"Approval is required for tool(s): {names}"


def tool_approval_request(calls: Sequence[PendingCall]) -> dict[str, Any]:
    """The ``tool_approval_request`` for the pending calls of one pause; each tool's ``id`` is our request id, so a
    kagent decision names exactly the ids our own decisions name."""
    tools = [HitlTool(id=c.id, call_id=c.call_id, name=c.name, args=dict(c.args)) for c in calls]
    return ToolApprovalRequest(hint=hint(calls), tools=tools).model_dump(mode="json", exclude_none=True)


def ask_user_request(prompt: QuestionPrompt) -> dict[str, Any]:
    """The ``ask_user_request`` for a ``hitl_request`` question: its options as single-choice ``choices``; at the
    confirmation step a second request (id + :data:`CONFIRM_SUFFIX`) whose choices are confirm and cancel."""
    if prompt.stage == "confirm":
        text = f"Confirm {prompt.selected_option!r}? {prompt.question}"
        if prompt.confirmation_message:
            text += f" ({prompt.confirmation_message})"
        question = Question(question=text, choices=list(CONFIRM_CHOICES))
        return AskUserRequest(id=prompt.id + CONFIRM_SUFFIX, questions=[question]).model_dump(mode="json", exclude_none=True)
    question = Question(question=prompt.question, choices=list(prompt.options))
    return AskUserRequest(id=prompt.id, questions=[question]).model_dump(mode="json", exclude_none=True)


class DelegatedCall(Protocol):
    """The call of this agent that a sub-agent's pause holds (:class:`agent_runtime.delegation.store.DelegationRecord`
    has it): ``id`` is the pause's id here, ``tool`` the name the model called, ``agent`` the sub-agent."""

    @property
    def id(self) -> str: ...
    @property
    def call_id(self) -> str: ...
    @property
    def tool(self) -> str: ...
    @property
    def args(self) -> dict[str, Any]: ...
    @property
    def agent(self) -> str: ...
    @property
    def child_task_id(self) -> str: ...
    @property
    def child_context_id(self) -> str: ...


def nested_request(call: DelegatedCall, child: Mapping[str, Any]) -> dict[str, Any] | None:
    """This agent's pause in kagent's shape when a sub-agent paused inside ``call``, from the sub-agent's own hitl/v1
    request ``child``: the top-level ``tools`` (or ask-user ``id``) name this agent's call, and ``nested`` says which
    sub-agent, its task and context, and what the human decides: the sub-agent's visible tools (its own ``nested``
    tools when it relays a pause in turn). None when ``child`` is no request kagent defines (nothing is relayed that
    a kagent client could misread)."""
    try:
        if child.get("type") == ASK_USER_REQUEST:
            asked = _RelayedAskUser.model_validate(child)
            visible = asked.nested.tools if asked.nested is not None else [
                HitlTool(id=asked.id, call_id=asked.id, name="ask_user", args={"questions": asked.questions})]
            nested = Nested(subagent_name=call.agent, task_id=call.child_task_id, context_id=call.child_context_id,
                            tools=visible)
            return _RelayedAskUserOut(id=call.id, questions=asked.questions, nested=nested).model_dump(
                mode="json", exclude_none=True)
        approval = ToolApprovalRequest.model_validate(child)
    except ValidationError:
        return None
    visible = approval.nested.tools if approval.nested is not None else approval.tools
    nested = Nested(subagent_name=call.agent, task_id=call.child_task_id, context_id=call.child_context_id,
                    tools=visible)
    names = ", ".join(dict.fromkeys(t.name for t in visible))
    request = ToolApprovalRequest(
        hint=approval.hint or f"Sub-agent {call.agent} requires approval for tool(s): {names}",
        tools=[HitlTool(id=call.id, call_id=call.call_id, name=call.tool, args=dict(call.args))], nested=nested)
    return request.model_dump(mode="json", exclude_none=True)


# --- in: a decision in kagent's shape ------------------------------------------------------------


def is_payload(data: Any) -> bool:
    """Whether a data part is kagent's (it names a ``type``) rather than ours (a ``decision_type``)."""
    return isinstance(data, Mapping) and "type" in data and "decision_type" not in data


def payload_of(extensions: Sequence[str], metadata: Mapping[str, Any]) -> dict[str, Any] | None:
    """The hitl/v1 payload a message's metadata carries under :data:`URI`, or None when it carries none.

    A payload the message does not declare in ``extensions``, or one with no ``type``, raises :class:`KagentError`
    (kagent's servers ignore such a payload; ignoring it here would let the message's text part, e.g. "Approved",
    be read as a decision instead)."""
    if URI not in metadata:
        return None
    payload = metadata[URI]
    if URI not in extensions:
        raise KagentError(f"The message carries a payload under {URI} but does not list that URI in its extensions.")
    if not isinstance(payload, dict) or not isinstance(payload.get("type"), str):
        raise KagentError(f"The payload under {URI} is not a JSON object with a \"type\".")
    return payload


def decision(data: Mapping[str, Any]) -> dict[str, Any]:
    """Translate a kagent response into the data of one of our decisions (``batch`` or ``answer``), or raise
    :class:`KagentError`. Whether it decides every pending id exactly once is the caller's check, as for ours."""
    kind = data.get("type")
    if kind == TOOL_APPROVAL_RESPONSE:
        return _approvals(_validate(ToolApprovalResponse, data))
    if kind == ASK_USER_RESPONSE:
        return _answer(_validate(AskUserResponse, data))
    if kind in (TOOL_APPROVAL_REQUEST, ASK_USER_REQUEST):
        raise KagentError(f"A {kind} is what the agent sends; answer it with a {kind.replace('request', 'response')}.")
    raise KagentError(f"Unknown hitl/v1 type {kind!r}; expected {TOOL_APPROVAL_RESPONSE} or {ASK_USER_RESPONSE}.")


def _validate(model: type[_M], data: Mapping[str, Any]) -> _M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        details = "; ".join(f"{'.'.join(str(x) for x in e['loc']) or 'payload'}: {e['msg']}" for e in exc.errors())
        raise KagentError(f"Malformed hitl/v1 {data.get('type')} ({details}).") from None


def _approvals(response: ToolApprovalResponse) -> dict[str, Any]:
    contradictory = [a.id for a in response.approvals if a.approved and a.rejection_reason]
    if contradictory:
        raise KagentError(f"An approval cannot carry a rejection_reason (ids: {', '.join(contradictory)}).")
    items = [
        {"id": a.id, "decision": "approve" if a.approved else "deny", "reason": a.rejection_reason or ""}
        for a in response.approvals
    ]
    return {"decision_type": "batch", "decisions": items}


def _answer(response: AskUserResponse) -> dict[str, Any]:
    # A hitl_request asks one question with one choice: exactly one answer holding exactly one value.
    answers = response.answers or []
    if len(answers) != 1 or len(answers[0].answer) != 1:
        got = [a.answer for a in answers]
        raise KagentError(f"A hitl_request question takes exactly one answer with one choice (got {got}).")
    return {"decision_type": "answer", "answers": {response.id: answers[0].answer[0]}}


__all__ = [
    "ASK_USER_REQUEST",
    "ASK_USER_RESPONSE",
    "CONFIRM_CHOICES",
    "CONFIRM_SUFFIX",
    "DESCRIPTION",
    "TOOL_APPROVAL_REQUEST",
    "TOOL_APPROVAL_RESPONSE",
    "URI",
    "KagentError",
    "ask_user_request",
    "decision",
    "hint",
    "is_payload",
    "nested_request",
    "payload_of",
    "tool_approval_request",
]
