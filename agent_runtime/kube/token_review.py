"""Kubernetes tokens (ServiceAccount tokens, or any the API server accepts) as bearer tokens, checked with a
TokenReview: the API server says whose token it is, so the runtime holds no keys of its own.

Answers are cached, keyed by the token's sha256 (the token itself is never kept): a caller's every request
would otherwise cost a round trip to the API server. A yes is kept ``ttl`` seconds, never past the token's own
``exp``; a no for 10 s, so a client retrying a bad token does not hammer the API server either. The runtime's
ServiceAccount needs the right to create tokenreviews (the ``system:auth-delegator`` ClusterRole grants it).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import jwt

from agent_runtime.access.methods import Identity, Unavailable
from agent_runtime.kube.client import KubeClient, KubeError

log = logging.getLogger(__name__)

PATH = "/apis/authentication.k8s.io/v1/tokenreviews"
NEGATIVE_TTL = 10.0


class TokenReviewMethod:
    via = "kubernetes"
    scheme = {"scheme": "Bearer", "description": "a Kubernetes ServiceAccount token (checked with a TokenReview)"}

    def __init__(
        self, kube: KubeClient, audiences: Sequence[str] = (), ttl: float = 60.0, max_entries: int = 1024,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kube = kube
        self.audiences = list(audiences)  # empty: tokens meant for the API server itself
        self.ttl = ttl
        self.max_entries = max_entries
        self.clock = clock
        self._cache: OrderedDict[str, tuple[float, Identity | None]] = OrderedDict()  # sha256 -> (until, answer)

    async def identify(self, token: str) -> Identity | None:
        digest = hashlib.sha256(token.encode()).hexdigest()
        cached = self._cache.get(digest)
        if cached is not None:
            if cached[0] > self.clock():
                return cached[1]
            del self._cache[digest]
        spec: dict[str, Any] = {"token": token}
        if self.audiences:
            spec["audiences"] = self.audiences
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec}
        try:
            review = await self.kube.create(PATH, body)
        except KubeError as exc:
            raise Unavailable(_why(exc)) from None
        identity = self._identity(review.get("status") or {})
        lifetime = min(self.ttl, _expires_in(token)) if identity is not None else NEGATIVE_TTL
        if lifetime > 0:
            self._remember(digest, self.clock() + lifetime, identity)
        return identity

    def _identity(self, status: dict[str, Any]) -> Identity | None:
        if status.get("authenticated") is not True:
            log.debug("TokenReview: not authenticated (%s)", status.get("error") or "no reason given")
            return None
        # With audiences asked for, an API server that is not audience-aware answers with none: not good enough.
        if self.audiences and not set(self.audiences) & set(status.get("audiences") or []):
            log.debug("TokenReview: the token is not meant for audiences %s", self.audiences)
            return None
        user = status.get("user") or {}
        name, groups = user.get("username"), user.get("groups") or []
        if not isinstance(name, str) or not name or not isinstance(groups, list):
            log.debug("TokenReview: authenticated, but with no usable user name")
            return None
        return Identity(name, frozenset(g for g in groups if isinstance(g, str)), self.via)

    def _remember(self, digest: str, until: float, identity: Identity | None) -> None:
        self._cache[digest] = (until, identity)
        while len(self._cache) > self.max_entries:  # bounded: random tokens must not grow memory
            self._cache.popitem(last=False)


def _expires_in(token: str) -> float:
    """Seconds until a JWT's ``exp`` (read, not verified: the API server has just vouched for the token);
    infinity for a token that is not a JWT or has no exp."""
    try:
        exp = jwt.decode(token, options={"verify_signature": False}).get("exp")
    except (jwt.PyJWTError, ValueError):
        return float("inf")
    if isinstance(exp, bool) or not isinstance(exp, int | float):
        return float("inf")
    return exp - time.time()


def _why(exc: KubeError) -> str:
    if exc.status == 0:
        return f"cannot check a Kubernetes token: the API server could not be reached ({exc.message})"
    if exc.status == 403:
        return ("cannot check a Kubernetes token: the runtime's ServiceAccount may not create tokenreviews "
                f"(authentication.k8s.io); bind it to the system:auth-delegator ClusterRole ({exc.message})")
    return f"cannot check a Kubernetes token: the TokenReview failed with HTTP {exc.status} ({exc.message})"


__all__ = ["NEGATIVE_TTL", "PATH", "TokenReviewMethod"]
