"""The token file (principals, groups, bare tokens), the constant-time lookup, and the access settings built from it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agent_runtime.access.authenticator import Authenticator
from agent_runtime.access.methods import TokenFileMethod
from agent_runtime.access.settings import is_loopback, load_access_settings
from agent_runtime.access.tokens import TokenUser, bearer, parse_tokens, user_for
from agent_runtime.contract.agent_config import AccessConfig, IdentityConfig
from agent_runtime.contract.principals import ANONYMOUS, UNOWNED, Identities


def test_token_file_lines() -> None:
    tokens = parse_tokens("# comment\n\nalice:tok-a\n bob : tok-b \nbare\ncarol:groups=sre, oncall:tok-c\n", "rest")
    assert tokens == {
        "tok-a": TokenUser("alice"), "tok-b": TokenUser("bob"), "bare": TokenUser("rest"),
        "tok-c": TokenUser("carol", frozenset({"sre", "oncall"})),
    }
    with pytest.raises(ValueError, match="line 1"):
        parse_tokens(":no-principal", "rest")
    with pytest.raises(ValueError, match="line 2"):
        parse_tokens("ok\nalice:", "rest")
    with pytest.raises(ValueError, match="already given to 'alice'"):
        parse_tokens("alice:same\nbob:same", "rest")
    assert parse_tokens("", "rest") == {}
    # written before groups existed: everything after the first colon is the token
    assert parse_tokens("dave:tok:with:colons", "rest") == {"tok:with:colons": TokenUser("dave")}


def test_bearer_header_is_checked_against_every_token() -> None:
    tokens = {"tok-a": TokenUser("alice"), "tok-b": TokenUser("bob")}
    assert user_for(tokens, "tok-b") == TokenUser("bob")
    assert bearer("bearer  tok-a ") == "tok-a"
    for header in (None, "", "Bearer", "Bearer ", "Basic tok-a", "tok-a"):
        assert bearer(header) is None, header
    for token in ("tok-c", "tok-a2", "tok-"):
        assert user_for(tokens, token) is None, token


def test_authenticator_resolves_aliases_and_refuses_the_rest() -> None:
    tokens = parse_tokens("alice:groups=sre:tok-a\n", "rest")
    identities = Identities.of([IdentityConfig(principal="alice@example.com", aliases=["alice"])])
    auth = Authenticator([TokenFileMethod(tokens)], identities)

    async def check() -> None:
        principal = await auth.principal("Bearer tok-a")
        assert principal is not None
        assert (principal.id, principal.groups, principal.via, principal.seen_as) == (
            "alice@example.com", frozenset({"sre"}), "token", "alice")
        assert await auth.principal("Bearer nope") is None
        assert await auth.principal(None) is None
        local = await Authenticator([]).principal(None)
        assert local is not None and local.id == ANONYMOUS

    asyncio.run(check())
    assert auth.security_schemes() == {"token": TokenFileMethod.scheme}


def test_an_alias_given_to_two_principals_is_refused() -> None:
    with pytest.raises(ValueError, match="'bob' is given to both"):
        Identities.of([IdentityConfig(principal="a", aliases=["bob"]), IdentityConfig(principal="b", aliases=["bob"])])


def test_access_settings_from_config_file_and_environment(tmp_path: Path) -> None:
    (tmp_path / "tokens").write_text("carol:tok-c\n")
    settings = load_access_settings(AccessConfig(token_file=str(tmp_path / "tokens")), env={"GATEHOUSE_API_TOKEN": "tok-env"})
    assert settings.tokens == {"tok-c": TokenUser("carol"), "tok-env": TokenUser("rest")} and settings.configured
    assert settings.owner_of_unowned(authenticated=True) == UNOWNED
    assert load_access_settings(AccessConfig(), env={}).owner_of_unowned(authenticated=False) == ANONYMOUS
    adopted = load_access_settings(AccessConfig(unowned_tasks_owner="ops"), env={})
    assert not adopted.configured and adopted.owner_of_unowned(authenticated=True) == "ops"
    assert [is_loopback(h) for h in ("127.0.0.1", "::1", "localhost", "0.0.0.0", "10.0.0.1", "example.com")] == [
        True, True, True, False, False, False]
