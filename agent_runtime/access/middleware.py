"""Every request but the public ones carries a principal: the ASGI middleware in front of the whole app, and
the A2A call-context builder that hands that principal to a2a-sdk.

Public: the probes, the metrics and the agent card (it declares how to authenticate). Everything else — A2A
JSON-RPC (send, stream, get, list, cancel, subscribe, push config), REST, the event stream — answers 401 with
``WWW-Authenticate: Bearer`` without a valid credential, and 503 when a credential could not be checked now
(a TokenReview the API server did not answer): never "anonymous" by accident.
"""

from __future__ import annotations

import json

from a2a.auth.user import User
from a2a.server.routes.common import DefaultServerCallContextBuilder
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from agent_runtime.access.authenticator import Authenticator
from agent_runtime.access.methods import Unavailable
from agent_runtime.principals import Principal, anonymous
from agent_runtime.server.owners import CallerUser

PUBLIC_PATHS = frozenset({"/healthz", "/readyz", "/metrics", "/.well-known/agent-card.json", "/.well-known/agent.json"})
SCOPE_KEY = "gatehouse.principal"


class RequirePrincipal:
    def __init__(self, app: ASGIApp, authenticator: Authenticator) -> None:
        self.app = app
        self.authenticator = authenticator

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in PUBLIC_PATHS:
            return await self.app(scope, receive, send)
        try:
            principal = await self.authenticator.principal(Headers(scope=scope).get("authorization"))
        except Unavailable as exc:
            return await _answer(send, 503, f"the credential could not be checked now: {exc}", {"retry-after": "5"})
        if principal is None:
            error = "a valid 'Authorization: Bearer <token>' header is required"
            return await _answer(send, 401, error, {"www-authenticate": 'Bearer realm="gatehouse"'})
        scope[SCOPE_KEY] = principal
        await self.app(scope, receive, send)


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


class PrincipalContextBuilder(DefaultServerCallContextBuilder):
    """a2a-sdk's call contexts, with the authenticated principal as their user (tasks are filed under it)."""

    def build_user(self, request: Request) -> User:
        return CallerUser(principal_of(request))


__all__ = ["PUBLIC_PATHS", "PrincipalContextBuilder", "RequirePrincipal", "principal_of"]
