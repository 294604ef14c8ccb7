"""The inbox's routes: server-rendered pages (Jinja2), one JSON endpoint for decisions, one event stream.

- ``GET /ui/`` the pending approvals and questions, newest first; ``GET /ui/fragments/inbox`` the same list alone
  (the page's script swaps it in when the event stream says something changed);
- ``GET /ui/history`` decided requests with filters; ``GET /ui/requests/{key}`` one request in full;
- ``GET /ui/chat`` (the runtime's page only) a chat that talks A2A to the agent from the browser;
- ``GET /ui/events`` server-sent ``changed`` events, only for requests the viewer may see;
- ``POST /ui/api/decisions`` ``{"ids": [...], "decision": "approve"|"deny", "reason": "...", "session": false}``; an
  approval of one request may carry ``"arguments": {"path": "new.txt"}`` (the fields the approver changed, the rest
  keep their values: edit and approve, where the policy allows it) and ``"args_hash"`` (the arguments the page showed);
- ``GET|POST /ui/login``, ``POST /ui/logout``.

Authentication is the app's middleware (:mod:`agent_runtime.access.middleware`: bearer, session cookie, trusted
proxy, local mode; the CSRF token on every state-changing request); a page served to a caller with no session yet
(local mode, a trusted proxy) issues one, so its script has a CSRF token to send.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, Literal
from urllib.parse import parse_qs

from jinja2 import Environment, PackageLoader, select_autoescape
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from agent_runtime.access.middleware import foreign_origin, principal_of, proxied, session_of
from agent_runtime.access.sessions import Session, Sessions
from agent_runtime.contract.principals import Principal
from agent_runtime.ui import cards
from agent_runtime.ui.cards import Filters
from agent_runtime.ui.headers import PAGE_HEADERS
from agent_runtime.ui.login import Login
from agent_runtime.ui.source import EditingSource, InboxSource

log = logging.getLogger(__name__)

MAX_BATCH = 100
SESSION_CHECK = 2.0  # seconds: how soon an open event stream notices its session was signed out or expired
_SINCE = {"": 0.0, "1h": 1.0, "24h": 24.0, "7d": 24 * 7.0, "30d": 24 * 30.0}


class DecisionsBody(BaseModel):
    """``POST /ui/api/decisions``: the same decision on one or several requests."""

    model_config = ConfigDict(extra="forbid")

    ids: list[str] = Field(min_length=1, max_length=MAX_BATCH)
    decision: Literal["approve", "deny"]
    reason: str = Field(default="", max_length=2000)
    session: bool = False
    arguments: dict[str, Any] | None = None  # edit and approve: the changed fields (name -> new value) of ONE request
    args_hash: str = Field(default="", max_length=128)  # with ``arguments``: the arguments hash the page showed

    def problem(self) -> str:
        """What is wrong with a body that parsed, in words ("" when nothing is)."""
        if self.decision == "deny" and not self.reason.strip():
            return "a denial needs a reason: the agent is told why its call did not run"
        if self.session and self.decision != "approve":
            return "only an approval can be for the session"
        if self.arguments is not None:
            if self.decision != "approve" or self.session or len(self.ids) != 1:
                return "changed arguments go with an approval of one request, for that call only (not the session)"
        return ""


def _environment() -> Environment:
    env = Environment(loader=PackageLoader("agent_runtime.ui", "templates"), autoescape=select_autoescape(["html"]))
    env.filters.update(when=cards.when, iso=cards.iso, fields=cards.fields, span=cards.span, by_task=cards.by_task)
    env.globals.update(remaining=cards.remaining)
    return env


class InboxPages:
    def __init__(self, source: InboxSource, sessions: Sessions, login: Login, clock: Callable[[], float] = time.time) -> None:
        self.source = source
        self.sessions = sessions
        self.login = login
        self._clock = clock
        self._env = _environment()

    @property
    def routes(self) -> list[BaseRoute]:
        return [
            Mount("/ui/static", StaticFiles(packages=[("agent_runtime.ui", "static")]), name="static"),
            Route("/ui", lambda _: RedirectResponse("/ui/", 308)),
            Route("/ui/", self.inbox),
            Route("/ui/fragments/inbox", self.inbox_fragment),
            Route("/ui/history", self.history),
            Route("/ui/requests/{key:path}", self.detail),
            Route("/ui/chat", self.chat),
            Route("/ui/events", self.events),
            Route("/ui/api/decisions", self.decisions, methods=["POST"]),
            Route("/ui/login", self.login_page, methods=["GET", "POST"]),
            Route("/ui/logout", self.logout, methods=["POST"]),
        ]

    # --- rendering ------------------------------------------------------------------------------

    def _render(self, request: Request, template: str, status_code: int = 200, **context: Any) -> Response:
        session, cookie = self._session(request)
        viewer = principal_of(request)
        html = self._env.get_template(template).render(
            viewer=viewer, csrf=session.csrf if session else "", source=self.source, now=self._clock(),
            can_logout=session is not None and self.login.needed, path=request.url.path, **context,
        )
        response = HTMLResponse(html, status_code, headers=PAGE_HEADERS)
        if cookie:
            response.headers.append("set-cookie", cookie)
        return response

    def _session(self, request: Request) -> tuple[Session | None, str]:
        """The request's session; a page served without one (local mode, a trusted proxy) issues one."""
        session = session_of(request)
        if session is not None or request.url.path == "/ui/login":
            return session, ""
        value, session = self.sessions.issue(principal_of(request))
        return session, self.sessions.cookie(value, secure=request.url.scheme == "https")

    async def _lists(self, viewer: Principal) -> dict[str, Any]:
        pending = await self.source.pending(viewer)
        return {"pending": pending, "questions": await self.source.questions(viewer), "problem": self.source.problem}

    async def inbox(self, request: Request) -> Response:
        return self._render(request, "inbox.html", **await self._lists(principal_of(request)))

    async def inbox_fragment(self, request: Request) -> Response:
        html = self._env.get_template("_items.html").render(now=self._clock(), **await self._lists(principal_of(request)))
        return HTMLResponse(html, headers=PAGE_HEADERS)

    async def history(self, request: Request) -> Response:
        q = request.query_params
        since = q.get("since", "")
        filters = Filters(outcome=q.get("outcome", "") if q.get("outcome") in ("approved", "denied", "expired") else "",
                          decided_by=q.get("decided_by", "").strip(), agent=q.get("agent", "").strip(),
                          since_hours=_SINCE.get(since, 0.0))
        found = await self.source.history(principal_of(request), filters)
        return self._render(request, "history.html", cards=found, filters=filters, since=since if since in _SINCE else "",
                            problem=self.source.problem)

    async def detail(self, request: Request) -> Response:
        key = request.path_params["key"]
        card = await self.source.card(principal_of(request), key)
        if card is None:
            return self._render(request, "missing.html", 404, key=key)
        return self._render(request, "detail.html", card=card)

    async def chat(self, request: Request) -> Response:
        if not self.source.chat:
            return self._render(request, "missing.html", 404, key="chat",
                                note="The chat talks to one agent: open it on that agent's own page (/ui/chat).")
        return self._render(request, "chat.html")

    # --- live -----------------------------------------------------------------------------------

    async def events(self, request: Request) -> Response:
        viewer, session = principal_of(request), session_of(request)
        changes: asyncio.Queue[str] = asyncio.Queue(maxsize=1000)

        def listener(changed: str) -> None:
            with contextlib.suppress(asyncio.QueueFull):  # a client that far behind reloads the list anyway
                changes.put_nowait(changed)

        async def stream() -> AsyncIterator[ServerSentEvent]:
            stop = self.source.subscribe(listener)
            try:
                yield ServerSentEvent(event="hello", data="")
                while session is None or await self.sessions.valid(session):  # a signed-out session's stream ends
                    try:
                        changed = await asyncio.wait_for(changes.get(), SESSION_CHECK)
                    except TimeoutError:
                        continue
                    if await self.source.sees(viewer, changed):
                        yield ServerSentEvent(event="changed", data=changed)
            finally:
                stop()

        return EventSourceResponse(stream(), ping=15, headers={"cache-control": "no-store"})

    # --- deciding -------------------------------------------------------------------------------

    async def decisions(self, request: Request) -> Response:
        try:
            body = DecisionsBody.model_validate_json(await request.body())
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors())
            return JSONResponse({"error": problems}, 422)
        problem = body.problem()
        if problem:
            return JSONResponse({"error": problem}, 422)
        viewer = principal_of(request)
        results = []
        for key in dict.fromkeys(body.ids):  # each request once, in the order given
            if body.arguments is None:
                outcome = await self.source.decide(viewer, key, body.decision, body.reason.strip(), body.session)
            elif isinstance(self.source, EditingSource):
                outcome = await self.source.approve_edited(viewer, key, body.arguments, body.args_hash)
            else:
                outcome = cards.Outcome(key, False, "invalid", "this inbox cannot change a call's arguments: approve or "
                                                               "deny it as it is")
            results.append({"id": outcome.id, "ok": outcome.ok, "status": outcome.status, "message": outcome.message})
        return JSONResponse({"results": results}, headers={"cache-control": "no-store"})

    # --- login ----------------------------------------------------------------------------------

    async def login_page(self, request: Request) -> Response:
        target = _local_path(request.query_params.get("next", "/ui/"))
        if not self.login.needed:
            return RedirectResponse(target, 303)
        if request.method == "GET" and not self.login.form:
            credential = request.query_params.get("launch", "")
            if not credential:
                return self._login_form(request, "", 401)
            return await self._exchange(request, credential, target)
        if request.method == "GET":
            return self._login_form(request, "")
        if foreign_origin(request.headers, proxied(request)):
            return self._login_form(request, "a login from another site's page is refused", 403)
        form = parse_qs((await request.body()).decode("utf-8", "replace"))
        return await self._exchange(request, (form.get("token") or [""])[0], _local_path((form.get("next") or [target])[0]))

    async def _exchange(self, request: Request, credential: str, target: str) -> Response:
        found = await self.login.exchange(credential)
        if isinstance(found, str):
            return self._login_form(request, found, 401)
        value, _ = self.sessions.issue(found)
        response = RedirectResponse(target, 303, headers={"referrer-policy": "no-referrer", "cache-control": "no-store"})
        response.headers.append("set-cookie", self.sessions.cookie(value, secure=request.url.scheme == "https"))
        log.info("inbox session for %s", found.describe())
        return response

    def _login_form(self, request: Request, error: str, status_code: int = 200) -> Response:
        html = self._env.get_template("login.html").render(
            error=error, form=self.login.form, next=_local_path(request.query_params.get("next", "/ui/")),
            source=self.source,
        )
        return HTMLResponse(html, status_code, headers=PAGE_HEADERS)

    async def logout(self, request: Request) -> Response:
        session = session_of(request)
        if session is not None:
            await self.sessions.revoke(session)
        response = RedirectResponse("/ui/login", 303, headers=PAGE_HEADERS)
        response.headers.append("set-cookie", self.sessions.clear_cookie(secure=request.url.scheme == "https"))
        return response


def _local_path(target: str) -> str:
    """Where to go after login: a path of the inbox only (never another site)."""
    return target if target.startswith("/ui/") and not target.startswith("//") and "\\" not in target else "/ui/"


__all__ = ["MAX_BATCH", "DecisionsBody", "InboxPages"]
