"""The ways a bearer token can prove who sent it; the :class:`~agent_runtime.access.authenticator.Authenticator`
tries each in turn.

A method answers with an :class:`Identity` (the name and groups the method knows, before
:class:`~agent_runtime.contract.principals.Identities` folds aliases together), None when the token is not one of its
own or is not valid, and raises :class:`Unavailable` when it cannot tell right now (a TokenReview the API
server did not answer): the request then gets 503, not 401, and nothing is decided.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from agent_runtime.access.tokens import Tokens, user_for


@dataclass(frozen=True)
class Identity:
    name: str
    groups: frozenset[str]
    via: str  # token, jwt, kubernetes


class Unavailable(Exception):
    """The method could not check the token now (its backend is down); ``str(exc)`` says why."""


class BearerMethod(Protocol):
    via: str  # names the method in logs and in the agent card's security schemes
    scheme: dict[str, str]  # the agent card's security scheme (A2A HTTPAuthSecurityScheme fields)

    async def identify(self, token: str) -> Identity | None: ...


class TokenFileMethod:
    """Tokens from the token file (:mod:`agent_runtime.access.tokens`)."""

    via = "token"
    scheme = {"scheme": "Bearer", "description": "a token from the agent's token file"}

    def __init__(self, tokens: Tokens) -> None:
        self.tokens = tokens

    async def identify(self, token: str) -> Identity | None:
        user = user_for(self.tokens, token)
        return Identity(user.name, user.groups, self.via) if user is not None else None


__all__ = ["BearerMethod", "Identity", "TokenFileMethod", "Unavailable"]
