"""Running the agent through ADK for one A2A request, and reading what came of it.

A *new turn* sends the user's text; a *resume* sends one ``adk_request_confirmation`` function response per
decided request (built here from the durable records, never from client input). Either way the run ends
with a final reply or with new gated calls, which are stored as pending approvals before the caller
reports the pause, so a client that sees a request can decide it at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from google.adk.agents.run_config import RunConfig
from google.adk.runners import Runner
from google.adk.telemetry.context import ContentCapturingMode, TelemetryConfig
from google.genai import types

from agent_runtime.approvals import ApprovalRecord, ApprovalService, args_hash
from agent_runtime.contract.principals import ANONYMOUS
from agent_runtime.pauses.kind import Recorded, Recorder
from agent_runtime.runs.run_scope import CURRENT_RUN, RunScope
from agent_runtime.server.gate import confirmation_payload
from agent_runtime.server.owners import TASK_DEPTH, TASK_OWNER, TASK_REQUESTER
from agent_runtime.server.sessions import DurableSessionService
from agent_runtime.telemetry.metrics import Metrics

CONFIRMATION_CALL = "adk_request_confirmation"
# Spans keep to the stable GenAI conventions and carry no message content: tool arguments stay out of traces,
# and building the experimental attributes cost ~5% of a turn even with no tracer installed.
RUN_CONFIG = RunConfig(telemetry=TelemetryConfig(
    genai_semconv_stability_opt_in="stable", capture_message_content=ContentCapturingMode.NO_CONTENT,
))
LEGACY_USER_ID = "a2a"  # every session's user before conversations had owners (see DurableSessionService.adopt)


@dataclass
class TurnOutcome:
    text: str
    requests: list[ApprovalRecord] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    pause: Recorded | None = None  # another kind's pause (a question, …; never together with approval requests)

    @property
    def paused(self) -> bool:
        return bool(self.requests) or self.pause is not None


class TurnRunner:
    def __init__(
        self,
        runner: Runner,
        sessions: DurableSessionService,
        approvals: ApprovalService,
        metrics: Metrics,
        timeout_seconds: float,
        clock: Callable[[], float] = time.time,
        recorders: Sequence[tuple[str, Recorder]] = (),
    ) -> None:
        self._runner = runner
        self._sessions = sessions
        self._approvals = approvals
        self._metrics = metrics
        self._timeout = timeout_seconds
        self._clock = clock
        # each kind's recorder, by the kind's name (pauses/kind.py): it stores what the run paused on, if that kind
        self._recorders = list(recorders)

    async def new_turn(self, task_id: str, context_id: str, text: str) -> TurnOutcome:
        content = types.Content(role="user", parts=[types.Part(text=text)])
        return await self._run(task_id, context_id, content)

    async def resume_turn(self, task_id: str, context_id: str, decided: Sequence[ApprovalRecord]) -> TurnOutcome:
        parts = [
            types.Part(
                function_response=types.FunctionResponse(
                    name=CONFIRMATION_CALL,
                    id=r.confirmation_id,
                    response={
                        "confirmed": r.status == "approved",
                        "payload": confirmation_payload(r.id, r.status, r.reason, r.expires_at - r.created_at),
                    },
                )
            )
            for r in decided
        ]
        return await self._run(task_id, context_id, types.Content(role="user", parts=parts))

    async def resume_question(self, task_id: str, context_id: str, confirmation_id: str, result: dict[str, Any]) -> TurnOutcome:
        """Resume a hitl_request pause with the runtime's recorded result (see questions/flow.py)."""
        response = {"confirmed": True, "payload": {"hitl_result": result}}
        part = types.Part(function_response=types.FunctionResponse(name=CONFIRMATION_CALL, id=confirmation_id, response=response))
        return await self._run(task_id, context_id, types.Content(role="user", parts=[part]))

    async def resume_call(self, task_id: str, context_id: str, call_id: str, tool: str, response: dict[str, Any]) -> TurnOutcome:
        """Resume a call that paused on its tool's question with the call's final result (elicitations/flow.py): the
        function response of the model's own call, built by the runtime from the tool's recorded result."""
        part = types.Part(function_response=types.FunctionResponse(name=tool, id=call_id, response=response))
        return await self._run(task_id, context_id, types.Content(role="user", parts=[part]))

    async def _run(self, task_id: str, context_id: str, content: types.Content) -> TurnOutcome:
        owner = TASK_OWNER.get() or ANONYMOUS  # the conversation's session is the owner's (server/owners.py)
        scope = RunScope(task_id, context_id, owner, requester=TASK_REQUESTER.get() or owner, depth=TASK_DEPTH.get())
        token = CURRENT_RUN.set(scope)
        texts: list[str] = []
        errors: list[str] = []
        confirmation_ids: dict[str, str] = {}
        records: list[ApprovalRecord] = []
        try:
            async for event in self._runner.run_async(
                user_id=owner, session_id=context_id, new_message=content, run_config=RUN_CONFIG
            ):
                if event.error_code or event.error_message:
                    errors.append(f"{event.error_code or 'error'}: {event.error_message or ''}".strip())
                for call in event.get_function_calls():
                    if call.name == CONFIRMATION_CALL and call.args:
                        original = call.args.get("originalFunctionCall") or {}
                        if original.get("id") and call.id:
                            confirmation_ids[original["id"]] = call.id
                if event.content and event.content.parts and not event.partial and event.author != "user":
                    texts.extend(p.text for p in event.content.parts if p.text and not p.thought)
            records = self._records(scope, confirmation_ids)
        finally:
            CURRENT_RUN.reset(token)
            # The run's events become durable before anyone is told about its outcome; the requests it paused on
            # are written in the same transaction (one commit, and never the one without the other).
            rules = {call.request_id: call.rule for call in scope.pending}
            pending = self._approvals.pending_writes(records, rules) if records else None
            await self._sessions.flush_session(self._runner.app_name, owner, context_id, also=pending)
        if records:
            await self._approvals.added(records)
            self._metrics.pending.inc(len(records))
        pause: Recorded | None = None
        for kind, recorder in self._recorders:  # one kind of pause per turn: at most one records anything
            found = await recorder.record(scope, confirmation_ids)
            if found is not None and pause is None:
                pause = Recorded(kind, found)
        return TurnOutcome(text="\n".join(texts).strip(), requests=records, errors=errors, pause=pause)

    def _records(self, scope: RunScope, confirmation_ids: dict[str, str]) -> list[ApprovalRecord]:
        now = self._clock()
        records = []
        for position, call in enumerate(scope.pending):
            confirmation_id = confirmation_ids.get(call.call_id)
            if confirmation_id is None:
                raise RuntimeError(f"ADK did not pause gated call {call.call_id} ({call.tool})")
            records.append(
                ApprovalRecord(
                    id=call.request_id, task_id=scope.task_id, context_id=scope.context_id,
                    confirmation_id=confirmation_id, call_id=call.call_id, tool=call.tool, server=call.server,
                    args=call.args, args_hash=args_hash(call.tool, call.args), hint=call.hint,
                    created_at=now, expires_at=now + self._timeout, position=position,
                    requested_by=scope.requester or scope.owner, approvers=call.approvers, redact=call.redact,
                )
            )
        return records


__all__ = ["CONFIRMATION_CALL", "TurnOutcome", "TurnRunner"]
