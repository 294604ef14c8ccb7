"""Identity headers count only from the proxies the runtime was told to trust."""

from __future__ import annotations

import pytest

from agent_runtime.access.proxy import TrustedProxy

HEADERS = {"x-forwarded-user": "alice@example.com", "x-forwarded-groups": "sre, dev,,"}


def test_headers_from_a_trusted_address_name_the_person_and_groups() -> None:
    proxy = TrustedProxy.of(["10.0.0.0/8", "127.0.0.1"])
    identity = proxy.identity("10.1.2.3", HEADERS)
    assert identity is not None and identity.name == "alice@example.com" and identity.groups == {"sre", "dev"}
    assert identity.via == "proxy"
    assert proxy.identity("127.0.0.1", HEADERS) is not None


def test_headers_from_anyone_else_or_with_no_user_are_ignored() -> None:
    proxy = TrustedProxy.of(["10.0.0.0/8"])
    assert proxy.identity("192.168.1.1", HEADERS) is None
    assert proxy.identity(None, HEADERS) is None
    assert proxy.identity("not-an-ip", HEADERS) is None
    assert proxy.identity("10.0.0.1", {"x-forwarded-user": "  "}) is None
    assert TrustedProxy().identity("10.0.0.1", HEADERS) is None  # none configured: never


def test_a_bad_source_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"--ui-trusted-proxy 'proxy\.local' is not an address or network"):
        TrustedProxy.of(["proxy.local"])
