"""Browser sessions: a signed, HttpOnly, ``SameSite=Strict`` cookie that carries a principal, and its CSRF token.

A browser cannot send a bearer header when it navigates, so the web inbox (:mod:`agent_runtime.ui`) exchanges a
credential once (a token or JWT at ``/ui/login``, a trusted proxy's identity headers, or — in local mode — nothing)
for this cookie. The cookie is a JWT (PyJWT, HS256) signed with a key the browser never sees: the principal, its
groups, how it authenticated, a CSRF token and an expiry. Nothing of the credential it was exchanged for is kept.

Every state-changing request authenticated by the cookie (the inbox's decisions, A2A ``SendMessage`` from the chat
tab, REST) must repeat the CSRF token in the ``X-CSRF-Token`` header (:func:`csrf_ok`); a cross-site page can make
the browser send the cookie (it cannot: ``SameSite=Strict``) but never read the token. The page gets the token in
a ``<meta>`` tag of the HTML it was served.

The signing key is the one stored in the runtime's database (:mod:`agent_runtime.access.session_keys`: replicas share
it, restarts keep it), unless ``--ui-session-key-file`` names one; until the database is open, a key of this process.
Signing out revokes the session's id (:mod:`agent_runtime.access.revocations`): in the runtime, in that database too.

The cookie is ``Secure`` when the request came over HTTPS: served so (``--tls-cert``), or through a trusted proxy
that says so in ``X-Forwarded-Proto`` (:mod:`agent_runtime.access.middleware`), or always with ``--ui-secure-cookie``.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import jwt

from agent_runtime.access.revocations import MemoryRevocations, Revocations
from agent_runtime.contract.principals import Principal

COOKIE = "gatehouse_session"
CSRF_HEADER = "x-csrf-token"
_AUDIENCE = "gatehouse-ui"
DEFAULT_TTL = 8 * 3600.0
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


@dataclass(frozen=True)
class Session:
    principal: Principal
    csrf: str
    expires_at: float
    id: str = ""  # the JWT id: what signing out revokes


class Sessions:
    """Issues and reads session cookies."""

    def __init__(
        self, key: bytes | None = None, ttl: float = DEFAULT_TTL, clock: Callable[[], float] = time.time, *,
        revocations: Revocations | None = None, always_secure: bool = False,
    ) -> None:
        self._key = key or secrets.token_bytes(32)
        self.ttl = ttl
        self._clock = clock
        self.revocations = revocations or MemoryRevocations()  # signed-out sessions, until they would have expired
        self.always_secure = always_secure  # --ui-secure-cookie: Secure even on a request that came over HTTP

    @classmethod
    def from_key_file(
        cls, path: Path | None, ttl: float = DEFAULT_TTL, *, revocations: Revocations | None = None,
        always_secure: bool = False,
    ) -> Sessions:
        key = None
        if path is not None:
            key = path.read_bytes().strip()
            if len(key) < 32:
                raise ValueError(f"--ui-session-key-file {path}: the key must be at least 32 bytes, it has {len(key)}")
        return cls(key, ttl, revocations=revocations, always_secure=always_secure)

    def use_key(self, key: bytes) -> None:
        """Sign with ``key`` from now on (the database's shared key, once it is open)."""
        if len(key) < 32:
            raise ValueError(f"a session key must be at least 32 bytes, this one has {len(key)}")
        self._key = key

    def issue(self, principal: Principal) -> tuple[str, Session]:
        """A new session for ``principal``: the cookie value and what it holds."""
        now = self._clock()
        session = Session(principal, secrets.token_urlsafe(24), now + self.ttl, secrets.token_urlsafe(12))
        claims = {
            "aud": _AUDIENCE, "sub": principal.id, "grp": sorted(principal.groups), "via": principal.via,
            "seen": principal.seen_as, "csrf": session.csrf, "iat": int(now), "exp": int(session.expires_at),
            "jti": session.id,
        }
        return jwt.encode(claims, self._key, algorithm="HS256"), session

    async def read(self, value: str | None) -> Session | None:
        """The session a cookie value holds; None when absent, forged, altered, expired or signed out."""
        session = self._decode(value)
        if session is None or (session.id and await self.revocations.revoked(session.id)):
            return None
        return session

    def _decode(self, value: str | None) -> Session | None:
        if not value:
            return None
        try:
            claims = jwt.decode(
                value, self._key, algorithms=["HS256"], audience=_AUDIENCE,
                options={"require": ["sub", "csrf", "exp"], "verify_exp": False},
            )
        except jwt.PyJWTError:
            return None
        if float(claims["exp"]) <= self._clock():  # our clock, so tests with a fixed clock agree
            return None
        groups = claims.get("grp") or []
        principal = Principal(str(claims["sub"]), frozenset(str(g) for g in groups), str(claims.get("via", "")),
                              str(claims.get("seen", "")))
        return Session(principal, str(claims["csrf"]), float(claims["exp"]), str(claims.get("jti", "")))

    async def valid(self, session: Session) -> bool:
        """Whether ``session`` still holds (not expired, not signed out): long-lived streams ask now and then."""
        return session.expires_at > self._clock() and not (session.id and await self.revocations.revoked(session.id))

    async def revoke(self, session: Session) -> None:
        """Sign out: this session's cookie is refused from now on, even if someone kept a copy."""
        if session.id:
            await self.revocations.revoke(session.id, session.expires_at, self._clock())

    def cookie(self, value: str, *, secure: bool) -> str:
        """The ``Set-Cookie`` header value for a session (HttpOnly, SameSite=Strict, the whole site; ``Secure`` over
        HTTPS or with ``always_secure``)."""
        flags = "; Secure" if secure or self.always_secure else ""
        return f"{COOKIE}={value}; Path=/; Max-Age={int(self.ttl)}; HttpOnly; SameSite=Strict{flags}"

    def clear_cookie(self, *, secure: bool) -> str:
        flags = "; Secure" if secure or self.always_secure else ""
        return f"{COOKIE}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict{flags}"


def csrf_ok(session: Session, header: str | None) -> bool:
    """Whether a request repeats its session's CSRF token (constant-time)."""
    return bool(header) and hmac.compare_digest(header.encode(), session.csrf.encode())  # type: ignore[union-attr]


__all__ = ["COOKIE", "CSRF_HEADER", "DEFAULT_TTL", "UNSAFE_METHODS", "Session", "Sessions", "csrf_ok"]
