"""The gateway's ``PreToolUse`` endpoint (``POST /hooks/claude-code``): the body is the hook's input, the answer is
Claude Code's hook output. Behind the gateway's authentication: the requester of a held call is the principal of the
hook's token.

A gated call is a held call (``agent_runtime.gateway.held.HeldCalls``, prefix ``held-``): one request in the
approvals store, decided in the inbox, Slack, kubectl or REST; this request waits until it is decided or times out
(the sweeper applies ``onTimeout``). A hook that gives up and calls again with the same tool and input attaches to the
same request: a request whose hook has gone is no longer waited on here, so its decision is kept for the retry. An
approval is used once: it is claimed (``claim_execution``) before ``allow`` is answered, so the audit records that the
CLI was allowed to run it."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from agent_runtime.access.middleware import principal_of
from agent_runtime.approvals import ApprovalRecord, ApprovalService
from agent_runtime.contract.agent_config import GatewayConfig
from agent_runtime.contract.policy import Decision
from agent_runtime.contract.principals import Principal
from agent_runtime.hooks import mapping
from agent_runtime.hooks.shapes import HookOutput, PreToolUseInput, answer

log = logging.getLogger(__name__)

HOOK_PATH = "/hooks/claude-code"
CLIENT = "claude-code"  # the request's ``server``: where the call was asked (shown on the card)
MAX_BODY = 4 * 1024 * 1024  # a Write's content travels in the input; larger bodies are refused, never half-read


async def _disconnected(request: Request) -> None:
    """Returns when the client closes the connection (the body has been read, so only ``http.disconnect`` comes)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def _json(output: HookOutput) -> Response:
    return Response(output.to_json(), media_type="application/json")


def _problem(status: int, error: str, problems: list[str]) -> Response:
    return JSONResponse({"error": error, "problems": problems}, status)


class Held(Protocol):
    """What the endpoint uses of the gateway's held calls (agent_runtime.gateway.held.HeldCalls, which mounts it)."""

    async def open_request(self, principal: Principal, tool: str, args: dict[str, Any], decision: Decision, *,
                           server: str | None = None, hint: str | None = None) -> ApprovalRecord: ...

    async def wait(self, record: ApprovalRecord) -> ApprovalRecord: ...


class HookEndpoint:
    def __init__(self, config: GatewayConfig, held: Held, approvals: ApprovalService) -> None:
        self.config, self.held, self.approvals = config, held, approvals

    async def handle(self, request: Request) -> Response:
        body = await request.body()
        if len(body) > MAX_BODY:
            return _problem(413, "hook input too large", [f"more than {MAX_BODY} bytes"])
        try:
            call = PreToolUseInput.model_validate_json(body)
        except ValidationError as exc:
            return _problem(400, "not a PreToolUse hook input",
                            [f"{'.'.join(map(str, e['loc'])) or '(body)'}: {e['msg']}" for e in exc.errors()])
        who = principal_of(request)
        decision = mapping.evaluate(self.config, call)
        if decision.verdict != "require":
            return _json(mapping.unheld(decision, call.tool_name))
        record = await self.held.open_request(who, call.tool_name, dict(call.tool_input), decision, server=CLIENT,
                                              hint=mapping.card_hint(decision, call))
        log.info("hook %s: %s held as %s for %s (session %s)", self.config.name, call.tool_name, record.id, who.id,
                 call.session_id)
        waiting = asyncio.ensure_future(self.held.wait(record))
        gone = asyncio.ensure_future(_disconnected(request))
        try:
            await asyncio.wait({waiting, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
        if not waiting.done() or await request.is_disconnected():
            # The hook gave up (its own deadline): nobody would read an answer, so an approval is left unused for
            # the hook's retry of the same call, which attaches to this request (HeldCalls.open_request).
            waiting.cancel()
            log.info("hook %s: %s (%s) left by its client; the request stays open", self.config.name, record.id,
                     call.tool_name)
            return Response(status_code=499)
        done = waiting.result()
        if done.status == "approved":
            claim = await self.approvals.claim_execution(done.call_id, done.tool, done.requested_hash)
            if not claim.ok or claim.record is None:
                return _json(answer("deny", f"Gatehouse: the approval of {done.id} cannot be used: {claim.problem}."))
            said: dict[str, Any] = {"content": [{"type": "text", "text": f"allowed to {CLIENT} by the hook"}]}
            await self.approvals.finish_execution(done.call_id, said)
            done = claim.record
        return _json(mapping.decided(done, self.config.approval.on_timeout))


__all__ = ["CLIENT", "HOOK_PATH", "MAX_BODY", "HookEndpoint"]
