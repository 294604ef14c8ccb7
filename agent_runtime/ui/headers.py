"""What every inbox response carries for the browser's sake, and the Host check of the local inbox.

The Content-Security-Policy allows this origin's own scripts, styles and connections only: no inline script, no
CDN, no framing. No Referer leaves the site (``same-origin``); the local inbox's launch URL (it carries the
per-launch secret) is answered with a redirect that sends none at all. Pages are never cached: they show who may decide what, now.
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
PAGE_HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",  # no-referrer would make browsers send "Origin: null" on our own form posts
    "x-frame-options": "DENY",
    "cache-control": "no-store",
}


class HostCheck:
    """Answer only requests addressed to one of ``allowed`` (``127.0.0.1:8765``…): a page on another site that
    re-points its own name at 127.0.0.1 (DNS rebinding) sends its own name as Host and is refused."""

    def __init__(self, app: ASGIApp, allowed: frozenset[str]) -> None:
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and Headers(scope=scope).get("host", "").lower() not in self.allowed:
            body = b"this inbox answers only http://127.0.0.1 and http://localhost on its own port"
            await send({"type": "http.response.start", "status": 421,
                        "headers": [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)


__all__ = ["CSP", "PAGE_HEADERS", "HostCheck"]
