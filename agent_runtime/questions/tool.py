"""The built-in ``hitl_request`` tool (alias ``human_intervention_request``): the model asks the human.

It pauses through the same ADK mechanism as the approval gate (``tool_context.request_confirmation``), but
it is its own tool with its own table, so the two never mix:

    model calls hitl_request(args)
      ├─ invalid args (question_wire.validate_args) ─► QuestionResult status "error", nothing pauses
      ├─ gated calls in the same model turn, or a second question ─► status "error", nothing pauses
      └─ valid ─► request_confirmation; the run ends; :class:`QuestionRecorder` stores the question
                  (``gatehouse_hitl``) before the client is told; the executor reports the pause
    … human answers (questions/flow.py) …
    resume: ADK re-runs this call with ``tool_confirmation.payload = {"hitl_result": …}``, built by the runtime
    from the stored result, never from client input ─► the model receives that QuestionResult.

The gate never gates this tool (it subclasses :class:`~agent_runtime.runs.run_scope.HumanTool`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import Any

from google.adk.tools.tool_context import ToolContext
from google.genai import types
from prometheus_client import Counter

from agent_runtime.questions import question_wire
from agent_runtime.questions.store import QuestionRecord, QuestionStore
from agent_runtime.runs.run_scope import CURRENT_RUN, HumanTool, PendingQuestion, RunScope
from agent_runtime.telemetry.metrics import Metrics

DESCRIPTION = (
    "Ask the human a question and wait for the answer. The human picks exactly one of `options`. With "
    "requireConfirmation the human must then confirm or cancel the choice. The result is JSON: "
    "{ok, status: confirmed|canceled|timeout|error, confirmed, selected_option, source: user|timeout|system, "
    "request_id, message}. Treat anything but status 'confirmed' as: the human did not agree."
)
PLACEHOLDER = {"status": "waiting for the human's answer"}


def declaration(name: str) -> types.FunctionDeclaration:
    """What the model sees: the camelCase arguments of :class:`agent_runtime.questions.question_wire.QuestionArgs`."""
    string = types.Type.STRING
    return types.FunctionDeclaration(
        name=name,
        description=DESCRIPTION,
        parameters=types.Schema(
            type=types.Type.OBJECT,
            properties={
                "question": types.Schema(type=string, description="The question, in full."),
                "options": types.Schema(
                    type=types.Type.ARRAY, items=types.Schema(type=string), min_items=1,
                    description="The answers to choose from: at least one, none empty, no duplicates.",
                ),
                "requireConfirmation": types.Schema(
                    type=types.Type.BOOLEAN, description="Ask the human to confirm or cancel the chosen option."
                ),
                "confirmationMessage": types.Schema(type=string, description="Shown when asking for the confirmation."),
                "timeoutMs": types.Schema(
                    type=types.Type.INTEGER, description="How long to wait (ms); default: the agent's approval timeout."
                ),
                "defaultOption": types.Schema(
                    type=string, description="Taken on timeout when no confirmation is required; must be an option."
                ),
                "metadata": types.Schema(type=types.Type.OBJECT, description="Free JSON kept for the audit trail."),
            },
            required=["question", "options"],
        ),
    )


def error_result(message: str, request_id: str = "") -> dict[str, Any]:
    result = question_wire.QuestionResult(
        ok=False, status="error", confirmed=False, selected_option=None, source="system", request_id=request_id,
        message=message,
    )
    return result.model_dump(mode="json")


class QuestionTool(HumanTool):
    def __init__(self, name: str, metrics: QuestionMetrics | None = None) -> None:
        assert name in question_wire.ALIASES
        super().__init__(name=name, description=DESCRIPTION)
        self._metrics = metrics
        self._declaration = declaration(name)  # built once: ADK asks for it on every model call

    def _get_declaration(self) -> types.FunctionDeclaration:
        return self._declaration

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        confirmation = tool_context.tool_confirmation
        if confirmation is not None:  # resumed by the runtime with the recorded result
            payload = confirmation.payload if isinstance(confirmation.payload, dict) else {}
            result = payload.get("hitl_result")
            if isinstance(result, dict):
                return result
            return error_result("the runtime resumed this question without a result", str(payload.get("request_id", "")))
        parsed = question_wire.validate_args(dict(args))
        if isinstance(parsed, str):
            return error_result(f"{parsed}. Nothing was asked; fix the arguments and call {self.name} again.")
        scope = CURRENT_RUN.get()
        problem = _conflict(scope)
        if problem:
            return error_result(problem)
        assert scope is not None
        request_id = f"hitl-{uuid.uuid4().hex[:16]}"
        payload = {"request_id": request_id, "kind": question_wire.TOOL_NAME}
        tool_context.request_confirmation(hint=parsed.question, payload=payload)
        tool_context.actions.skip_summarization = True
        scope.questions.append(PendingQuestion(request_id, tool_context.function_call_id or "", self.name, parsed))
        if self._metrics is not None:
            self._metrics.asked.inc()
        return dict(PLACEHOLDER)


def _conflict(scope: RunScope | None) -> str:
    if scope is None:
        return "this run has no channel to a human; nothing was asked"
    if scope.pending:
        return (
            "this model turn also made tool calls that wait for approval; ask the question in a turn of its own "
            "(after they are decided). Nothing was asked."
        )
    if scope.questions:
        return "only one question can be asked per model turn; ask the next one after this one is answered. Nothing was asked."
    if scope.eliciting:
        return "a tool of this model turn is asking the user a question; ask yours after it is answered. Nothing was asked."
    return ""


class QuestionMetrics:
    """The question counters, on the runtime's own registry (created once per runtime)."""

    def __init__(self, metrics: Metrics) -> None:
        self.asked = Counter(
            "gatehouse_hitl_requests", "Questions the model asked the human (hitl_request).", registry=metrics.registry
        )
        self.results = Counter(
            "gatehouse_hitl_results",
            "Questions finished (status confirmed|canceled|timeout; source user|timeout|system).",
            ["status", "source"],
            registry=metrics.registry,
        )


def build_tools(enabled: bool, metrics: QuestionMetrics | None = None) -> list[QuestionTool]:
    """The tools to offer the model: ``hitl_request`` and its alias, when ``humanTools.hitlRequest`` is on."""
    return [QuestionTool(name, metrics) for name in question_wire.ALIASES] if enabled else []


class QuestionRecorder:
    """Turns the question a run paused on into a durable :class:`QuestionRecord` (before anyone is told)."""

    def __init__(self, store: QuestionStore, default_timeout_seconds: float, clock: Callable[[], float] | None = None) -> None:
        self._store = store
        self._timeout = default_timeout_seconds
        self._clock = clock or store.clock

    async def record(self, scope: RunScope, confirmation_ids: Mapping[str, str]) -> QuestionRecord | None:
        if not scope.questions:
            return None
        (question,) = scope.questions  # the tool refuses a second question in the same turn
        args = question.args
        assert isinstance(args, question_wire.QuestionArgs)  # the tool put it there, validated
        confirmation_id = confirmation_ids.get(question.call_id)
        if confirmation_id is None:
            raise RuntimeError(f"ADK did not pause hitl_request call {question.call_id}")
        now = self._clock()
        timeout = args.timeoutMs / 1000 if args.timeoutMs else self._timeout
        record = QuestionRecord(
            id=question.request_id, task_id=scope.task_id, context_id=scope.context_id,
            confirmation_id=confirmation_id, call_id=question.call_id, tool=question.tool, args=args,
            created_at=now, expires_at=now + timeout, updated_at=now,
        )
        await self._store.add(record)
        return record


__all__ = ["PendingQuestion", "QuestionMetrics", "QuestionRecorder", "QuestionTool", "build_tools", "declaration", "error_result"]
