"""The approval gate: ADK callbacks that decide, per tool call, whether it runs, waits or is refused.

It builds on ADK's native confirmation (``tool_context.request_confirmation``): a gated call is recorded
in the current :class:`RunScope` and ADK ends the run with an ``adk_request_confirmation`` call per gated
call, while ungated sibling calls of the same model turn run and keep their results — unless a session
grant of the conversation's owner covers the call (approvals/grants.py): then it runs at once, recorded as
approved with ``source: grant``. On resume ADK calls the gate again for the same call with
``tool_context.tool_confirmation`` set; then:

- denied → the model gets ``{"error": "rejected by the user: <reason>"}``;
- timed out → ``{"error": "timeout: no decision within <N>s; the call was not run"}``;
- approved → the gate claims the execution in the approvals table (arguments' hash must match, and only
  the first claim wins) and lets the call run, exactly once. Where an approver edited the arguments
  (:mod:`agent_runtime.contract.edits`), the claim matches the model's arguments, the call runs with the edited ones (ADK hands
  the tool the same arguments dict the callback gets), and its result tells the model what was changed.

The model never sees the placeholder result of a paused call (ADK drops it from the model's history), and
setting ``skip_summarization`` on it keeps ADK from calling the model again for the pause itself. The
confirmation responses are only ever built by this runtime from recorded decisions; a client's message
parts never reach ADK as function responses.
"""

from __future__ import annotations

import uuid
from typing import Any

from google.adk.tools.base_tool import BaseTool
from google.adk.tools.tool_context import ToolContext

from agent_runtime.approvals import ApprovalService, args_hash
from agent_runtime.contract import policy
from agent_runtime.contract.agent_config import AgentConfig
from agent_runtime.contract.edits import changed_fields
from agent_runtime.contract.edits import describe as describe_edit
from agent_runtime.runs.run_scope import CURRENT_RUN, HumanTool, PendingCall, PendingDelegation, PendingElicitation, RunScope
from agent_runtime.telemetry.metrics import Metrics

PLACEHOLDER = {"error": "waiting for a human decision"}


def confirmation_payload(request_id: str, status: str, reason: str, timeout_seconds: float) -> dict[str, Any]:
    return {"request_id": request_id, "outcome": status, "reason": reason, "timeout_seconds": timeout_seconds}


def timeout_error(seconds: float) -> dict[str, str]:
    return {"error": f"timeout: no decision within {seconds:g}s; the call was not run"}


def rejection_error(reason: str) -> dict[str, str]:
    return {"error": f"rejected by the user: {reason.strip() or 'no reason given'}"}


def with_note(response: Any, note: str) -> dict[str, Any]:
    """A tool result with ``note`` added where a model reads it: one more text item of an MCP result's ``content``,
    else a ``gatehouse_note`` key."""
    if isinstance(response, dict) and isinstance(response.get("content"), list):
        return {**response, "content": [*response["content"], {"type": "text", "text": note}]}
    return {**(response if isinstance(response, dict) else {"result": response}), "gatehouse_note": note}


class Gate:
    def __init__(self, config: AgentConfig, approvals: ApprovalService, metrics: Metrics) -> None:
        self._config = config
        self._approvals = approvals
        self._metrics = metrics
        self._servers: dict[str, str | None] = {}

    def register_tools(self, servers: dict[str, str | None]) -> None:
        """Which MCP server offers each tool, as listed at start-up."""
        self._servers.update(servers)

    def server_of(self, tool: str) -> str | None:
        if tool in self._servers:
            return self._servers[tool]
        return policy.server_of(self._config, tool)

    async def before_model(self, callback_context: Any, llm_request: Any) -> None:
        self._metrics.model_calls.inc()
        return None

    async def before_tool(self, tool: BaseTool, args: dict[str, Any], tool_context: ToolContext) -> dict[str, Any] | None:
        if isinstance(tool, HumanTool):
            return None
        name = tool.name
        server = self.server_of(name)
        if tool_context.tool_confirmation is not None:
            return await self._resumed(name, server, args, tool_context)
        decision = policy.evaluate(self._config, server, name, args)
        if decision.verdict == "allow":
            return None
        if decision.verdict == "deny":
            self._metrics.decisions.labels(outcome="refused", source="policy").inc()
            return {"error": decision.hint}
        scope = CURRENT_RUN.get()
        if scope is None:
            return {"error": "approval required, but this run has no approval channel; the call was not run"}
        if self._config.approval.allow_session_grants and await self._granted(scope, name, server, args, decision,
                                                                               tool_context):
            return None
        if scope.questions:  # one kind of pause per model turn: a question (hitl_request) is already waiting
            return {"error": "not run: this model turn asks the human a question (hitl_request); call again after the answer"}
        if scope.eliciting:  # likewise a tool's question (MCP elicitation)
            return {"error": "not run: another tool of this model turn asks the user a question; call again after the answer"}
        if scope.delegating:  # likewise a sub-agent's pause (agent_runtime/delegation)
            return {"error": "not run: a sub-agent called in this model turn waits for a human; call again after it is decided"}
        request_id = f"apr-{uuid.uuid4().hex[:16]}"
        tool_context.request_confirmation(hint=decision.hint, payload={"request_id": request_id})
        tool_context.actions.skip_summarization = True
        call_id = tool_context.function_call_id or ""
        scope.pending.append(PendingCall(request_id, call_id, name, server, dict(args), decision.hint, decision.approvers,
                                         redact=self._config.approval.redact, rule=decision.rule))
        self._metrics.approval_requests.labels(agent=self._metrics.agent, tool=name).inc()
        return dict(PLACEHOLDER)

    async def _granted(
        self, scope: RunScope, name: str, server: str | None, args: dict[str, Any], decision: policy.Decision,
        tool_context: ToolContext,
    ) -> bool:
        """A session grant of this conversation's owner covers the call: record it (source grant) and let it run."""
        grant = await self._approvals.grant_for(scope.context_id, scope.owner, server, name, args, decision.approvers)
        if grant is None:
            return False
        call_id = tool_context.function_call_id or ""
        record = await self._approvals.record_granted(
            grant, task_id=scope.task_id, call_id=call_id, tool=name, server=server, args=args, hint=decision.hint,
            approvers=decision.approvers, redact=self._config.approval.redact, rule=decision.rule,
        )
        scope.claimed.add(record.call_id)
        self._metrics.decisions.labels(outcome="approved", source="grant").inc()
        return True

    async def after_tool(
        self, tool: BaseTool, args: dict[str, Any], tool_context: ToolContext, tool_response: Any
    ) -> dict[str, Any] | None:
        """An approved call this run claimed has returned: record it done (a later refusal then says it ran) — unless
        it returned asking the user a question (MCP elicitation): its claim then holds until the retry with the answer
        returns (agent_runtime/elicitations/flow.py), and an approver's edit is told with that final result."""
        scope = CURRENT_RUN.get()
        call_id = tool_context.function_call_id or ""
        if scope is not None and call_id in scope.claimed:
            scope.claimed.discard(call_id)
            waits: list[PendingElicitation | PendingDelegation] = [*scope.eliciting, *scope.delegating]
            asked = next((e for e in waits if e.call_id == call_id), None)
            if asked is not None:
                edit = scope.edited.pop(call_id, "")
                asked.note = " ".join(n for n in (edit, asked.note) if n)
                return None
            await self._approvals.finish_execution(call_id, tool_response)
            note = scope.edited.pop(call_id, None)
            if note is not None:  # the model must know its call ran with other arguments than it asked for
                return with_note(tool_response, note)
        return None

    async def _resumed(
        self, name: str, server: str | None, args: dict[str, Any], tool_context: ToolContext
    ) -> dict[str, Any] | None:
        confirmation = tool_context.tool_confirmation
        assert confirmation is not None
        payload = confirmation.payload if isinstance(confirmation.payload, dict) else {}
        if not confirmation.confirmed:
            if payload.get("outcome") == "expired":
                return timeout_error(float(payload.get("timeout_seconds") or self._config.approval.timeout_seconds))
            return rejection_error(str(payload.get("reason") or ""))
        call_id = tool_context.function_call_id or ""
        claim = await self._approvals.claim_execution(call_id, name, args_hash(name, args))
        if not claim.ok:
            return {"error": claim.problem}
        assert claim.record is not None
        scope = CURRENT_RUN.get()
        if scope is not None:
            scope.claimed.add(call_id)
        record = claim.record
        if record.original_args is not None:
            args.clear()
            args.update(record.args)  # the very dict ADK passes on to the tool
            if scope is not None:
                changed = changed_fields(record.original_args, record.args)
                scope.edited[call_id] = describe_edit(changed, record.edited_by, record.original_args, record.args)
        return None


__all__ = ["Gate", "confirmation_payload"]
