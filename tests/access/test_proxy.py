"""Headers from a proxy count only from the proxies the runtime was told to trust; a network with loopback in it (every
local process: a sidecar, a port-forward) counts only with the proxy's shared secret."""

from __future__ import annotations

import pytest

from agent_runtime.access.proxy import SECRET_HEADER, TrustedProxy, forwarded_https

HEADERS = {"x-forwarded-user": "alice@example.com", "x-forwarded-groups": "sre, dev,,"}
SECRET = "s" * 40


def test_headers_from_a_trusted_address_name_the_person_and_groups() -> None:
    proxy = TrustedProxy.of(["10.0.0.0/8", "192.168.7.7"])
    identity = proxy.identity("10.1.2.3", HEADERS)
    assert identity is not None and identity.name == "alice@example.com" and identity.groups == {"sre", "dev"}
    assert identity.via == "proxy"
    assert proxy.identity("192.168.7.7", HEADERS) is not None
    assert proxy.identity("::ffff:10.1.2.3", HEADERS) is not None  # as a dual-stack socket reports an IPv4 peer


def test_headers_from_anyone_else_or_with_no_user_are_ignored() -> None:
    proxy = TrustedProxy.of(["10.0.0.0/8"])
    assert proxy.identity("192.168.1.1", HEADERS) is None
    assert proxy.identity(None, HEADERS) is None
    assert proxy.identity("not-an-ip", HEADERS) is None
    assert proxy.identity("10.0.0.1", {"x-forwarded-user": "  "}) is None
    assert proxy.identity("127.0.0.1", {**HEADERS, "x-forwarded-for": "10.1.2.3"}) is None  # the peer is what counts
    assert TrustedProxy().identity("10.0.0.1", HEADERS) is None  # none configured: never


@pytest.mark.parametrize("network", ["127.0.0.1", "127.0.0.0/8", "127.5.0.0/16", "::1", "0.0.0.0/0", "::/0",
                                     "::ffff:127.0.0.1"])
def test_a_network_with_loopback_in_it_is_refused_without_a_secret(network: str) -> None:
    with pytest.raises(ValueError, match=r"contains a loopback address.*--ui-trusted-proxy-secret-file"):
        TrustedProxy.of(["10.0.0.0/8", network])
    assert TrustedProxy.of([network], SECRET).configured


def test_with_a_secret_only_requests_that_carry_it_are_the_proxys() -> None:
    proxy = TrustedProxy.of(["127.0.0.1", "10.0.0.0/8"], SECRET)
    assert proxy.identity("127.0.0.1", {**HEADERS, SECRET_HEADER: SECRET}) is not None
    assert proxy.identity("10.1.2.3", {**HEADERS, SECRET_HEADER: SECRET}) is not None
    for sent in ({}, {SECRET_HEADER: ""}, {SECRET_HEADER: SECRET[:-1]}, {SECRET_HEADER: SECRET + "x"}):
        assert proxy.identity("127.0.0.1", {**HEADERS, **sent}) is None, sent
        assert not proxy.vouches("10.1.2.3", sent)
    assert not proxy.vouches("192.168.1.1", {SECRET_HEADER: SECRET})  # the secret from elsewhere: not the proxy


def test_a_short_secret_and_a_bad_source_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="at least 32 characters, it has 5"):
        TrustedProxy.of(["127.0.0.1"], "short")
    with pytest.raises(ValueError, match=r"--ui-trusted-proxy 'proxy\.local' is not an address or network"):
        TrustedProxy.of(["proxy.local"])


@pytest.mark.parametrize(("value", "https"), [
    ("https", True), ("HTTPS", True), ("http, https", True), ("https, http", False), ("http", False), ("", False),
    (None, False),
])
def test_forwarded_proto_is_the_nearest_hops(value: str | None, https: bool) -> None:
    assert forwarded_https({} if value is None else {"x-forwarded-proto": value}) == https
