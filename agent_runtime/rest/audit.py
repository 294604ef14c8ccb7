"""``GET /audit``: the audit log (:mod:`agent_runtime.approvals.audit`) for the auditors the Agent names; and
the retention that keeps it for ``spec.audit.retention``.

``GET /audit`` answers an :class:`AuditPage` (``entries`` oldest first, ``next_cursor`` while more match) to a
principal listed in ``spec.audit.auditors`` (a user, or a member of a group), 403 to anyone else (401 without a
credential, as every route), 422 naming a bad parameter. Parameters, all optional: ``since`` and ``until`` (a
date ``2026-11-01``, a time ``2026-11-01T08:00:00Z`` or a duration back from now, ``24h``), ``agent``, ``tool``,
``principal`` (who acted), ``requested_by`` (whose call), ``request_id``, ``event``, ``limit`` (1-1000, default
100) and ``cursor`` (the previous page's ``next_cursor``); an unknown parameter is a 422, so a typo never widens
the answer. The route has no other method (405): nothing edits the audit through the API.

:class:`AuditRetention` deletes audit events and votes older than the retention (never those of a request still
pending), every quarter of the retention and at least hourly.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agent_runtime.access.middleware import principal_of
from agent_runtime.approvals.audit import EVENTS, MAX_PAGE, AuditLog, AuditPage, AuditQuery, parse_cursor, parse_time
from agent_runtime.contract.agent_config import AuditConfig, AuditorsConfig
from agent_runtime.contract.principals import Principal
from agent_runtime.infra.database import Database
from agent_runtime.infra.periodic import PeriodicSweep
from agent_runtime.rest.models import ProblemDetails

log = logging.getLogger(__name__)

PARAMETERS = frozenset({
    "since", "until", "agent", "tool", "principal", "requested_by", "request_id", "event", "limit", "cursor",
})
DEFAULT_LIMIT = 100


class QueryError(ValueError):
    """A query parameter that cannot be used; ``str(exc)`` names it."""


def is_auditor(auditors: AuditorsConfig, principal: Principal) -> bool:
    return principal.id in auditors.users or not principal.groups.isdisjoint(auditors.groups)


def parse_query(params: dict[str, str], now: float) -> tuple[AuditQuery, str | None, int, str | None]:
    """``(query, cursor, limit, agent)`` from the query string; :class:`QueryError` for anything unusable."""
    unknown = sorted(set(params) - PARAMETERS)
    if unknown:
        raise QueryError(f"unknown parameter {unknown[0]!r}; known: {', '.join(sorted(PARAMETERS))}")
    try:
        since = parse_time(params["since"], now) if "since" in params else None
        until = parse_time(params["until"], now) if "until" in params else None
        cursor = params.get("cursor") or None
        if cursor is not None:
            parse_cursor(cursor)
    except ValueError as exc:
        raise QueryError(str(exc)) from None
    try:
        limit = int(params.get("limit", DEFAULT_LIMIT))
    except ValueError:
        limit = 0
    if not 1 <= limit <= MAX_PAGE:
        raise QueryError(f"limit must be a whole number from 1 to {MAX_PAGE}, not {params.get('limit')!r}")
    event = params.get("event")
    if event is not None and event not in EVENTS:
        raise QueryError(f"event must be one of {', '.join(EVENTS)}, not {event!r}")
    query = AuditQuery(since=since, until=until, tool=params.get("tool"), principal=params.get("principal"),
                       requested_by=params.get("requested_by"), request_id=params.get("request_id"), event=event)
    return query, cursor, limit, params.get("agent")


def _problem(status_code: int, error: str) -> Response:
    return Response(ProblemDetails(error=error).model_dump_json(), status_code=status_code, media_type="application/json")


class AuditRetention(PeriodicSweep):
    name = "gatehouse-audit-retention"

    def __init__(self, audit: AuditLog, retention_seconds: float, clock: Callable[[], float] = time.time) -> None:
        super().__init__(min(3600.0, max(1.0, retention_seconds / 4)))
        self._audit = audit
        self._retention = retention_seconds
        self._clock = clock

    async def sweep(self) -> int:
        gone = await self._audit.prune(self._clock() - self._retention)
        if gone:
            log.info("audit retention: deleted %d event(s) and vote(s) older than %gs", gone, self._retention)
        return gone


class AuditApi:
    """The audit's route and its retention; the app mounts :attr:`routes` and calls :meth:`start` and :meth:`stop`."""

    def __init__(self, config: AuditConfig, *, db: Database, agent: str, clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self.log = AuditLog(db, agent)
        self.retention = AuditRetention(self.log, config.retention_seconds, clock)
        self._clock = clock

    @property
    def routes(self) -> list[Route]:
        return [Route("/audit", self.read, methods=["GET"])]

    async def start(self) -> None:
        self.retention.start()

    async def stop(self) -> None:
        await self.retention.stop()

    async def read(self, request: Request) -> Response:
        principal = principal_of(request)  # authenticated by the app's middleware
        if not is_auditor(self.config.auditors, principal):
            return _problem(403, f"{principal.id} is not an auditor of this agent (spec.audit.auditors)")
        try:
            query, cursor, limit, agent = parse_query(dict(request.query_params), self._clock())
        except QueryError as exc:
            return _problem(422, str(exc))
        if agent is not None and agent != self.log.agent:
            return Response(AuditPage(entries=[]).model_dump_json(), media_type="application/json")
        page = await self.log.page(query, cursor, limit)
        return Response(page.model_dump_json(), media_type="application/json")


__all__ = ["DEFAULT_LIMIT", "PARAMETERS", "AuditApi", "AuditRetention", "QueryError", "is_auditor", "parse_query"]
