"""``hitl_request``: the model asks the human a question with options, optionally confirmed.

Pure parts only: the tool's argument model, the pause payload, the answer state machine and the result
the model receives. The runtime wires them into its pause/resume path. Kept apart from tool approvals on
purpose: an approval decision never answers a question and an answer never approves a tool
(:func:`apply_message` rejects approval payloads; :func:`agent_runtime.contract.wire.parse_decision` rejects answers).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from agent_runtime.contract import kagent_hitl, wire

TOOL_NAME = wire.HITL_TOOL_NAME
ALIASES = wire.HITL_TOOL_ALIASES

CONFIRM_WORDS = frozenset({"confirm", "confirmed", "yes"})
CANCEL_WORDS = frozenset({"cancel", "canceled", "cancelled", "no"})

HOW_TO_ANSWER = (
    'Answer with {"decision_type": "answer", "answers": {"<id>": "<one of the options>"}} (or the exact text '
    'of one option), or {"decision_type": "cancel"}.'
)
HOW_TO_CONFIRM = 'Answer with {"decision_type": "confirm"} or {"decision_type": "cancel"} (or the word confirm or cancel).'


class QuestionArgs(BaseModel):
    """The arguments the model may pass. Anything else (a free-text answer mode, say) is rejected."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    question: str = Field(min_length=1)
    options: list[str] = Field(min_length=1)
    # The tool's public argument names are camelCase (they are what the model sees).
    requireConfirmation: bool = False
    confirmationMessage: str | None = None
    timeoutMs: int | None = Field(default=None, gt=0)
    defaultOption: str | None = None
    metadata: dict[str, Any] | None = None

    @field_validator("question")
    @classmethod
    def _question_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("question must not be blank")
        return value

    @field_validator("options")
    @classmethod
    def _options_distinct(cls, value: list[str]) -> list[str]:
        if any(not o.strip() for o in value):
            raise ValueError("options must not be empty")
        duplicates = sorted({o for o in value if value.count(o) > 1})
        if duplicates:
            raise ValueError(f"options must be distinct; duplicated: {duplicates}")
        return value

    @model_validator(mode="after")
    def _default_is_an_option(self) -> QuestionArgs:
        if self.defaultOption is not None and self.defaultOption not in self.options:
            raise ValueError(f"defaultOption {self.defaultOption!r} is not one of the options {self.options}")
        return self


def validate_args(args: dict[str, Any]) -> QuestionArgs | str:
    """The validated arguments, or a clear validation message for the model (nothing pauses then)."""
    try:
        return QuestionArgs.model_validate(args)
    except ValidationError as exc:
        details = "; ".join(
            f"{'.'.join(str(x) for x in e['loc']) or 'arguments'}: {e['msg'].removeprefix('Value error, ')}"
            for e in exc.errors()
        )
        return f"invalid hitl_request arguments: {details}"


Stage = Literal["answer", "confirm", "done"]
QuestionStatus = Literal["confirmed", "canceled", "timeout", "error"]
Source = Literal["user", "timeout", "system"]


class QuestionResult(BaseModel):
    """What the model receives as the tool's result."""

    ok: bool
    status: QuestionStatus
    confirmed: bool
    selected_option: str | None
    source: Source
    request_id: str
    message: str


class QuestionPrompt(BaseModel):
    """One question as the client sees it in the pause's data part."""

    id: str
    question: str
    options: list[str]
    require_confirmation: bool
    confirmation_message: str | None = None
    default_option: str | None = None
    stage: Literal["answer", "confirm"]
    selected_option: str | None = None
    expires_at: str


class QuestionInterrupt(BaseModel):
    interrupt_type: Literal["hitl_request"] = wire.INTERRUPT_HITL
    requests: list[QuestionPrompt] = Field(min_length=1)


@dataclass(frozen=True)
class QuestionState:
    request_id: str
    args: QuestionArgs
    stage: Stage = "answer"
    selected: str | None = None

    def prompt(self, expires_at: str) -> QuestionPrompt:
        assert self.stage != "done"
        return QuestionPrompt(
            id=self.request_id,
            question=self.args.question,
            options=list(self.args.options),
            require_confirmation=self.args.requireConfirmation,
            confirmation_message=self.args.confirmationMessage,
            default_option=self.args.defaultOption,
            stage=self.stage,  # type: ignore[arg-type]
            selected_option=self.selected,
            expires_at=expires_at,
        )


def _result(state: QuestionState, status: QuestionStatus, source: Source, message: str, selected: str | None) -> QuestionResult:
    ok = status == "confirmed" or (status == "timeout" and selected is not None)
    return QuestionResult(
        ok=ok,
        status=status,
        confirmed=status == "confirmed",
        selected_option=selected,
        source=source,
        request_id=state.request_id,
        message=message,
    )


def apply_message(state: QuestionState, data_parts: list[Any], text: str) -> tuple[QuestionState, QuestionResult | None]:
    """Apply one user message. Returns the next state and, once finished, the result for the model.

    Raises :class:`agent_runtime.contract.wire.DecisionError`-compatible errors (``QuestionError``) that change nothing.
    """
    if state.stage == "done":
        raise QuestionError(f"hitl request {state.request_id} was already answered.", "")
    payload = _payload(data_parts, text, state)
    if isinstance(payload, wire.Cancel) or payload == "cancel":
        done = replace(state, stage="done")
        return done, _result(done, "canceled", "user", "the user canceled", None)
    if state.stage == "answer":
        option = _option(payload, state)
        if not state.args.requireConfirmation:
            done = replace(state, stage="done", selected=option)
            return done, _result(done, "confirmed", "user", f"the user chose {option!r}", option)
        return replace(state, stage="confirm", selected=option), None
    if isinstance(payload, wire.Confirm) or payload == "confirm":
        done = replace(state, stage="done")
        return done, _result(done, "confirmed", "user", f"the user confirmed {state.selected!r}", state.selected)
    raise QuestionError("Expected confirm or cancel.", HOW_TO_CONFIRM)


def on_timeout(state: QuestionState) -> QuestionResult:
    """A timeout never confirms: without confirmation the default option (if any) is taken."""
    if state.stage == "answer" and not state.args.requireConfirmation and state.args.defaultOption is not None:
        option = state.args.defaultOption
        return _result(state, "timeout", "timeout", f"no answer in time; took the default option {option!r}", option)
    return _result(state, "timeout", "timeout", "no answer in time; nothing was chosen or confirmed", None)


def describe_prompt(prompt: QuestionPrompt) -> str:
    """The human-readable text part that accompanies the :class:`QuestionInterrupt` data part of a pause."""
    if prompt.stage == "confirm":
        lines = [f"Please confirm [{prompt.id}]: {prompt.question}", f"Chosen: {prompt.selected_option}"]
        if prompt.confirmation_message:
            lines.append(prompt.confirmation_message)
        lines.append(f"(expires {prompt.expires_at}) {HOW_TO_CONFIRM}")
        return "\n".join(lines)
    lines = [f"Question [{prompt.id}]: {prompt.question}"]
    for n, option in enumerate(prompt.options, start=1):
        default = " (default on timeout)" if option == prompt.default_option and not prompt.require_confirmation else ""
        lines.append(f"  {n}) {option}{default}")
    then = " You will be asked to confirm the choice." if prompt.require_confirmation else ""
    lines.append(f"(expires {prompt.expires_at}){then} {HOW_TO_ANSWER}")
    return "\n".join(lines)


class QuestionError(wire.DecisionError):
    """An answer that changes nothing; the prompt stays."""

    def __init__(self, problem: str, how: str) -> None:
        self.problem = problem
        ValueError.__init__(self, f"{problem} Nothing changed; the question is still pending. {how}".strip())


def _payload(data_parts: list[Any], text: str, state: QuestionState) -> Any:
    how = HOW_TO_ANSWER if state.stage == "answer" else HOW_TO_CONFIRM
    if not data_parts:
        word = text.strip().strip(".!").lower()
        if state.stage == "answer" and text.strip() in state.args.options:  # an option "no" is an answer, not a cancel
            return wire.Answer(decision_type="answer", answers={state.request_id: text.strip()})
        if word in CANCEL_WORDS:
            return "cancel"
        if state.stage == "confirm" and word in CONFIRM_WORDS:
            return "confirm"
        if state.stage == "answer" and text.strip() in state.args.options:
            return wire.Answer(decision_type="answer", answers={state.request_id: text.strip()})
        raise QuestionError(f"Could not read an answer from the text {text.strip()[:80]!r}.", how)
    try:
        payload = wire.parse_payload(data_parts, "")
    except wire.DecisionError as exc:
        raise QuestionError(exc.problem, how) from None
    if isinstance(payload, wire.Answer) and kagent_hitl.is_payload(data_parts[0]):
        payload = _kagent_step(payload, state, how)
    if isinstance(payload, wire.Answer | wire.Confirm | wire.Cancel):
        if isinstance(payload, wire.Confirm) and state.stage != "confirm":
            raise QuestionError("Nothing to confirm yet: choose an option first.", how)
        if isinstance(payload, wire.Answer) and state.stage != "answer":
            raise QuestionError("An option was already chosen; confirm or cancel it.", how)
        return payload
    raise QuestionError(
        f"A {payload.decision_type!r} decision approves or denies tool calls; this task waits for an answer to a question.",  # type: ignore[union-attr]
        how,
    )


def _kagent_step(answer: wire.Answer, state: QuestionState, how: str) -> wire.Answer | wire.Confirm | wire.Cancel:
    """A kagent ask-user answer (already translated by :func:`agent_runtime.contract.wire.parse_payload`): at the confirmation
    step it must answer that step's own request (the question's id + ``/confirm``) with confirm or cancel, so an
    answer to the first step sent again never confirms."""
    if state.stage != "confirm":
        return answer
    step = state.request_id + kagent_hitl.CONFIRM_SUFFIX
    if set(answer.answers) != {step}:
        raise QuestionError(f"answers must name the pending confirmation {step} (got {sorted(answer.answers)}).", how)
    choice = answer.answers[step]
    if choice not in kagent_hitl.CONFIRM_CHOICES:
        raise QuestionError(f"{choice!r} is not one of {list(kagent_hitl.CONFIRM_CHOICES)}.", how)
    return wire.Confirm(decision_type="confirm") if choice == "confirm" else wire.Cancel(decision_type="cancel")


def _option(payload: Any, state: QuestionState) -> str:
    assert isinstance(payload, wire.Answer)
    answers = payload.answers
    if set(answers) != {state.request_id}:
        raise QuestionError(
            f"answers must name exactly the pending question {state.request_id} (got {sorted(answers)}).", HOW_TO_ANSWER
        )
    option = answers[state.request_id]
    if option not in state.args.options:
        raise QuestionError(f"{option!r} is not one of the options {state.args.options}.", HOW_TO_ANSWER)
    return option
