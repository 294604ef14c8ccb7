"""The middleware in front of every route: bearer, session cookie with CSRF, trusted proxy, local mode, Origin."""

from __future__ import annotations

import asyncio

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from agent_runtime.access.authenticator import Authenticator
from agent_runtime.access.methods import TokenFileMethod
from agent_runtime.access.middleware import RequirePrincipal, principal_of
from agent_runtime.access.proxy import SECRET_HEADER, TrustedProxy
from agent_runtime.access.sessions import COOKIE, Sessions
from agent_runtime.access.tokens import parse_tokens
from agent_runtime.contract.principals import Principal

SESSIONS = Sessions(b"k" * 32)
ALICE = Principal("alice", frozenset({"sre"}), "token", "alice")


async def whoami(request: Request) -> JSONResponse:
    p = principal_of(request)
    return JSONResponse({"id": p.id, "groups": sorted(p.groups), "via": p.via, "scheme": request.url.scheme})


def client(tokens: str | None = "alice:groups=sre:tok-alice", proxy: TrustedProxy | None = None) -> TestClient:
    methods = [TokenFileMethod(parse_tokens(tokens, "rest"))] if tokens else []
    paths = ("/", "/approvals", "/ui/", "/ui/api/decisions", "/ui/events", "/ui/login")
    routes = [Route(path, whoami, methods=["GET", "POST"]) for path in paths]
    app = Starlette(routes=routes, middleware=[
        Middleware(RequirePrincipal, authenticator=Authenticator(methods), sessions=SESSIONS, proxy=proxy),
    ])
    return TestClient(app, base_url="http://127.0.0.1:8080", follow_redirects=False)


def cookie_for(principal: Principal) -> tuple[dict[str, str], str]:
    value, session = SESSIONS.issue(principal)
    return {"cookie": f"{COOKIE}={value}"}, session.csrf


def test_a_session_cookie_reads_but_writes_only_with_its_csrf_token() -> None:
    c = client()
    headers, csrf = cookie_for(ALICE)
    assert c.get("/approvals", headers=headers).json() == {"id": "alice", "groups": ["sre"], "via": "token", "scheme": "http"}
    for path in ("/", "/approvals", "/ui/api/decisions"):
        assert c.post(path, headers=headers).status_code == 403
        assert c.post(path, headers={**headers, "x-csrf-token": "wrong"}).status_code == 403
        other_csrf = cookie_for(ALICE)[1]  # another session's token
        assert c.post(path, headers={**headers, "x-csrf-token": other_csrf}).status_code == 403
        assert c.post(path, headers={**headers, "x-csrf-token": csrf}).json()["id"] == "alice"


def test_a_bearer_token_needs_no_csrf_and_wins_over_a_cookie() -> None:
    c = client()
    headers, _ = cookie_for(Principal("mallory"))
    reply = c.post("/approvals", headers={**headers, "authorization": "Bearer tok-alice"})
    assert reply.json()["id"] == "alice"
    assert c.post("/approvals", headers={**headers, "authorization": "Bearer nope"}).status_code == 401


def test_a_page_of_another_site_is_refused_whatever_it_carries() -> None:
    c = client()
    headers, csrf = cookie_for(ALICE)
    for extra in ({"authorization": "Bearer tok-alice"}, {**headers, "x-csrf-token": csrf}):
        assert c.post("/approvals", headers={**extra, "origin": "https://evil.example"}).status_code == 403
        assert c.post("/approvals", headers={**extra, "origin": "null"}).status_code == 403
        assert c.post("/approvals", headers={**extra, "origin": "http://127.0.0.1:8080"}).status_code == 200


def test_unauthenticated_pages_go_to_the_login_and_everything_else_gets_401() -> None:
    c = client()
    reply = c.get("/ui/")
    assert reply.status_code == 303 and reply.headers["location"] == "/ui/login?next=/ui/"
    assert c.get("/ui/events").status_code == 401
    assert c.get("/approvals").status_code == 401
    forged = {"cookie": f"{COOKIE}={Sessions(b'x' * 32).issue(ALICE)[0]}"}
    assert c.get("/approvals", headers=forged).status_code == 401


def test_local_mode_lets_clients_in_but_inbox_writes_still_need_a_session() -> None:
    c = client(tokens=None)
    assert c.post("/").json()["id"] == "anonymous"  # an A2A client on loopback, as before
    assert c.post("/ui/api/decisions").status_code == 403  # a page's write: needs the page's CSRF token
    headers, csrf = cookie_for(Principal("anonymous", frozenset(), "anonymous", "anonymous"))
    assert c.post("/ui/api/decisions", headers={**headers, "x-csrf-token": csrf}).status_code == 200


def via(proxy: TrustedProxy, peer: str = "10.1.2.3") -> TestClient:
    """A client whose requests arrive from ``peer`` (the TCP peer address the server sees)."""
    return TestClient(client(proxy=proxy).app, base_url="http://127.0.0.1:8080", client=(peer, 5000), follow_redirects=False)


def test_proxy_headers_count_from_the_trusted_proxy_only_and_writes_need_that_persons_session() -> None:
    forwarded = {"x-forwarded-user": "bob@example.com", "x-forwarded-groups": "sre,ops"}
    assert via(TrustedProxy.of(["10.0.0.0/8"]), "192.168.1.1").get("/approvals", headers=forwarded).status_code == 401
    # The peer address is the socket's: an X-Forwarded-For naming the trusted network changes nothing.
    spoofed = {**forwarded, "x-forwarded-for": "10.1.2.3"}
    assert via(TrustedProxy.of(["10.0.0.0/8"]), "127.0.0.1").get("/approvals", headers=spoofed).status_code == 401
    c = via(TrustedProxy.of(["10.0.0.0/8"]))
    assert c.get("/approvals", headers=forwarded).json() == {"id": "bob@example.com", "groups": ["ops", "sre"], "via": "proxy",
                                                             "scheme": "http"}
    bob = Principal("bob@example.com", frozenset({"sre", "ops"}), "proxy", "bob@example.com")
    headers, csrf = cookie_for(bob)
    assert c.post("/ui/api/decisions", headers=forwarded).status_code == 403  # no session: no CSRF token
    assert c.post("/ui/api/decisions", headers={**forwarded, **headers, "x-csrf-token": csrf}).status_code == 200
    alice_headers, alice_csrf = cookie_for(ALICE)  # someone else's session behind the same proxy
    assert c.post("/ui/api/decisions", headers={**forwarded, **alice_headers, "x-csrf-token": alice_csrf}).status_code == 403


def test_what_the_pages_script_fetches_gets_401_not_the_login_page() -> None:
    c = client()
    for path in ("/ui/events", "/ui/fragments/inbox", "/ui/api/decisions"):
        reply = c.get(path)
        assert reply.status_code == 401 and "location" not in reply.headers, path


def test_an_ended_session_is_told_to_sign_in_again() -> None:
    c = client()
    headers, csrf = cookie_for(ALICE)
    session = asyncio.run(SESSIONS.read(headers["cookie"].split("=", 1)[1]))
    assert session is not None
    asyncio.run(SESSIONS.revoke(session))
    reply = c.post("/ui/api/decisions", headers={**headers, "x-csrf-token": csrf})
    assert reply.status_code == 401 and "session has ended" in reply.json()["error"]


SECRET = "p" * 40


def test_a_loopback_proxy_counts_only_with_its_secret() -> None:
    """A sidecar (oauth2-proxy) and a port-forward both arrive from 127.0.0.1: only the secret tells them apart."""
    c = via(TrustedProxy.of(["127.0.0.1"], SECRET), "127.0.0.1")
    forwarded = {"x-forwarded-user": "bob", "x-forwarded-groups": "sre"}
    assert c.get("/approvals", headers={**forwarded, SECRET_HEADER: SECRET}).json()["id"] == "bob"
    for wrong in ({}, {SECRET_HEADER: "p" * 39}):
        assert c.get("/approvals", headers={**forwarded, **wrong}).status_code == 401
        assert c.get("/ui/", headers={**forwarded, **wrong}).headers["location"] == "/ui/login?next=/ui/"


def test_forwarded_proto_makes_the_request_https_only_from_the_trusted_proxy() -> None:
    """Behind a proxy that terminates TLS the page's cookie must be Secure: the scheme the page sees says https, and
    only when the proxy says so (public paths too: the login page sets the cookie)."""
    https = {"x-forwarded-proto": "https"}
    alice = {"authorization": "Bearer tok-alice"}
    for path in ("/approvals", "/ui/login"):
        assert via(TrustedProxy.of(["10.0.0.0/8"])).get(path, headers={**https, **alice}).json()["scheme"] == "https"
        elsewhere = via(TrustedProxy.of(["10.0.0.0/8"]), "192.168.1.1")
        assert elsewhere.get(path, headers={**https, **alice}).json()["scheme"] == "http"
        assert via(TrustedProxy(), "127.0.0.1").get(path, headers={**https, **alice}).json()["scheme"] == "http"
        loopback = via(TrustedProxy.of(["127.0.0.1"], SECRET), "127.0.0.1")
        assert loopback.get(path, headers={**https, **alice}).json()["scheme"] == "http"  # no secret: not the proxy
        assert loopback.get(path, headers={**https, **alice, SECRET_HEADER: SECRET}).json()["scheme"] == "https"


def test_forwarded_host_counts_as_ours_only_from_the_trusted_proxy() -> None:
    """An ingress may rewrite Host; its X-Forwarded-Host then names the page's origin. From anyone else it is ignored."""
    page = {"authorization": "Bearer tok-alice", "host": "127.0.0.1:8080", "origin": "https://gatehouse.example.com",
            "x-forwarded-host": "gatehouse.example.com"}
    assert via(TrustedProxy.of(["10.0.0.0/8"])).post("/approvals", headers=page).status_code == 200
    assert via(TrustedProxy.of(["10.0.0.0/8"]), "192.168.1.1").post("/approvals", headers=page).status_code == 403
    assert via(TrustedProxy(), "127.0.0.1").post("/approvals", headers=page).status_code == 403
