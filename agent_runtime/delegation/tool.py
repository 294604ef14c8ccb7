"""The tool the model calls to ask a sub-agent (``spec.tools[].type: Agent``).

    model calls <name>(request="…")
      ├─ the sub-agent answers ─► {"result": its reply}  (or {"error": …} when it failed, refused or is unreachable)
      └─ the sub-agent pauses (input-required) ─► request_confirmation: this run ends paused too; the flow
         (delegation/flow.py) records the pause (``gatehouse_delegations``) before the client is told, forwards
         decisions, and resumes the model with the sub-agent's final reply as this call's result.

It is an ordinary tool for the approval gate: the parent's policy may gate the delegation itself, and an approved
delegation keeps its one claimed execution until the sub-agent's reply comes back.
"""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

from a2a.helpers.proto_helpers import new_text_part
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.tool_context import ToolContext
from google.genai import types

from agent_runtime.contract.agent_config import SubAgentConfig
from agent_runtime.contract.principals import Principal
from agent_runtime.delegation import relay
from agent_runtime.delegation.client import SubAgentClient, SubAgentUnreachable
from agent_runtime.runs.run_scope import CURRENT_RUN, PendingDelegation, RunScope

PLACEHOLDER = {"status": "waiting for the sub-agent's human decision"}


def _description(config: SubAgentConfig) -> str:
    what = config.description or f"the agent {config.agent}"
    return (f"Ask {what}. Send the whole request as text; the reply is the agent's answer. The agent may pause "
            "for a human's approval before it acts: then this call waits for that decision.")


def _conflict(scope: RunScope, tool: str) -> str:
    if scope.pending or scope.questions or scope.eliciting or scope.delegating:
        return (f"another call of this model turn waits for a human; call {tool} again after it is decided "
                "(the sub-agent's request was withdrawn)")
    return ""


class SubAgentTool(BaseTool):
    def __init__(self, config: SubAgentConfig, client: SubAgentClient) -> None:
        super().__init__(name=config.name, description=_description(config))
        self.config = config
        self.client = client
        self._declaration = types.FunctionDeclaration(
            name=config.name,
            description=self.description,
            parameters=types.Schema(
                type=types.Type.OBJECT,
                properties={"request": types.Schema(type=types.Type.STRING, description="What to ask the agent, in full.")},
                required=["request"],
            ),
        )

    def _get_declaration(self) -> types.FunctionDeclaration:
        return self._declaration

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        request = args.get("request")
        if not isinstance(request, str) or not request.strip():
            return {"error": f"{self.name} needs a non-empty 'request' text; nothing was sent"}
        scope = CURRENT_RUN.get()
        if scope is None:
            return {"error": "this run has no channel to a human, so a sub-agent that pauses could not be followed"}
        human = Principal(scope.requester or scope.owner)
        metadata = relay.on_behalf_metadata(human, scope.depth + 1)
        try:
            status = await self.client.send([new_text_part(request)], metadata)
        except SubAgentUnreachable as exc:
            return {"error": f"not run: {exc}"}
        if status.paused:
            problem = _conflict(scope, self.name)
            if problem:
                with contextlib.suppress(SubAgentUnreachable):
                    await self.client.cancel(status.task_id)
                return {"error": problem}
            request_id = f"dlg-{uuid.uuid4().hex[:16]}"
            # The same pause as a gated call's (server/gate.py): ADK ends the run; the model never sees the placeholder.
            tool_context.request_confirmation(hint=status.text, payload={"kind": "delegation", "request_id": request_id})
            tool_context.actions.skip_summarization = True
            scope.delegating.append(PendingDelegation(
                request_id, tool_context.function_call_id or "", self.name, self.config.agent, dict(args),
                status.task_id, status.context_id, status.pause,
            ))
            return dict(PLACEHOLDER)
        if status.state == "message":
            return {"result": status.text}
        if not status.finished:
            return {"error": f"the sub-agent {self.config.agent} did not finish (task {status.task_id} is {status.state})"}
        return relay.result_for_model(self.config.agent, status.state, status.text)


__all__ = ["PLACEHOLDER", "SubAgentTool"]
