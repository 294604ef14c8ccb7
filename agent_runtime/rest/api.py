"""The REST approval API on the runtime; :class:`RestApi` also owns the event stream and the webhooks.

Routes (JSON bodies are the models of :mod:`agent_runtime.rest.models`; every 4xx is a ``ProblemDetails``):

- ``GET /approvals?state=pending|approved|denied|expired|all`` (default pending) → ``ApprovalList``, newest first;
- ``GET /approvals/events`` → server-sent events (:mod:`agent_runtime.rest.stream`);
- ``GET /approvals/{id}`` → 202 + ``Retry-After`` while pending, 200 once decided, 404 unknown; both bodies
  an ``ApprovalView``;
- ``POST /approvals/{id}/decision`` with ``Idempotency-Key`` (400 without) and a ``DecisionBody`` (422 if
  malformed) → 200 ``DecisionResult`` when this request decided it, 409 ``ProblemDetails`` naming who decided what
  when it was decided already, 404 unknown. The key, the caller's own (another principal's same key is another
  key) for ``--idempotency-ttl``, replays the same answer; with another body → 422 (:mod:`agent_runtime.rest.idempotency`).

A decision is the caller's vote, through :class:`agent_runtime.server.decide_one.DecideOne` and the one authority
function: 200 when it decided the request, 202 when it counted but more approvals are needed, 403 when it does
not count (not among the approvers, the requester under separation of duties, a second vote; the vote is
recorded all the same). A vote on a request the caller may not see (another's request with no approvers) is answered
404, as for an unknown id, and recorded as not counted. Every route here needs the caller's principal, which the app's
middleware authenticated (:mod:`agent_runtime.access.middleware`); a caller sees the requests it asked for or may
decide.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Awaitable, Callable

from pydantic import BaseModel
from sqlalchemy import Connection
from sqlalchemy.exc import IntegrityError
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agent_runtime.access.middleware import principal_of
from agent_runtime.approvals import AlreadyDecided, ApprovalRecord, ApprovalService, ArgumentsChanged, Voted
from agent_runtime.approvals import votes as vote_rows
from agent_runtime.contract.authority import Vote, may_see
from agent_runtime.contract.edits import EditRefused
from agent_runtime.contract.principals import Principal
from agent_runtime.infra.database import Database
from agent_runtime.rest import paging
from agent_runtime.rest.idempotency import MAX_KEY_LENGTH, IdempotencyKeys, KeyPurge, StoredAnswer
from agent_runtime.rest.models import STATES, ApprovalList, ApprovalView, BodyError, DecisionBody, DecisionResult, ProblemDetails
from agent_runtime.rest.settings import RestSettings
from agent_runtime.rest.stream import EventStream
from agent_runtime.rest.views import views
from agent_runtime.rest.webhooks import Webhooks
from agent_runtime.server.decide_one import DecideOne, UnknownRequest, wait_for_resumes
from agent_runtime.telemetry.metrics import Metrics

log = logging.getLogger(__name__)

SOURCE = "rest"
Handler = Callable[[Request, Principal], Awaitable[Response]]


def _json(model: BaseModel, status_code: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(model.model_dump_json(), status_code=status_code, headers=headers, media_type="application/json")


def _problem(
    status_code: int, error: str, approval: ApprovalView | None = None, headers: dict[str, str] | None = None
) -> Response:
    return _json(ProblemDetails(error=error, approval=approval), status_code, headers)


class RestApi:
    """Built by the app with the few parts of the runtime it uses."""

    def __init__(
        self, settings: RestSettings, *, agent: str, db: Database, approvals: ApprovalService, metrics: Metrics,
        decide_one: DecideOne,
    ) -> None:
        self.settings = settings
        self._db = db
        self._approvals = approvals
        self._decide_one = decide_one
        self.keys = IdempotencyKeys(db, settings.idempotency_ttl)
        self._purge = KeyPurge(self.keys)
        self.stream = EventStream(db, agent)
        self.webhooks = Webhooks(db, agent, settings, metrics)
        self._unsubscribe: list[Callable[[], None]] = []

    @property
    def routes(self) -> list[Route]:
        return [
            Route("/approvals", self._guard(self.list_approvals), methods=["GET"]),
            Route("/approvals/events", self._guard(self.events), methods=["GET"]),
            Route("/approvals/{request_id}", self._guard(self.get_approval), methods=["GET"]),
            Route("/approvals/{request_id}/decision", self._guard(self.decide), methods=["POST"]),
        ]

    async def start(self) -> None:
        """After the runtime's stores are open: the idempotency table and its purge, the listeners, the webhook workers."""
        await self.keys.create_tables()
        self._purge.start()
        events = self._approvals.events
        self._unsubscribe = [events.subscribe(self.stream.on_approval_event), events.subscribe(self.webhooks.on_approval_event)]
        self.webhooks.start()

    async def stop(self) -> None:
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wait_for_resumes(), 10.0)
        await self._purge.stop()
        await self.webhooks.stop()

    # --- auth -----------------------------------------------------------------------------------

    def _guard(self, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            return await handler(request, principal_of(request))  # authenticated by the app's middleware

        return endpoint

    @staticmethod
    def _visible(record: ApprovalRecord, principal: Principal) -> bool:
        return may_see(record.approvers, record.requested_by, principal.id, principal.groups)

    # --- reading --------------------------------------------------------------------------------

    async def list_approvals(self, request: Request, principal: Principal) -> Response:
        state = request.query_params.get("state", "pending")
        if state not in STATES:
            return _problem(422, f"state must be one of {', '.join(STATES)}, not {state!r}")
        try:
            limit = paging.limit_of(request.query_params.get("limit"))
            after = paging.after_of(request.query_params.get("cursor"))
        except paging.PageError as exc:
            return _problem(422, str(exc))
        status = None if state == "all" else state
        shown: list[ApprovalRecord] = []
        exhausted = False
        while len(shown) <= limit and not exhausted:  # only what this caller may see counts towards the page
            batch = await self._approvals.by_status(status, limit=limit + 1, after=after)
            exhausted = len(batch) <= limit
            for record in batch:
                after = (record.created_at, record.position, record.id)
                if self._visible(record, principal):
                    shown.append(record)
                    if len(shown) > limit:
                        break
        page = shown[:limit]
        next_cursor = paging.cursor_of(page[-1]) if len(shown) > limit else None  # one more seen: there is a next page
        return _json(ApprovalList(approvals=await views(self._db, page), next_cursor=next_cursor))

    async def get_approval(self, request: Request, principal: Principal) -> Response:
        request_id = request.path_params["request_id"]
        record = await self._approvals.get(request_id)
        if record is None or not self._visible(record, principal):
            return _problem(404, f"no approval request {request_id!r}")
        (view,) = await views(self._db, [record])
        if record.status == "pending":
            wait = max(1, min(self.settings.retry_after, math.ceil(record.expires_at - time.time())))
            return _json(view, 202, {"Retry-After": str(wait)})
        return _json(view)

    async def events(self, request: Request, principal: Principal) -> Response:
        # Like the list: only the requests this caller asked for or may decide.
        return self.stream.response(request.headers.get("last-event-id"), lambda record: self._visible(record, principal))

    # --- deciding -------------------------------------------------------------------------------

    async def decide(self, request: Request, principal: Principal) -> Response:
        request_id = request.path_params["request_id"]
        key = request.headers.get("idempotency-key", "").strip()
        if not key or len(key) > MAX_KEY_LENGTH:
            return _problem(400, f"an Idempotency-Key header (1-{MAX_KEY_LENGTH} characters) is required: "
                                 "a new unique value per decision, the same value only to retry that decision")
        try:
            body = DecisionBody.parse(await request.body())
        except BodyError as exc:
            return _problem(422, str(exc))
        fingerprint = body.fingerprint(request_id)
        stored = await self.keys.get(principal.id, key)
        if stored is not None:
            return self._replay(stored, fingerprint, key)
        record = await self._approvals.get(request_id)
        vote = Vote(principal.id, principal.groups, body.decision, body.reason, SOURCE, principal.seen_as)
        if record is None or not self._visible(record, principal):
            if record is not None:
                await self._decide_one.refuse_unseen(record, vote)
            return _problem(404, f"no approval request {request_id!r}")
        answer: list[tuple[int, str]] = []

        def remember(conn: Connection, _: float, results: list[Voted]) -> None:
            # Inside the vote's transaction, after the judgement: the key stores exactly the answer given.
            so_far = vote_rows.counted(vote_rows.for_request(conn, request_id))  # as recorded, with groups and channel
            answer.append(self._answer(results[0], principal, so_far))
            self.keys.write(conn, principal.id, key, request_id, fingerprint, *answer[-1])

        try:
            await self._decide_one(request_id, vote, also=remember, arguments=body.arguments, seen=body.args_hash,
                                   record=record)
        except EditRefused as exc:
            return _problem(422, f"{exc} Nothing was decided; the request is still pending.")
        except UnknownRequest:
            return _problem(404, f"no approval request {request_id!r}")
        except IntegrityError:  # the same key, used at the same moment by another request, won
            stored = await self.keys.get(principal.id, key)
            assert stored is not None
            return self._replay(stored, fingerprint, key)
        except ArgumentsChanged as exc:
            (view,) = await views(self._db, [exc.record])
            return _problem(409, str(exc), view)
        except AlreadyDecided as exc:
            current = await self._approvals.get(request_id)
            (view,) = await views(self._db, [current or record])
            conflict = ProblemDetails(error=str(exc), approval=view).model_dump_json()
            answered = await self.keys.put(principal.id, key, request_id, fingerprint, 409, conflict)
            return self._replay(answered, fingerprint, key)
        return Response(answer[-1][1], status_code=answer[-1][0], media_type="application/json")

    @staticmethod
    def _answer(voted: Voted, principal: Principal, so_far: list[Vote]) -> tuple[int, str]:
        """The status and body a vote is answered with: 200 decided, 202 counted and waiting, 403 not counted."""
        judgement, record = voted.judgement, voted.record
        decided_by = None
        if voted.decided:
            tally = judgement.tally
            decided_by = tally.decided_by
        view = ApprovalView.of(record, decided_by, so_far)
        if not judgement.counted:
            return 403, ProblemDetails(error=f"your vote does not count: {judgement.refused}", approval=view).model_dump_json()
        if voted.decided:
            message = f"{record.describe_decision()} (decided by {decided_by})"
            return 200, DecisionResult(approval=view, message=message).model_dump_json()
        message = f"recorded {principal.id}'s approval: {judgement.tally.progress()}; the request is still pending"
        return 202, DecisionResult(applied=False, approval=view, message=message).model_dump_json()

    @staticmethod
    def _replay(stored: StoredAnswer, fingerprint: str, key: str) -> Response:
        if stored.fingerprint != fingerprint:
            return _problem(422, f"Idempotency-Key {key!r} was already used for another request or decision; "
                                 "use a new key for a new decision")
        return Response(stored.response_json, status_code=stored.status_code, media_type="application/json")


__all__ = ["SOURCE", "RestApi"]
