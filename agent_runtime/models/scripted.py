"""``ScriptedLlm``: an offline, deterministic ADK model driven by regex rules (``ScriptedModel``).

One model turn is decided from the request's history alone, so the same history always gets the same answer:

1. Find the latest user *text* (a ``user`` content with a text part). Function responses do not count as text.
2. If no function response follows it, this is the start of a turn. The first rule whose ``match`` regex
   ``re.search``-es the text answers: with its ``tool_calls`` as parallel function calls in one response (string
   arguments templated with ``str.format_map`` over the regex's named groups), or, with no tool calls, with its
   templated ``reply``. No rule matches: ``no_match_reply`` or a default naming the patterns.
3. If function responses follow it and the rule has ``then`` calls not made yet (only the first round's calls were
   made), make them, templated like the first round plus ``{result}`` (the first round's results): a second step
   after the first, e.g. a question to the user once an approved call has run.
4. Otherwise the tools of this turn have run: answer with the rule's ``reply`` templated
   from the groups plus ``{result}`` (every tool result text of the turn, in call order, joined by ``"; "``) and
   ``{result_1}``, ``{result_2}``, … per call.

A template naming a group the rule does not have becomes a text reply saying so, never an exception. No clock,
no randomness: function-call ids are left empty for ADK to fill in.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

from google.adk.models import BaseLlm, LlmRequest, LlmResponse
from google.adk.models._capabilities import LlmCapabilities
from google.genai import types
from pydantic import PrivateAttr

from agent_runtime.contract.agent_config import ScriptedModel, ScriptedRule, ScriptedToolCall

__all__ = ["ScriptedLlm", "TemplateError", "render", "result_text"]

# ADK's own confirmation round trip is protocol, not a tool result of the turn (the model normally never sees it).
_PROTOCOL = frozenset({"adk_request_confirmation"})


class TemplateError(ValueError):
    """A reply or argument template that cannot be filled from the rule's groups."""


@dataclass(frozen=True)
class _Turn:
    """What the history says about the current turn."""

    text: str | None
    calls: list[types.FunctionCall]
    responses: list[types.FunctionResponse]


class ScriptedLlm(BaseLlm):
    """A ``BaseLlm`` that answers from :class:`ScriptedModel` rules; see the module docstring."""

    script: ScriptedModel
    _patterns: list[re.Pattern[str]] = PrivateAttr(default_factory=list)

    def model_post_init(self, context: Any, /) -> None:
        patterns = []
        for i, rule in enumerate(self.script.rules):
            try:
                patterns.append(re.compile(rule.match))
            except re.error as exc:
                raise ValueError(f"scripted rule {i} has an invalid match regex {rule.match!r}: {exc}") from None
        self._patterns = patterns

    @classmethod
    def from_config(cls, cfg: ScriptedModel) -> ScriptedLlm:
        return cls(model=cfg.model, script=cfg)

    @property
    def capabilities(self) -> LlmCapabilities:
        return LlmCapabilities(output_schema_and_tools=False)

    async def generate_content_async(self, llm_request: LlmRequest, stream: bool = False) -> AsyncGenerator[LlmResponse, None]:
        parts = self.respond(llm_request.contents)
        yield LlmResponse(
            content=types.Content(role="model", parts=parts),
            usage_metadata=_usage(llm_request.contents, parts),
            turn_complete=True,
        )

    # --- the decision, a pure function of the history ---------------------------------------------

    def respond(self, contents: list[types.Content]) -> list[types.Part]:
        """The parts of the model's answer to ``contents``."""
        turn = _read_turn(contents)
        if turn.text is None:
            return [_text(self.script.no_match_reply or "There is no user message to answer.")]
        found = self._match(turn.text)
        if found is None:
            if turn.responses:  # results of calls no rule made (should not happen): report them plainly
                return [_text(_join_results(turn))]
            return [_text(self._no_match(turn.text))]
        rule, groups = found
        try:
            if turn.responses:
                values = dict(groups)
                texts = _ordered_results(turn)
                values["result"] = "; ".join(texts)
                values.update({f"result_{i}": t for i, t in enumerate(texts, start=1)})
                if rule.then and len(turn.calls) <= len(rule.tool_calls):  # the second round is still to come
                    return _calls(rule.then, values, rule)
                return [_text(render(rule.reply or "{result}", values, rule))]
            if rule.tool_calls:
                return _calls(rule.tool_calls, groups, rule)
            return [_text(render(rule.reply, groups, rule) or f"(scripted rule {rule.match!r} has no reply)")]
        except TemplateError as exc:
            return [_text(str(exc))]

    def _match(self, text: str) -> tuple[ScriptedRule, dict[str, str]] | None:
        for rule, pattern in zip(self.script.rules, self._patterns, strict=True):
            m = pattern.search(text)
            if m:
                return rule, m.groupdict(default="")
        return None

    def _no_match(self, text: str) -> str:
        if self.script.no_match_reply is not None:
            return self.script.no_match_reply
        patterns = ", ".join(repr(r.match) for r in self.script.rules) or "(none)"
        return f"No scripted rule matched the message {text!r}. The rules' patterns are: {patterns}."


def render(template: str, values: dict[str, str], rule: ScriptedRule) -> str:
    """``template.format_map(values)``, or :class:`TemplateError` with a message a human can act on."""
    try:
        return template.format_map(values)
    except KeyError as exc:
        available = ", ".join(sorted(values)) or "none"
        raise TemplateError(
            f"Scripted rule {rule.match!r} cannot fill the template {template!r}: it names {{{exc.args[0]}}}, "
            f"which is not a named group of the match (available: {available})."
        ) from None
    except (ValueError, IndexError, AttributeError) as exc:
        raise TemplateError(f"Scripted rule {rule.match!r} has an invalid template {template!r}: {exc}.") from None


def _calls(calls: list[ScriptedToolCall], values: dict[str, str], rule: ScriptedRule) -> list[types.Part]:
    """One round of parallel function calls, their string arguments templated from ``values``."""
    return [types.Part(function_call=types.FunctionCall(name=c.name, args=_render_args(c.args, values, rule))) for c in calls]


def _render_args(args: dict[str, Any], groups: dict[str, str], rule: ScriptedRule) -> dict[str, Any]:
    return {k: render(v, groups, rule) if isinstance(v, str) else v for k, v in args.items()}


def result_text(response: Any) -> str:
    """The text of one tool result: MCP ``content`` texts, else ``result``, else ``error``, else compact JSON."""
    if isinstance(response, dict):
        content = response.get("content")
        if isinstance(content, list):
            texts = [c.get("text", "") for c in content if isinstance(c, dict) and c.get("type") == "text"]
            if texts:
                return "\n".join(texts)
        for key in ("result", "error"):
            if key in response and response[key] is not None:
                value = response[key]
                return value if isinstance(value, str) else _compact(value)
    return _compact(response)


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)


def _read_turn(contents: list[types.Content]) -> _Turn:
    for index in range(len(contents) - 1, -1, -1):
        content = contents[index]
        if content.role == "user" and any(p.text for p in content.parts or []):
            text = "\n".join(p.text for p in content.parts or [] if p.text)
            later = contents[index + 1 :]
            calls = [
                p.function_call for c in later for p in c.parts or [] if p.function_call and p.function_call.name not in _PROTOCOL
            ]
            responses = [
                p.function_response
                for c in later
                for p in c.parts or []
                if p.function_response and p.function_response.name not in _PROTOCOL
            ]
            return _Turn(text, calls, responses)
    return _Turn(None, [], [])


def _ordered_results(turn: _Turn) -> list[str]:
    """Result texts in the order the calls were made (responses without a matching call keep their order)."""
    by_id = {r.id: r for r in turn.responses if r.id}
    ordered: list[types.FunctionResponse] = []
    for call in turn.calls:
        if call.id and call.id in by_id:
            ordered.append(by_id.pop(call.id))
    used = {id(r) for r in ordered}
    ordered += [r for r in turn.responses if id(r) not in used]
    return [result_text(r.response) for r in ordered]


def _join_results(turn: _Turn) -> str:
    return "; ".join(_ordered_results(turn))


def _text(text: str) -> types.Part:
    return types.Part(text=text)


def _usage(contents: list[types.Content], parts: list[types.Part]) -> types.GenerateContentResponseUsageMetadata:
    """Deterministic pseudo token counts (whitespace-separated words), only so ADK has usage metadata."""
    prompt = sum(len((p.text or "").split()) for c in contents for p in c.parts or [])
    answer = sum(len((p.text or "").split()) + (1 if p.function_call else 0) for p in parts)
    return types.GenerateContentResponseUsageMetadata(
        prompt_token_count=prompt, candidates_token_count=answer, total_token_count=prompt + answer
    )
