"""How a browser gets its session cookie (:mod:`agent_runtime.access.sessions`).

- :class:`TokenLogin`, the runtime's page: the person pastes a token or JWT once into a password field; the
  runtime's one :class:`~agent_runtime.access.authenticator.Authenticator` checks it and the browser gets a cookie
  for that principal. The credential is not kept (not in the cookie, not in page storage). In local mode (no
  credential configured) there is nothing to exchange: the page opens as ``anonymous``. Behind a trusted proxy the
  proxy's headers identify the person and no login is needed.
- :class:`LaunchLogin`, ``kubectl gatehouse inbox``: the URL printed at launch carries a secret made for this launch;
  opening it exchanges the secret for a cookie for the kubeconfig's identity. Any other local process may reach the
  port, but not without the secret.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Protocol

from agent_runtime.access.authenticator import Authenticator
from agent_runtime.access.methods import Unavailable
from agent_runtime.contract.principals import Principal


class Login(Protocol):
    form: bool  # whether the login page asks for a token

    @property
    def needed(self) -> bool:
        """Whether a browser must log in at all (not in local mode)."""
        ...

    async def exchange(self, credential: str) -> Principal | str:
        """The principal a token or launch secret stands for, or why it does not stand for one."""
        ...


@dataclass
class TokenLogin:
    authenticator: Authenticator
    form: bool = True

    @property
    def needed(self) -> bool:
        return self.authenticator.required

    async def exchange(self, credential: str) -> Principal | str:
        credential = credential.strip()
        if not credential:
            return "paste a token or JWT"
        if credential.lower().startswith("bearer "):
            credential = credential[7:].strip()
        try:
            principal = await self.authenticator.principal(f"Bearer {credential}")
        except Unavailable as exc:
            return f"the token could not be checked now ({exc}); try again"
        return principal if principal is not None else "this token is not valid here"


@dataclass
class LaunchLogin:
    secret: str
    principal: Principal
    form: bool = False

    @property
    def needed(self) -> bool:
        return True

    async def exchange(self, credential: str) -> Principal | str:
        if credential and hmac.compare_digest(credential.encode(), self.secret.encode()):
            return self.principal
        return "open the inbox with the URL `kubectl gatehouse inbox` printed (it carries this launch's secret)"


__all__ = ["LaunchLogin", "Login", "TokenLogin"]
