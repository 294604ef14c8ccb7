"""Bearer tokens for the REST API: parsing the token file and checking a request's ``Authorization``.

A token file (the chart mounts it from a Secret) holds one token per line, either ``principal:token`` — the
principal is then recorded as ``decided_by`` — or a bare token (``decided_by`` is then the default, "rest").
Blank lines and ``#`` comments are ignored. Tokens are compared in constant time, against every known
token, so the answer's timing says nothing about how much of a guess was right.
"""

from __future__ import annotations

import hmac

Tokens = dict[str, str]  # token -> principal


def parse_tokens(text: str, default_principal: str) -> Tokens:
    tokens: Tokens = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        principal, sep, token = line.partition(":")
        if not sep:
            principal, token = default_principal, line
        principal, token = principal.strip(), token.strip()
        if not principal or not token:
            raise ValueError(f"API token line {number}: expected 'principal:token' or a bare token")
        tokens[token] = principal
    return tokens


def principal_for(tokens: Tokens, authorization: str | None) -> str | None:
    """The principal whose token the ``Authorization: Bearer …`` header carries, else None."""
    scheme, _, presented = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not presented.strip():
        return None
    given = presented.strip().encode()
    found = None
    for token, principal in tokens.items():
        if hmac.compare_digest(token.encode(), given):  # no early exit: every token is compared
            found = principal
    return found


__all__ = ["Tokens", "parse_tokens", "principal_for"]
