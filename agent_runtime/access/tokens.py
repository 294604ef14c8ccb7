"""Bearer tokens from a token file: parsing it, and finding whose token a request carries.

A token file (the operator mounts it from a Secret) holds one token per line:

- ``principal:token`` — the token authenticates ``principal``;
- ``principal:groups=sre,oncall:token`` — and ``principal`` belongs to those groups;
- a bare ``token`` — it authenticates the default principal (``rest``, as before principals existed).

Blank lines and ``#`` comments are ignored. A token never contains ``:`` after an options field; without one,
everything after the first ``:`` is the token (as in files written before groups existed). Tokens are compared
in constant time, against every known token, so the answer's timing says nothing about how much of a guess was
right.
"""

from __future__ import annotations

import hmac
import re
from dataclasses import dataclass

_OPTIONS = re.compile(r"^groups=([^:]*):(.+)$")


@dataclass(frozen=True)
class TokenUser:
    name: str
    groups: frozenset[str] = frozenset()


Tokens = dict[str, TokenUser]  # token -> who it authenticates


def parse_tokens(text: str, default_principal: str) -> Tokens:
    tokens: Tokens = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        principal, sep, rest = line.partition(":")
        if not sep:
            principal, rest = default_principal, line
        groups: frozenset[str] = frozenset()
        options = _OPTIONS.match(rest.strip())
        if options is not None:
            groups = frozenset(g.strip() for g in options.group(1).split(",") if g.strip())
            rest = options.group(2)
        principal, token = principal.strip(), rest.strip()
        if not principal or not token:
            raise ValueError(f"token file line {number}: expected 'principal:token', 'principal:groups=a,b:token' "
                             "or a bare token")
        if token in tokens:
            raise ValueError(f"token file line {number}: this token is already given to {tokens[token].name!r}")
        tokens[token] = TokenUser(principal, groups)
    return tokens


def bearer(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer …`` header, else None."""
    scheme, _, presented = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not presented.strip():
        return None
    return presented.strip()


def user_for(tokens: Tokens, token: str) -> TokenUser | None:
    """Who ``token`` authenticates, compared in constant time against every token."""
    given = token.encode()
    found = None
    for known, user in tokens.items():
        if hmac.compare_digest(known.encode(), given):  # no early exit: every token is compared
            found = user
    return found


__all__ = ["TokenUser", "Tokens", "bearer", "parse_tokens", "user_for"]
