"""The Host check (DNS rebinding): which names a request may be addressed to, and when the runtime checks at all."""

from __future__ import annotations

import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from agent_runtime.access.hosts import AllowedHosts, HostCheck, host_of, runtime_hosts, split_host


@pytest.mark.parametrize(("header", "found"), [
    ("127.0.0.1:8080", ("127.0.0.1", 8080)), ("LocalHost", ("localhost", None)), ("localhost.:9", ("localhost", 9)),
    ("[::1]:8080", ("::1", 8080)), ("[0:0::1]", ("::1", None)), ("app.example.com:443", ("app.example.com", 443)),
    ("", None), (":80", None), ("a:b", None), ("[::1", None), ("[::1]x", None),
])
def test_a_host_header_is_split_into_name_and_port(header: str, found: tuple[str, int | None] | None) -> None:
    assert split_host(header) == found


def test_loopback_on_any_port_and_the_named_hosts_only() -> None:
    allowed = AllowedHosts.of(["gatehouse.example.com", "10.0.0.5:8443"])
    for ok in ("127.0.0.1:8080", "127.0.0.1:1234", "localhost", "localhost:5", "127.9.9.9:8080", "[::1]:8080",
               "gatehouse.example.com", "GATEHOUSE.example.com:80", "10.0.0.5:8080"):
        assert allowed.allows(ok), ok
    for refused in ("rebind.attacker.example:8080", "rebind.attacker.example", "localhost.attacker.example:8080",
                    "127.0.0.1.attacker.example", "example.com", "0.0.0.0:8080", "10.0.0.6", "", None):
        assert not allowed.allows(refused), refused


def test_a_port_of_its_own_allows_loopback_on_that_port_only() -> None:
    allowed = AllowedHosts(port=8765)  # kubectl gatehouse inbox
    assert allowed.allows("127.0.0.1:8765") and allowed.allows("localhost:8765") and allowed.allows("[::1]:8765")
    assert not allowed.allows("127.0.0.1:8766") and not allowed.allows("127.0.0.1") and not allowed.allows("evil:8765")


def test_configured_hosts_are_checked_at_start_up() -> None:
    assert host_of("App.Example.com:8443") == "app.example.com" and host_of("fd00::1") == "fd00::1"
    assert host_of("[fd00:0::1]:80") == "fd00::1"
    with pytest.raises(ValueError, match="--allowed-host 'a:b' is not a host name or address"):
        host_of("a:b")


def test_when_the_runtime_checks() -> None:
    local = runtime_hosts((), local_mode=True, loopback_bind=True, public_url="https://agent.example.com:8443/")
    assert local is not None and local.names == {"agent.example.com"}
    assert runtime_hosts(("x.example",), local_mode=False, loopback_bind=True, public_url=None) == AllowedHosts.of(["x.example"])
    assert runtime_hosts((), local_mode=False, loopback_bind=False, public_url=None) is None  # a cluster's runtime
    insecure = runtime_hosts((), local_mode=True, loopback_bind=False, public_url=None, anonymous_remote=True)
    assert insecure == AllowedHosts()  # --insecure-allow-anonymous on 0.0.0.0: still checked, loopback only
    assert runtime_hosts(("*",), local_mode=False, loopback_bind=True, public_url=None) is None  # off, with a credential
    assert runtime_hosts(("*",), local_mode=True, loopback_bind=False, public_url=None, anonymous_remote=True) is None
    with pytest.raises(ValueError, match="DNS rebinding"):
        runtime_hosts(("*",), local_mode=True, loopback_bind=True, public_url=None)


def test_the_middleware_answers_421_except_on_exempt_paths() -> None:
    async def ok(_: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

    app = Starlette(routes=[Route("/", ok), Route("/healthz", ok)], middleware=[
        Middleware(HostCheck, allowed=AllowedHosts(), exempt=frozenset({"/healthz"}))])
    client = TestClient(app, base_url="http://rebind.attacker.example:8080")
    refused = client.get("/")
    assert refused.status_code == 421 and "DNS rebinding" in refused.json()["error"]
    assert client.get("/healthz").text == "ok"
    assert client.get("/", headers={"host": "localhost:9999"}).text == "ok"
