"""Pure shapes of an MCP elicitation pause: what the tool asked, what the client answers, and the one parser.

What a tool may ask (:func:`plan_round`): form-mode ``elicitation/create`` requests whose ``requestedSchema`` is the
flat object of primitive fields the MCP specification allows. URL-mode requests are not supported yet: the runtime
declines them itself and tells the model. Any other input request (``sampling/createMessage``, ``roots/list``: this
runtime never declares them) ends the call with an error; nothing is retried.

How the client answers (:func:`parse_answer`): one data part mirroring MCP's ``ElicitResult`` per question, checked
strictly against the question's schema (``true`` is not ``"yes"``); decline and cancel carry no content. Anything
else changes nothing. An approval decision never answers a tool's question, and this answer never approves a tool.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import SchemaError
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from agent_runtime.contract import wire

INTERRUPT = wire.INTERRUPT_ELICITATION
DECISION_TYPE = "elicitation_response"
ELICIT_METHOD = "elicitation/create"
DECLINE_WORDS = frozenset({"decline", "declined"})
CANCEL_WORDS = frozenset({"cancel", "canceled", "cancelled"})
PRIMITIVE_TYPES = frozenset({"string", "number", "integer", "boolean"})
HOW_TO_ANSWER = (
    'Answer with one data part {"decision_type": "elicitation_response", "action": "accept", "content": {…}} '
    '(fields as the schema asks), or {"decision_type": "elicitation_response", "action": "decline"} or "cancel" '
    '(or the word decline or cancel).'
)

Primitive = str | int | float | bool | list[str] | None


class ElicitationError(ValueError):
    """An answer that cannot be applied; ``str(exc)`` is what the client is told (nothing changed)."""

    def __init__(self, problem: str) -> None:
        super().__init__(f"{problem} Nothing was answered; the tool's question is still open. {HOW_TO_ANSWER}")


class FormRequest(BaseModel):
    """One question of the tool: MCP's form-mode ``ElicitRequestFormParams``."""

    model_config = ConfigDict(frozen=True)

    mode: Literal["form"] = "form"
    message: str
    requested_schema: dict[str, Any]


class ElicitationPrompt(BaseModel):
    """One paused call's questions, as the pause's data part lists them."""

    id: str
    call_id: str
    tool: str
    server: str | None
    requests: dict[str, FormRequest]
    round: int = 1
    expires_at: str


class ElicitationInterrupt(BaseModel):
    interrupt_type: Literal["elicitation"] = "elicitation"
    elicitations: list[ElicitationPrompt]


class Answer(BaseModel):
    """MCP's ``ElicitResult`` for one question: content only with accept."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Primitive] | None = None

    @model_validator(mode="after")
    def _content_only_with_accept(self) -> Answer:
        if self.action == "accept" and self.content is None:
            raise ValueError("accept needs content (an object with the fields the schema asks for)")
        if self.action != "accept" and self.content is not None:
            raise ValueError(f"{self.action} carries no content")
        return self


@dataclass(frozen=True)
class RoundPlan:
    """What the runtime makes of a tool's ``inputRequests``: the questions to show, the answers it gives itself."""

    form: dict[str, FormRequest] = field(default_factory=dict)
    preset: dict[str, dict[str, Any]] = field(default_factory=dict)  # key -> ElicitResult JSON (URL mode declined)
    note: str = ""  # for the model: what the runtime answered itself
    problem: str = ""  # the call cannot go on (an input request this runtime does not provide, a bad schema)


def schema_problem(schema: Any) -> str:
    """Why ``schema`` is not a requestedSchema the MCP specification allows (flat object, primitive fields), or ""."""
    if not isinstance(schema, dict) or schema.get("type") != "object" or not isinstance(schema.get("properties"), dict):
        return "the requestedSchema is not an object schema with properties"
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        return f"the requestedSchema is not a valid JSON schema ({exc.message})"
    for name, prop in schema["properties"].items():
        kind = prop.get("type") if isinstance(prop, dict) else None
        items = prop.get("items") if isinstance(prop, dict) else None
        if kind in PRIMITIVE_TYPES or (kind == "array" and isinstance(items, dict) and _string_items(items)):
            continue
        return f"field {name!r} of the requestedSchema is not a primitive (string, number, integer, boolean, string list)"
    return ""


def _string_items(items: dict[str, Any]) -> bool:
    if items.get("type") == "string":
        return True
    options = items.get("anyOf") or items.get("oneOf")
    return isinstance(options, list) and bool(options) and all(isinstance(o, dict) and "const" in o for o in options)


def plan_round(input_requests: dict[str, Any]) -> RoundPlan:
    """Sort a tool's ``inputRequests`` (wire JSON, camelCase) into questions for the human and the runtime's own answers."""
    form: dict[str, FormRequest] = {}
    preset: dict[str, dict[str, Any]] = {}
    urls: list[str] = []
    for key, request in input_requests.items():
        method = request.get("method") if isinstance(request, dict) else None
        if method != ELICIT_METHOD:
            return RoundPlan(problem=f"the tool asked for {method or 'an unknown input'}, which this runtime does not provide")
        params = request.get("params") or {}
        mode = params.get("mode", "form")
        if mode == "url":
            preset[key] = {"action": "decline"}  # not supported yet: declined, never shown as a link to follow
            urls.append(str(params.get("url", "")))
            continue
        problem = schema_problem(params.get("requestedSchema")) if mode == "form" else f"unknown elicitation mode {mode!r}"
        if problem:
            return RoundPlan(problem=f"the tool's question {key!r} cannot be asked: {problem}")
        form[key] = FormRequest(message=str(params.get("message", "")), requested_schema=params["requestedSchema"])
    note = ""
    if urls:
        note = (f"The tool asked the user to open {', '.join(urls)} (URL-mode elicitation); this runtime does not support "
                "that yet, so it was declined without asking.")
    return RoundPlan(form=form, preset=preset, note=note)


def parse_answer(data_parts: list[Any], text: str, prompt: ElicitationPrompt) -> dict[str, dict[str, Any]]:
    """The client's answer to ``prompt``: ``{key: ElicitResult JSON}`` for every question, or :class:`ElicitationError`."""
    keys = list(prompt.requests)
    if len(data_parts) > 1:
        raise ElicitationError(f"The message has {len(data_parts)} data parts; send exactly one.")
    if not data_parts:
        word = text.strip().strip(".!").lower()
        if word in DECLINE_WORDS | CANCEL_WORDS:
            action = "decline" if word in DECLINE_WORDS else "cancel"
            return {key: {"action": action} for key in keys}
        raise ElicitationError("This task waits for an answer to a tool's question." if not word else
                               f"Could not read an answer from the text {text.strip()[:80]!r}.")
    data = data_parts[0]
    kind = data.get("decision_type") if isinstance(data, dict) else None
    if kind != DECISION_TYPE:
        raise ElicitationError(f"This task waits for an answer to {prompt.tool}'s question ({prompt.id}), not for "
                               f"decision_type {kind!r}: an approval or another answer never answers it.")
    assert isinstance(data, dict)
    raw = _answers_of(data, prompt)
    answers: dict[str, dict[str, Any]] = {}
    for key in keys:
        try:
            answer = Answer.model_validate(raw[key])
        except ValidationError as exc:
            details = "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())
            raise ElicitationError(f"The answer to {key!r} is malformed ({details}).") from None
        if answer.content is not None:
            _check_content(key, answer.content, prompt.requests[key].requested_schema)
        answers[key] = answer.model_dump(exclude_none=True)
    return answers


def _answers_of(data: dict[str, Any], prompt: ElicitationPrompt) -> dict[str, Any]:
    keys = list(prompt.requests)
    if "responses" in data:
        extra = sorted(set(data) - {"decision_type", "responses"})
        responses = data["responses"]
        if extra or not isinstance(responses, dict) or set(responses) != {prompt.id}:
            named = sorted(responses) if isinstance(responses, dict) else responses
            raise ElicitationError(f"responses must name exactly the open question {prompt.id} (got {named}"
                                   f"{'; unknown fields ' + ', '.join(extra) if extra else ''}).")
        by_key = responses[prompt.id]
        if not isinstance(by_key, dict) or set(by_key) != set(keys):
            got = sorted(by_key) if isinstance(by_key, dict) else by_key
            raise ElicitationError(f"Answer every question of {prompt.id} exactly once: {keys} (got {got}).")
        return by_key
    if len(keys) != 1:
        raise ElicitationError(f"{prompt.id} asks {len(keys)} questions; answer them with responses: {{{prompt.id!r}: …}}.")
    return {keys[0]: {k: v for k, v in data.items() if k != "decision_type"}}


def _check_content(key: str, content: dict[str, Any], schema: dict[str, Any]) -> None:
    """Strict: exactly the schema's fields (no others), each of the declared JSON type (no coercion)."""
    unknown = sorted(set(content) - set(schema.get("properties", {})))
    if unknown:
        raise ElicitationError(f"The answer to {key!r} has fields the tool did not ask for: {', '.join(unknown)}.")
    errors = sorted(Draft202012Validator(schema, format_checker=FormatChecker()).iter_errors(content), key=str)
    if errors:
        details = "; ".join(f"{'.'.join(str(p) for p in e.absolute_path) or 'content'}: {e.message}" for e in errors[:3])
        raise ElicitationError(f"The answer to {key!r} does not match the tool's schema ({details}).")


def describe_prompt(prompt: ElicitationPrompt) -> str:
    lines = [f"The tool {prompt.tool} asks (request {prompt.id}, expires {prompt.expires_at}):"]
    for key, request in prompt.requests.items():
        fields = ", ".join(
            f"{name} ({spec.get('type', '?')}{', required' if name in request.requested_schema.get('required', []) else ''})"
            for name, spec in request.requested_schema.get("properties", {}).items()
        )
        label = "" if len(prompt.requests) == 1 else f"[{key}] "
        lines.append(f"- {label}{request.message} — fields: {fields or 'none'}")
    lines.append(HOW_TO_ANSWER)
    return "\n".join(lines)


@dataclass(frozen=True)
class ToolRound:
    """What one call of the tool came back with: its final result (ADK's dict of an MCP ``CallToolResult``), or
    questions for the human (form mode; the runtime's own answers in ``preset``) with the server's state."""

    result: dict[str, Any] | None = None
    questions: dict[str, FormRequest] | None = None
    preset: dict[str, dict[str, Any]] = field(default_factory=dict)
    request_state: str | None = None
    note: str = ""


def with_note(result: dict[str, Any], note: str) -> dict[str, Any]:
    """``result`` with ``note`` added where a model reads it (one more text item of an MCP result's ``content``)."""
    if not note:
        return result
    if isinstance(result.get("content"), list):
        return {**result, "content": [*result["content"], {"type": "text", "text": note}]}
    return {**result, "gatehouse_note": note}


def timeout_result(tool: str, seconds: float) -> dict[str, str]:
    return {"error": f"timeout: no answer to {tool}'s question within {seconds:g}s; the call was not completed"}


def failed_result(problem: str) -> dict[str, str]:
    return {"error": f"not completed: {problem}"}


__all__ = [
    "DECISION_TYPE", "INTERRUPT", "Answer", "ElicitationError", "ElicitationInterrupt", "ElicitationPrompt", "FormRequest",
    "RoundPlan", "ToolRound", "describe_prompt", "failed_result", "parse_answer", "plan_round", "schema_problem",
    "timeout_result", "with_note",
]
