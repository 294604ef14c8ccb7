"""What every inbox response carries for the browser's sake.

The Content-Security-Policy allows this origin's own scripts, styles and connections only: no inline script, no
CDN, no framing. No Referer leaves the site (``same-origin``); the local inbox's launch URL (it carries the
per-launch secret) is answered with a redirect that sends none at all. Pages are never cached: they show who may decide what, now.
"""

from __future__ import annotations

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


__all__ = ["CSP", "PAGE_HEADERS"]
