"""Every request but the public ones carries a principal: the ASGI middleware in front of the whole app, and
the A2A call-context builder that hands that principal to a2a-sdk.

Public: the probes, the metrics and the agent card (it declares how to authenticate). Everything else — A2A
JSON-RPC (send, stream, get, list, cancel, subscribe, push config), REST, the event stream — answers 401 with
``WWW-Authenticate: Bearer`` without a valid credential, and 503 when a credential could not be checked now
(a TokenReview the API server did not answer): never "anonymous" by accident.

Browsers (the web inbox, :mod:`agent_runtime.ui`) authenticate with the session cookie of
:mod:`agent_runtime.access.sessions` instead, or through a trusted proxy's identity headers
(:mod:`agent_runtime.access.proxy`); a state-changing request authenticated that way must carry the session's CSRF
token. A bearer header always wins over a cookie. Any state-changing request that a browser marks as coming from
another site (an ``Origin`` that is not this host) is refused, whatever it carries: in local mode that, with the Host
check of :mod:`agent_runtime.access.hosts`, is what keeps a web page from deciding through ``127.0.0.1``.
Unauthenticated page loads under ``/ui/`` are sent to the login page.

This is the only place ``X-Forwarded-*`` headers are read, and only on a request the trusted proxy vouches for
(:meth:`~agent_runtime.access.proxy.TrustedProxy.vouches`), public paths included: ``X-Forwarded-User``/``-Groups``
name the person, ``X-Forwarded-Proto: https`` makes the request's scheme ``https`` (so the session cookie is
``Secure`` behind a proxy that terminates TLS), ``X-Forwarded-Host`` counts as this host for the ``Origin`` check.
"""

from __future__ import annotations

import json
from urllib.parse import quote

from a2a.auth.user import User
from a2a.server.routes.common import DefaultServerCallContextBuilder
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from agent_runtime.access.authenticator import Authenticator
from agent_runtime.access.methods import Unavailable
from agent_runtime.access.proxy import HOST_HEADER, TrustedProxy, forwarded_https, named
from agent_runtime.access.sessions import COOKIE, CSRF_HEADER, UNSAFE_METHODS, Session, Sessions, csrf_ok
from agent_runtime.contract.principals import Principal, anonymous
from agent_runtime.server.owners import CallerUser

PUBLIC_PATHS = frozenset({"/healthz", "/readyz", "/metrics", "/.well-known/agent-card.json", "/.well-known/agent.json"})
UI_PREFIX = "/ui/"
UI_PUBLIC = ("/ui/static/", "/ui/login")  # the inbox's assets and its login form answer everyone
UI_NOT_PAGES = ("/ui/events", "/ui/fragments/", "/ui/api/")  # what the page's script fetches: 401, not the login page
SCOPE_KEY = "gatehouse.principal"
SESSION_KEY = "gatehouse.session"  # the session cookie the request carried, if any
PROXIED_KEY = "gatehouse.proxied"  # True: the trusted proxy vouches for this request


def _public(path: str) -> bool:
    return path in PUBLIC_PATHS or path.startswith(UI_PUBLIC)


def foreign_origin(headers: Headers, proxied: bool = False) -> bool:
    """Whether a browser says this request comes from a page of another site (a CSRF attempt). Non-browser clients
    send no ``Origin``. On a request the trusted proxy vouches for (``proxied``), ``X-Forwarded-Host`` counts as ours
    too: the proxy may rewrite ``Host``."""
    origin = headers.get("origin")
    if origin is None:
        return False
    if origin == "null":  # sandboxed frames, opaque origins
        return True
    ours = {headers.get("host", "").lower(), headers.get(HOST_HEADER, "").lower() if proxied else ""} - {""}
    return origin.split("://", 1)[-1].rstrip("/").lower() not in ours


class RequirePrincipal:
    def __init__(
        self, app: ASGIApp, authenticator: Authenticator, sessions: Sessions | None = None,
        proxy: TrustedProxy | None = None,
    ) -> None:
        self.app = app
        self.authenticator = authenticator
        self.sessions = sessions
        self.proxy = proxy or TrustedProxy()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = Headers(scope=scope)
        client = scope.get("client")
        peer = client[0] if client else None
        vouched = self.proxy.vouches(peer, headers)
        scope[PROXIED_KEY] = vouched
        if vouched and forwarded_https(headers):
            scope["scheme"] = "https"  # the browser's side of the proxy is HTTPS: the session cookie is Secure
        if _public(scope["path"]):
            return await self.app(scope, receive, send)
        unsafe = scope["method"] in UNSAFE_METHODS
        if unsafe and foreign_origin(headers, vouched):
            return await _answer(send, 403, "a request from another site's page is refused (Origin does not match Host)", {})
        authorization = headers.get("authorization")
        if authorization is not None:
            return await self._bearer(scope, receive, send, authorization)
        session = await self.sessions.read(_cookie(headers)) if self.sessions is not None else None
        proxied = named(headers) if vouched else None
        if proxied is not None:
            principal = self.authenticator.identities.resolve(proxied.name, proxied.groups, proxied.via)
            if session is not None and (session.principal.id, session.principal.groups) != (principal.id, principal.groups):
                session = None  # someone else now behind the proxy: their page gets its own session
        elif session is not None:
            principal = session.principal
        elif not self.authenticator.required:
            principal = anonymous()  # local mode
        else:
            return await self._unauthenticated(scope, send)
        browser = proxied is not None or session is not None or scope["path"].startswith(UI_PREFIX)
        if unsafe and browser and (session is None or not csrf_ok(session, headers.get(CSRF_HEADER))):
            return await _answer(send, 403, "this request needs the page's CSRF token (X-CSRF-Token); reload the page", {})
        scope[SCOPE_KEY] = principal
        scope[SESSION_KEY] = session
        await self.app(scope, receive, send)

    async def _bearer(self, scope: Scope, receive: Receive, send: Send, authorization: str) -> None:
        try:
            principal = await self.authenticator.principal(authorization)
        except Unavailable as exc:
            return await _answer(send, 503, f"the credential could not be checked now: {exc}", {"retry-after": "5"})
        if principal is None:
            return await self._unauthenticated(scope, send)
        scope[SCOPE_KEY] = principal
        scope[SESSION_KEY] = None
        await self.app(scope, receive, send)

    async def _unauthenticated(self, scope: Scope, send: Send) -> None:
        if scope["path"].startswith(UI_PREFIX) and scope["method"] == "GET" and not scope["path"].startswith(UI_NOT_PAGES):
            return await _redirect(send, f"/ui/login?next={quote(scope['path'])}")
        error = "a valid 'Authorization: Bearer <token>' header is required"
        if _cookie(Headers(scope=scope)) is not None:  # a browser whose session ended (expired, signed out, restart)
            error = "your session has ended: sign in again at /ui/login"
        return await _answer(send, 401, error, {"www-authenticate": 'Bearer realm="gatehouse"'})


def _cookie(headers: Headers) -> str | None:
    for raw in headers.getlist("cookie"):
        for part in raw.split(";"):
            name, _, value = part.strip().partition("=")
            if name == COOKIE:
                return value
    return None


async def _redirect(send: Send, location: str) -> None:
    await send({"type": "http.response.start", "status": 303,
                "headers": [(b"location", location.encode()), (b"content-length", b"0")]})
    await send({"type": "http.response.body", "body": b""})


async def _answer(send: Send, status: int, error: str, headers: dict[str, str]) -> None:
    body = json.dumps({"error": error}).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.encode(), v.encode()) for k, v in headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


def principal_of(request: Request) -> Principal:
    """The principal :class:`RequirePrincipal` authenticated for this request."""
    found = request.scope.get(SCOPE_KEY)
    return found if isinstance(found, Principal) else anonymous()


def proxied(request: Request) -> bool:
    """Whether the trusted proxy vouches for this request (:class:`RequirePrincipal` looked)."""
    return request.scope.get(PROXIED_KEY) is True


def session_of(request: Request) -> Session | None:
    """The session cookie this request was authenticated with (None: a bearer token, a proxy, local mode)."""
    found = request.scope.get(SESSION_KEY)
    return found if isinstance(found, Session) else None


class PrincipalContextBuilder(DefaultServerCallContextBuilder):
    """a2a-sdk's call contexts, with the authenticated principal as their user (tasks are filed under it)."""

    def build_user(self, request: Request) -> User:
        return CallerUser(principal_of(request))


__all__ = ["PUBLIC_PATHS", "SESSION_KEY", "UI_PREFIX", "PrincipalContextBuilder", "RequirePrincipal", "foreign_origin",
           "principal_of", "proxied", "session_of"]
