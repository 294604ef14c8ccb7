"""A gated call held until a human decides: the gateway's kind of pause with no A2A task (issue 38), on the
paused-call kernel (:mod:`agent_runtime.pauses.taskless`).

A held call is one ``gatehouse_approvals`` request (votes, N-of-M, edits, REST, the sweeper, the audit: as an Agent's)
whose task id starts with :data:`PREFIX`, made by the gateway and never taken from a client. The client's
``tools/call`` waits in :meth:`HeldCalls.hold`; a decision reaches :meth:`HeldCalls.resume` through ``DecideOne`` or
the timeout sweeper, which wakes it.

- **Approved** (or timed out with ``onTimeout: approve``): the call is claimed once in the store (``claim_execution``:
  a second claim is refused) and forwarded with the approved arguments (an approver's edit included); its outcome is
  recorded (``finish_execution``).
- **Denied**, **timed out** with ``deny``: an ``isError`` result with the reason, so the model reads why.
- **Retry**: a client whose connection was cut calls again with the same tool and arguments; the request of that
  principal, tool and arguments still open (pending, or approved and not yet run) is found in the store (also after a
  gateway restart: MCP session ids do not survive one, so the key is the principal's context, the tool and the
  arguments' hash) and the retry waits on it instead of asking again.
- **Nobody waits**: a decision that arrives while no client waits runs nothing; an approved call runs only while its
  client (or its retry, within the request's lifetime: ``approval.timeout`` from the call) waits for the result. After
  that a retry is a new request.
- **Abandoned**: a held call whose lifetime ended while no client waited for it is marked ``abandoned`` in the store
  (:meth:`ApprovalService.abandon`; its ToolApproval shows phase ``Abandoned``): one still pending when it times out
  (instead of the timeout's outcome, which nobody would read; ``onTimeout: approve`` included), and one approved that
  no client came back to run (:meth:`HeldCalls.abandon_overdue`). It never runs, a vote on it is refused as already
  decided, and a retry after it is a new request. A denial stays a denial.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import mcp_types

from agent_runtime.approvals import ApprovalRecord, ApprovalService, args_hash
from agent_runtime.contract.agent_config import GatewayConfig
from agent_runtime.contract.policy import Decision
from agent_runtime.contract.principals import Principal

log = logging.getLogger(__name__)

NAME = "held_call"
PREFIX = "held-"
CONTEXT_PREFIX = "mcp:"  # a held call's context: the principal's, so a retry finds it whatever its MCP session
KEEPALIVE_SECONDS = 15.0  # how often a waiting call tells the client it is still waiting (progress notification)
ABANDONED = "nobody waited for the call when its lifetime (approval.timeout) ended; it was not run"

Progress = Callable[[str], Awaitable[None]]  # tells the waiting client, e.g. by a progress notification


def context_of(principal: Principal) -> str:
    return f"{CONTEXT_PREFIX}{principal.id}"


def _error(text: str) -> mcp_types.CallToolResult:
    return mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text=text)], is_error=True)


def refusal(record: ApprovalRecord) -> mcp_types.CallToolResult:
    """What the model reads of a call that will not run: who denied it and why, or that nobody decided in time."""
    if record.status == "abandoned":
        return _error(f"The call to {record.tool} was not run: {record.reason or ABANDONED}.")
    if record.status == "expired" or record.source == "timeout":
        return _error(f"The call to {record.tool} was not run: nobody decided within the approval timeout "
                      f"({record.reason or 'timed out'}).")
    by = record.source or "an approver"
    return _error(f"The call to {record.tool} was denied ({by}): {record.reason or 'no reason given'}. It was not run.")


class HeldCalls:
    """The taskless kind: wakes the client waiting on each decided held call."""

    name = NAME
    prefix = PREFIX

    def __init__(self, config: GatewayConfig, approvals: ApprovalService, *, keepalive: float = KEEPALIVE_SECONDS,
                 clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self.approvals = approvals
        self.keepalive = keepalive
        self.clock = clock
        self._waiting: dict[str, list[asyncio.Future[ApprovalRecord]]] = {}  # request id -> its waiting clients

    # -- the kind (pauses.taskless.TasklessKind) ----------------------------------------------------------------

    async def resume(self, decided: Sequence[ApprovalRecord], source: str, note: str) -> None:
        unwaited = []
        for record in decided:
            for waiter in self._waiting.get(record.id, []):
                if not waiter.done():
                    waiter.set_result(record)
            if record.id not in self._waiting:
                log.info("held call %s decided (%s) with no client waiting: nothing runs", record.id, record.status)
                unwaited.append(record.id)
        if source == "timeout" and unwaited:  # its lifetime ended and nobody waits: no retry can attach to it any more
            await self.approvals.abandon(unwaited, ABANDONED)

    async def restate(self, pending: Sequence[ApprovalRecord], source: str, note: str) -> None:
        return None  # a counted vote: the client keeps waiting (its progress notifications go on)

    async def abandon_overdue(self) -> list[ApprovalRecord]:
        """Abandon the approved held calls past their lifetime that no client came back to run."""
        now = self.clock()
        overdue = [r.id for r in await self.approvals.by_status("approved", limit=500)
                   if r.task_id.startswith(PREFIX) and r.exec_state == "none" and r.expires_at <= now
                   and r.id not in self._waiting]
        return await self.approvals.abandon(overdue, ABANDONED) if overdue else []

    async def keep_abandoning(self, interval: float) -> None:
        """:meth:`abandon_overdue` every ``interval`` seconds, until cancelled (the gateway's lifespan runs it)."""
        while True:
            try:
                await self.abandon_overdue()
            except Exception:  # the database away for a moment: the next round tries again
                log.exception("abandoning overdue held calls failed")
            await asyncio.sleep(interval)

    # -- the gateway's side -------------------------------------------------------------------------------------

    async def open_request(self, principal: Principal, tool: str, args: dict[str, Any], decision: Decision, *,
                           server: str | None = None, hint: str | None = None) -> ApprovalRecord:
        """The request this call waits on: the same principal's open one for the same tool and arguments (a retry),
        else a new one. ``server``/``hint``: a hook's call (agent_runtime.hooks) names its CLI and where it was asked."""
        digest = args_hash(tool, args)
        context = context_of(principal)
        for record in await self.approvals.pending_in_context(context, principal.id):
            if record.tool == tool and record.requested_hash == digest:
                return record
        now = self.clock()
        for record in await self.approvals.by_status("approved", limit=200):
            if (record.context_id == context and record.tool == tool and record.requested_hash == digest
                    and record.exec_state == "none" and record.task_id.startswith(PREFIX) and record.expires_at > now):
                return record  # approved while its client was away, and still within its lifetime: the retry runs it
        key = uuid.uuid4().hex
        record = ApprovalRecord(
            id=f"apr-{key[:16]}", task_id=f"{PREFIX}{key}", context_id=context, confirmation_id=f"held-{key}",
            call_id=f"mcp-{key}", tool=tool, server=server or _upstream_name(self.config), args=dict(args),
            args_hash=digest, hint=hint or decision.hint, created_at=now, expires_at=now + self.config.approval.timeout_seconds,
            requested_by=principal.id, approvers=decision.approvers, redact=self.config.approval.redact,
        )
        await self.approvals.add_pending([record], {record.id: decision.rule} if decision.rule else None)
        return record

    async def wait(self, record: ApprovalRecord, progress: Progress | None = None) -> ApprovalRecord:
        """Until ``record`` is decided; ``progress`` is told every ``keepalive`` seconds meanwhile."""
        waiter: asyncio.Future[ApprovalRecord] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(record.id, []).append(waiter)
        try:
            current = await self.approvals.get(record.id)  # decided before this client started waiting
            if current is not None and current.status != "pending":
                return current
            while True:
                try:
                    return await asyncio.wait_for(asyncio.shield(waiter), self.keepalive)
                except TimeoutError:
                    if progress is not None:
                        await progress(f"waiting for a human's approval of {record.tool} (request {record.id})")
        finally:
            left = [w for w in self._waiting.get(record.id, []) if w is not waiter]
            if left:
                self._waiting[record.id] = left
            else:
                self._waiting.pop(record.id, None)

    async def run_approved(
        self, record: ApprovalRecord, forward: Callable[[str, dict[str, Any]], Awaitable[mcp_types.CallToolResult]],
    ) -> mcp_types.CallToolResult:
        """Forward an approved call once, with the approved (possibly edited) arguments, and record its outcome."""
        claim = await self.approvals.claim_execution(record.call_id, record.tool, record.requested_hash)
        if not claim.ok or claim.record is None:
            return _error(f"The call to {record.tool} was not run: {claim.problem}.")
        result = await forward(record.tool, claim.record.args)
        await self.approvals.finish_execution(record.call_id, result.model_dump(by_alias=True, exclude_none=True))
        return result


__all__ = ["ABANDONED", "CONTEXT_PREFIX", "KEEPALIVE_SECONDS", "NAME", "PREFIX", "HeldCalls", "context_of", "refusal"]


def _upstream_name(config: GatewayConfig) -> str:
    """Where a held MCP call was asked: the upstream's name (a hooks-only gateway's calls name their CLI instead)."""
    return config.upstream.name if config.upstream is not None else ""
