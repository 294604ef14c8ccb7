"""JwtMethod: good tokens name their principal; every kind of bad token is refused (None), never an error."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import time
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm
from jwt.utils import base64url_decode, base64url_encode

from agent_runtime.access.jwt_tokens import JwtMethod
from agent_runtime.access.methods import Identity
from agent_runtime.contract.agent_config import JwtConfig

ISSUER = "https://issuer.example"
AUDIENCE = "gatehouse"
RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())
OTHER_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def jwk(key: Any, kid: str) -> dict[str, Any]:
    algorithm = RSAAlgorithm if isinstance(key, rsa.RSAPrivateKey) else ECAlgorithm
    return {**algorithm.to_jwk(key.public_key(), as_dict=True), "kid": kid, "use": "sig"}


def write_jwks(path: Path, *keys: dict[str, Any]) -> Path:
    path.write_text(json.dumps({"keys": list(keys)}))
    return path


@pytest.fixture
def jwks(tmp_path: Path) -> Path:
    return write_jwks(tmp_path / "jwks.json", jwk(RSA_KEY, "rsa-1"), jwk(EC_KEY, "ec-1"))


def config(jwks: Path, **overrides: Any) -> JwtConfig:
    return JwtConfig(jwks_file=str(jwks), issuer=ISSUER, audience=AUDIENCE, **overrides)


def claims(**overrides: Any) -> dict[str, Any]:
    base = {"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "exp": int(time.time()) + 300, "groups": ["sre", "oncall"]}
    return {k: v for k, v in {**base, **overrides}.items() if v is not None}


def token(key: Any = RSA_KEY, kid: str | None = "rsa-1", algorithm: str = "RS256", **overrides: Any) -> str:
    headers = {"kid": kid} if kid is not None else {}
    return jwt.encode(claims(**overrides), key, algorithm=algorithm, headers=headers)


async def test_a_good_token_names_issuer_and_subject_with_groups(jwks: Path) -> None:
    method = JwtMethod(config(jwks))
    assert await method.identify(token()) == Identity(f"{ISSUER}#alice", frozenset({"sre", "oncall"}), "jwt")
    assert method.via == "jwt" and method.scheme["bearerFormat"] == "JWT"


@pytest.mark.parametrize("algorithm", ["RS384", "PS256"])
async def test_an_rsa_key_without_alg_verifies_other_rsa_algorithms(jwks: Path, algorithm: str) -> None:
    assert await JwtMethod(config(jwks)).identify(token(algorithm=algorithm)) is not None


async def test_a_key_that_names_its_alg_verifies_that_alg_only(tmp_path: Path) -> None:
    method = JwtMethod(config(write_jwks(tmp_path / "pinned.json", {**jwk(RSA_KEY, "rsa-1"), "alg": "RS256"})))
    assert await method.identify(token()) is not None
    assert await method.identify(token(algorithm="RS384")) is None


async def test_an_ec_key_is_selected_by_kid(jwks: Path) -> None:
    identity = await JwtMethod(config(jwks)).identify(token(EC_KEY, "ec-1", "ES256"))
    assert identity is not None and identity.name == f"{ISSUER}#alice"


async def test_principal_claim_names_the_principal(jwks: Path) -> None:
    method = JwtMethod(config(jwks, principal_claim="email"))
    identity = await method.identify(token(email="alice@example.com"))
    assert identity is not None and identity.name == "alice@example.com"
    assert await method.identify(token()) is None  # no such claim
    assert await method.identify(token(email="")) is None
    assert await method.identify(token(email=["alice@example.com"])) is None


async def test_a_token_without_sub_is_refused_when_the_principal_is_issuer_and_sub(jwks: Path) -> None:
    assert await JwtMethod(config(jwks)).identify(token(sub=None)) is None
    assert await JwtMethod(config(jwks)).identify(token(sub="")) is None


@pytest.mark.parametrize(("value", "groups"), [
    ("sre, oncall", {"sre", "oncall"}),
    (["sre", 7, ""], {"sre"}),
    ({"sre": True}, set()),
    (None, set()),
])
async def test_groups_claim(jwks: Path, value: Any, groups: set[str]) -> None:
    identity = await JwtMethod(config(jwks, groups_claim="roles")).identify(token(roles=value))
    assert identity is not None and identity.groups == groups


async def test_a_single_key_serves_a_token_without_kid(tmp_path: Path) -> None:
    method = JwtMethod(config(write_jwks(tmp_path / "one.json", jwk(RSA_KEY, "only"))))
    assert await method.identify(token(kid=None)) is not None


async def test_a_token_without_kid_is_refused_when_several_keys_could_be_meant(jwks: Path) -> None:
    assert await JwtMethod(config(jwks)).identify(token(kid=None)) is None


@pytest.mark.parametrize("bad", [
    pytest.param(lambda: token(iss="https://elsewhere.example"), id="wrong-issuer"),
    pytest.param(lambda: token(iss=None), id="no-issuer"),
    pytest.param(lambda: token(aud="someone-else"), id="wrong-audience"),
    pytest.param(lambda: token(aud=None), id="no-audience"),
    pytest.param(lambda: token(exp=int(time.time()) - 120), id="expired"),
    pytest.param(lambda: token(exp=None), id="no-exp"),
    pytest.param(lambda: token(OTHER_KEY), id="bad-signature"),
    pytest.param(lambda: token(kid="rsa-2"), id="unknown-kid"),
    pytest.param(lambda: token(EC_KEY, "rsa-1", "ES256"), id="ec-signature-under-rsa-kid"),
    pytest.param(lambda: token(RSA_KEY, "ec-1", "RS256"), id="rsa-signature-under-ec-kid"),
    pytest.param(lambda: token(None, algorithm="none"), id="alg-none"),
    pytest.param(lambda: tamper(token(), sub="bob"), id="tampered-payload"),
    pytest.param(lambda: f"{unsigned({'alg': ['RS256'], 'kid': 'rsa-1'}, claims())}.{token().split('.')[2]}",
                 id="alg-not-a-string"),
    pytest.param(lambda: "not-a-jwt", id="not-a-jwt"),
    pytest.param(lambda: "a.b.c", id="three-parts-of-garbage"),
])
async def test_bad_tokens_are_refused(jwks: Path, bad: Any) -> None:
    assert await JwtMethod(config(jwks)).identify(bad()) is None


async def test_a_token_signed_with_a_key_of_another_jwks_is_refused(jwks: Path, tmp_path: Path) -> None:
    # Same kid, other key: the kid only selects a key, it proves nothing.
    foreign = JwtMethod(config(write_jwks(tmp_path / "other.json", jwk(OTHER_KEY, "rsa-1"))))
    stolen = token(OTHER_KEY)
    assert await foreign.identify(stolen) is not None
    assert await JwtMethod(config(jwks)).identify(stolen) is None


async def test_hs256_signed_with_the_public_key_is_refused(jwks: Path) -> None:
    # The classic algorithm confusion: the public key (which anyone may have) used as an HMAC secret.
    public_pem = RSA_KEY.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    forged = hs256(claims(), public_pem, "rsa-1")
    assert await JwtMethod(config(jwks)).identify(forged) is None


def hs256(payload: dict[str, Any], secret: bytes, kid: str) -> str:
    # PyJWT refuses to HMAC with a PEM key, as an attacker's own code would not: sign by hand.
    signing_input = unsigned({"alg": "HS256", "typ": "JWT", "kid": kid}, payload)
    return f"{signing_input}.{b64(hmac.new(secret, signing_input.encode(), hashlib.sha256).digest())}"


def unsigned(header: dict[str, Any], payload: dict[str, Any]) -> str:
    return f"{b64(json.dumps(header).encode())}.{b64(json.dumps(payload).encode())}"


def b64(data: bytes) -> str:
    return base64url_encode(data).decode()


def tamper(good: str, **changes: Any) -> str:
    header, payload, signature = good.split(".")
    body = json.loads(base64url_decode(payload))
    return f"{header}.{b64(json.dumps({**body, **changes}).encode())}.{signature}"


async def test_an_hs_key_in_the_jwks_is_not_usable(tmp_path: Path) -> None:
    path = write_jwks(tmp_path / "oct.json", {"kty": "oct", "k": "c2VjcmV0", "kid": "k"})
    with pytest.raises(ValueError, match=re.escape(str(path))):
        JwtMethod(config(path))


@pytest.mark.parametrize("content", [
    None, "{not json", "[]", '{"keys": []}', '{"keys": [{"kty": "RSA"}]}',
    json.dumps({"keys": [{**jwk(RSA_KEY, "enc-1"), "use": "enc"}]}),  # an encryption key signs nothing
])
def test_an_unusable_jwks_file_is_a_clear_error(tmp_path: Path, content: str | None) -> None:
    path = tmp_path / "jwks.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ValueError, match=re.escape(str(path))):
        JwtMethod(config(path))


async def test_reload_picks_up_rotated_keys_and_keeps_the_old_ones_on_error(jwks: Path) -> None:
    method = JwtMethod(config(jwks))
    write_jwks(jwks, jwk(OTHER_KEY, "rsa-2"))
    assert await method.identify(token(OTHER_KEY, "rsa-2")) is None
    method.reload()
    assert await method.identify(token(OTHER_KEY, "rsa-2")) is not None
    assert await method.identify(token()) is None
    jwks.write_text("{broken")
    with pytest.raises(ValueError, match=re.escape(str(jwks))):
        method.reload()
    assert await method.identify(token(OTHER_KEY, "rsa-2")) is not None


async def test_the_leeway_forgives_a_little_clock_skew(jwks: Path) -> None:
    assert await JwtMethod(config(jwks)).identify(token(exp=int(time.time()) - 10)) is not None
