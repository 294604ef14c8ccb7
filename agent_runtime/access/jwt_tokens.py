"""JWTs as bearer tokens, for callers whose identity provider (an OIDC issuer, a company SSO) signs them.

The keys come from a JWKS file (mounted from a ConfigMap or Secret), not fetched at request time: a token is
checked offline, so an unreachable issuer can neither stall the gate nor open it. Only asymmetric algorithms are
accepted: with HS* the published public key could serve as the shared secret, and ``none`` proves nothing.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt

from agent_runtime.access.methods import Identity
from agent_runtime.contract.agent_config import JwtConfig

log = logging.getLogger(__name__)

_RSA = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"})
ASYMMETRIC = _RSA | {"ES256", "ES384", "ES512", "EdDSA"}
LEEWAY = 30  # seconds of clock skew forgiven on exp, nbf and iat


@dataclass(frozen=True)
class _Key:
    kid: str | None
    algorithms: frozenset[str]  # the only algorithms a token signed with this key may name
    key: Any  # a cryptography public key


def _key(jwk: Any) -> _Key | None:
    """A JWKS entry as a verification key; None for a key that cannot verify an accepted signature."""
    if not isinstance(jwk, dict) or jwk.get("use", "sig") != "sig":
        return None
    try:
        parsed = jwt.PyJWK(jwk)
    except (jwt.PyJWTError, TypeError):  # TypeError: an alg that is not a string
        return None
    if "alg" in jwk:  # the key names its algorithm: nothing else may use it
        algorithms = frozenset({parsed.algorithm_name}) & ASYMMETRIC
    else:  # an RSA key fits every RSA algorithm; an EC key's curve fixes its algorithm
        algorithms = _RSA if parsed.key_type == "RSA" else frozenset({parsed.algorithm_name}) & ASYMMETRIC
    key = parsed.key.public_key() if hasattr(parsed.key, "public_key") else parsed.key  # a private JWK still verifies
    kid = jwk.get("kid")
    return _Key(kid if isinstance(kid, str) else None, algorithms, key) if algorithms else None


def load_jwks(path: Path) -> list[_Key]:
    try:
        document = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"cannot read the JWKS file {path}: {type(exc).__name__}: {exc}") from None
    entries = document.get("keys") if isinstance(document, dict) else None
    keys = [key for key in map(_key, entries if isinstance(entries, list) else []) if key is not None]
    if not keys:
        raise ValueError(f"the JWKS file {path} holds no usable signature key (RSA, EC or Ed25519)")
    return keys


class JwtMethod:
    via = "jwt"

    def __init__(self, config: JwtConfig) -> None:
        self.config = config
        self.path = Path(config.jwks_file)
        self.keys = load_jwks(self.path)
        self.scheme = {"scheme": "Bearer", "bearerFormat": "JWT", "description": f"a JWT issued by {config.issuer}"}

    def reload(self) -> None:
        """Read the JWKS file again (keys rotate); on error the keys in use stay, and ValueError says why."""
        self.keys = load_jwks(self.path)

    def _key_for(self, kid: object) -> _Key | None:
        if kid is None:  # no kid: only unambiguous with a single key
            return self.keys[0] if len(self.keys) == 1 else None
        return next((key for key in self.keys if key.kid == kid), None)

    async def identify(self, token: str) -> Identity | None:
        if token.count(".") != 2:  # not a JWT: leave it to the other methods, quickly
            return None
        try:
            header = jwt.get_unverified_header(token)
            key = self._key_for(header.get("kid"))
            if key is None:
                raise jwt.InvalidKeyError("no key in the JWKS file has this token's kid")
            algorithm = header.get("alg")
            # The key decides the algorithm, not the token: never HS*, none, or another key type's algorithm.
            if not isinstance(algorithm, str) or algorithm not in key.algorithms:
                raise jwt.InvalidAlgorithmError(f"algorithm {algorithm!r} is not allowed with key {key.kid!r}")
            claims = jwt.decode(
                token, key.key, algorithms=[algorithm], audience=self.config.audience, issuer=self.config.issuer,
                leeway=LEEWAY, options={"require": ["exp", "iss", "aud"]},
            )
        except (jwt.PyJWTError, ValueError) as exc:
            log.debug("JWT not accepted: %s: %s", type(exc).__name__, exc)
            return None
        claim = self.config.principal_claim or "sub"
        name = claims.get(claim)
        if not isinstance(name, str) or not name:  # an empty name would be a principal anyone could become
            log.debug("JWT not accepted: claim %r is not a non-empty string", claim)
            return None
        if not self.config.principal_claim:  # sub is only unique per issuer
            name = f"{claims['iss']}#{name}"
        return Identity(name, _groups(claims.get(self.config.groups_claim)), self.via)


def _groups(value: object) -> frozenset[str]:
    if isinstance(value, str):  # some issuers send "a,b" rather than a list
        value = value.split(",")
    if not isinstance(value, list):
        return frozenset()
    return frozenset(group.strip() for group in value if isinstance(group, str) and group.strip())


__all__ = ["ASYMMETRIC", "LEEWAY", "JwtMethod", "load_jwks"]
