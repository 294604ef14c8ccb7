"""The interactions endpoint Slack posts to (the Slack app's Interactivity Request URL): ``POST /slack/interactions``.

Every request is checked first (:class:`~agent_runtime.slack.signature.RequestCheck`: signature, age, replay) and
refused with 401 before anything is read from it; when the shared replay memory cannot be reached it is refused with
503 (Slack shows the person an error, and a new click is a new request), never let through unchecked. Slack wants an
answer within three seconds, so the work (reading the ToolApproval, voting, waiting for the runtime's verdict; an
option of a held ``AskUserQuestion`` too) runs in the background and the person is answered with an ephemeral
message; a Deny dialog sent without a reason is answered at once with the field's error.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Coroutine
from typing import Any
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from agent_runtime.infra.tasks import cancel_and_wait
from agent_runtime.slack import messages
from agent_runtime.slack.decisions import Decider
from agent_runtime.slack.replays import ReplayMemoryUnavailable
from agent_runtime.slack.signature import RequestCheck

log = logging.getLogger(__name__)

PATH = "/slack/interactions"
REASON_NEEDED = "Say why: the agent's model is told the reason."
UNCHECKED = "cannot tell whether this request was seen before; nothing was done, try again"


class Interactions:
    def __init__(self, check: RequestCheck, decider: Decider) -> None:
        self._check = check
        self._decider = decider
        self._background: set[asyncio.Task[None]] = set()

    def routes(self) -> list[Route]:
        return [Route(PATH, self.post, methods=["POST"]), Route("/healthz", _healthz, methods=["GET"])]

    async def post(self, request: Request) -> Response:
        body = await request.body()
        try:
            refused = await self._check.refusal(body, request.headers)
        except ReplayMemoryUnavailable as exc:
            log.error("slack: interaction refused: the replay memory is unavailable: %s", exc)
            return PlainTextResponse(UNCHECKED, status_code=503)
        if refused:
            log.warning("slack: interaction refused: %s", refused)
            return PlainTextResponse(refused, status_code=401)
        try:
            payload = json.loads(parse_qs(body.decode())["payload"][0])
        except (KeyError, IndexError, ValueError, UnicodeDecodeError):
            return PlainTextResponse("no interaction payload", status_code=400)
        if not isinstance(payload, dict):
            return PlainTextResponse("no interaction payload", status_code=400)
        kind = payload.get("type")
        if kind == "block_actions":
            for action in payload.get("actions") or []:
                action_id = action.get("action_id") if isinstance(action, dict) else None
                ref = messages.Ref.parse(action.get("value", "")) if isinstance(action, dict) else None
                if action_id in (messages.APPROVE, messages.DENY) and ref is not None:
                    self._spawn(self._decider.click(payload, action_id, ref))
                elif isinstance(action_id, str) and action_id.startswith(messages.ANSWER) \
                        and (chosen := messages.parse_answer(action.get("value", ""))) is not None:
                    self._spawn(self._decider.answer(payload, *chosen))
            return Response(status_code=200)
        if kind == "view_submission":
            view = payload.get("view") or {}
            if view.get("callback_id") != messages.DENY_VIEW:
                return Response(status_code=200)
            where = messages.parse_dialog_metadata(view.get("private_metadata", ""))
            state = (((view.get("state") or {}).get("values") or {}).get(messages.REASON_BLOCK) or {})
            reason = str((state.get(messages.REASON_INPUT) or {}).get("value") or "").strip()
            if not reason:
                return JSONResponse({"response_action": "errors", "errors": {messages.REASON_BLOCK: REASON_NEEDED}})
            if where is not None:
                self._spawn(self._decider.deny(payload, *where, reason))
            return JSONResponse({"response_action": "clear"})
        return Response(status_code=200)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(_logged(work))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def drain(self) -> None:
        await cancel_and_wait(list(self._background))


async def _logged(work: Coroutine[Any, Any, None]) -> None:
    try:
        await work
    except Exception:
        log.exception("slack: handling an interaction failed")


async def _healthz(_: Request) -> Response:
    return PlainTextResponse("ok")


__all__ = ["PATH", "REASON_NEEDED", "UNCHECKED", "Interactions"]
