"""The inbox as its own small app, for ``kubectl gatehouse inbox``: the same pages, one person, 127.0.0.1 only.

The person is the kubeconfig's identity (the caller resolved it with a SelfSubjectReview); the browser becomes
that person only by opening the launch URL, whose secret is exchanged for the session cookie
(:class:`~agent_runtime.ui.login.LaunchLogin`). No bearer token is accepted, the Host header must name a loopback
name or address on this port (no DNS rebinding), and every state-changing request carries the CSRF token.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.middleware import Middleware

from agent_runtime.access.authenticator import Authenticator
from agent_runtime.access.hosts import AllowedHosts, HostCheck
from agent_runtime.access.middleware import RequirePrincipal
from agent_runtime.access.sessions import Sessions
from agent_runtime.contract.principals import Principal
from agent_runtime.ui.login import LaunchLogin
from agent_runtime.ui.pages import InboxPages
from agent_runtime.ui.source import InboxSource


def allowed_hosts(port: int) -> AllowedHosts:
    """A loopback name or address on this port only (127.0.0.1:PORT, localhost:PORT)."""
    return AllowedHosts(port=port)


def standalone_app(source: InboxSource, *, principal: Principal, secret: str, port: int) -> Starlette:
    sessions = Sessions()
    pages = InboxPages(source, sessions, LaunchLogin(secret, principal))
    middleware = [
        Middleware(HostCheck, allowed=allowed_hosts(port),
                   message="this inbox answers only http://127.0.0.1 and http://localhost on its own port"),
        Middleware(RequirePrincipal, authenticator=Authenticator([], required=True), sessions=sessions),
    ]
    return Starlette(routes=pages.routes, middleware=middleware)


__all__ = ["allowed_hosts", "standalone_app"]
