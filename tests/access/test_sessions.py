"""Browser sessions: the cookie carries the principal and a CSRF token, and nothing forged, altered or stale works."""

from __future__ import annotations

import jwt
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_runtime.access.sessions import COOKIE, Sessions, csrf_ok
from agent_runtime.contract.principals import Principal

ALICE = Principal("alice", frozenset({"sre", "dev"}), "token", "alice")


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


async def test_a_session_round_trips_the_principal_and_its_groups() -> None:
    sessions = Sessions(b"k" * 32)
    value, issued = sessions.issue(ALICE)
    read = await sessions.read(value)
    assert read is not None and read.principal == ALICE and read.csrf == issued.csrf
    assert ALICE.id not in issued.csrf and len(issued.csrf) >= 24


async def test_forged_altered_foreign_and_expired_cookies_are_no_session() -> None:
    clock = Clock()
    sessions = Sessions(b"k" * 32, ttl=60, clock=clock)
    value, _ = sessions.issue(ALICE)
    header, payload, signature = value.split(".")
    claims = jwt.decode(value, options={"verify_signature": False})
    forged = jwt.encode({**claims, "sub": "ceo"}, b"x" * 32, algorithm="HS256")  # another key
    unsigned = jwt.encode({**claims, "sub": "ceo"}, None, algorithm="none")
    other_runtime = Sessions(b"o" * 32).issue(ALICE)[0]
    for bad in (forged, unsigned, other_runtime, f"{header}.{payload}x.{signature}", "", None, "garbage"):
        assert await sessions.read(bad) is None, bad
    clock.now += 61
    assert await sessions.read(value) is None  # expired


async def test_another_key_per_process_unless_a_key_file_is_shared(tmp_path) -> None:  # type: ignore[no-untyped-def]
    value, _ = Sessions().issue(ALICE)
    assert await Sessions().read(value) is None
    key = tmp_path / "key"
    key.write_bytes(b"s" * 40)
    shared, _ = Sessions.from_key_file(key).issue(ALICE)
    assert await Sessions.from_key_file(key).read(shared) is not None
    key.write_bytes(b"short")
    with pytest.raises(ValueError, match="at least 32 bytes"):
        Sessions.from_key_file(key)


def test_the_cookie_is_http_only_strict_and_secure_over_https_or_when_told() -> None:
    sessions = Sessions(b"k" * 32)
    cookie = sessions.cookie("v", secure=True)
    assert cookie.startswith(f"{COOKIE}=v;") and "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Secure" in cookie
    assert "Secure" not in sessions.cookie("v", secure=False)
    assert "Max-Age=0" in sessions.clear_cookie(secure=False) and "Secure" not in sessions.clear_cookie(secure=False)
    forced = Sessions(b"k" * 32, always_secure=True)  # --ui-secure-cookie
    assert "; Secure" in forced.cookie("v", secure=False) and "; Secure" in forced.clear_cookie(secure=False)


@given(st.text(max_size=40))
def test_only_the_sessions_own_csrf_token_passes(guess: str) -> None:
    _, session = Sessions(b"k" * 32).issue(ALICE)
    assert csrf_ok(session, session.csrf)
    assert csrf_ok(session, guess) == (guess == session.csrf)
    assert not csrf_ok(session, None) and not csrf_ok(session, "")


async def test_signing_out_revokes_the_session_even_for_a_kept_copy() -> None:
    sessions = Sessions(b"k" * 32)
    value, _ = sessions.issue(ALICE)
    other, _ = sessions.issue(ALICE)
    read = await sessions.read(value)
    assert read is not None
    await sessions.revoke(read)
    assert await sessions.read(value) is None and await sessions.read(other) is not None  # only that session
    assert not await sessions.valid(read)
