"""``Authenticator``: the one place a request's ``Authorization`` header becomes a :class:`Principal`.

Every channel of the runtime (A2A JSON-RPC, REST, the event stream, later the web inbox) asks it, so a person is
the same principal everywhere. Methods are tried in order (token file, JWT, Kubernetes TokenReview); the first
that knows the token wins. With no method configured the runtime is in local mode: every caller is the
``anonymous`` principal (the app only allows that on loopback, or with ``--insecure-allow-anonymous``).
"""

from __future__ import annotations

from collections.abc import Sequence

from agent_runtime.access.methods import BearerMethod
from agent_runtime.access.tokens import bearer
from agent_runtime.contract.principals import Identities, Principal, anonymous


class Authenticator:
    def __init__(
        self, methods: Sequence[BearerMethod], identities: Identities | None = None, *, required: bool | None = None,
    ) -> None:
        self.methods = list(methods)
        self.identities = identities or Identities()
        self._required = required  # True with no methods: browser sessions only (kubectl gatehouse inbox)

    @property
    def required(self) -> bool:
        """Whether callers must authenticate (some method is configured, or sessions alone are accepted)."""
        return self._required if self._required is not None else bool(self.methods)

    async def principal(self, authorization: str | None) -> Principal | None:
        """The caller's principal; None when a credential is required and this one is missing or not valid.
        Raises :class:`~agent_runtime.access.methods.Unavailable` when a method could not check it right now."""
        if not self.required:
            return anonymous()
        token = bearer(authorization)
        if token is None:
            return None
        for method in self.methods:
            identity = await method.identify(token)
            if identity is not None:
                return self.identities.resolve(identity.name, identity.groups, identity.via)
        return None

    def security_schemes(self) -> dict[str, dict[str, str]]:
        """The agent card's ``securitySchemes``: one HTTP bearer scheme per method."""
        return {method.via: dict(method.scheme) for method in self.methods}


__all__ = ["Authenticator"]
