"""TokenReviewMethod against a small real HTTP server standing in for the API server's tokenreviews."""

from __future__ import annotations

import socket
import time
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import httpx
import jwt
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from agent_runtime.access.methods import Identity, Unavailable
from agent_runtime.kube.client import KubeClient
from agent_runtime.kube.token_review import PATH, TokenReviewMethod

SA = "system:serviceaccount:agents:caller"
SA_GROUPS = ["system:serviceaccounts", "system:serviceaccounts:agents", "system:authenticated"]


class FakeApiServer:
    """Answers TokenReviews by token: ``good…`` is a ServiceAccount, ``forbidden`` and ``broken`` are errors."""

    def __init__(self) -> None:
        self.requests: Counter[str] = Counter()
        self.bodies: list[dict[str, Any]] = []
        self.audiences: list[str] = []  # what status.audiences reports for good tokens

    async def review(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.bodies.append(body)
        token = body["spec"]["token"]
        self.requests[token] += 1
        if token == "forbidden":
            return web.json_response(status=403, data={"kind": "Status", "message": 'tokenreviews.authentication.k8s.io '
                                     'is forbidden: User "system:serviceaccount:agents:runtime" cannot create resource'})
        if token == "broken":
            return web.json_response(status=500, data={"kind": "Status", "message": "etcd is on fire"})
        status: dict[str, Any] = {"authenticated": False, "error": "invalid bearer token"}
        if token.startswith("good") or token.count(".") == 2:
            status = {"authenticated": True, "user": {"username": SA, "uid": "1", "groups": SA_GROUPS},
                      "audiences": self.audiences}
        return web.json_response(status=201, data={**body, "status": status})


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def api() -> AsyncIterator[tuple[FakeApiServer, KubeClient]]:
    fake = FakeApiServer()
    app = web.Application()
    app.router.add_post(PATH, fake.review)
    async with TestServer(app, host="127.0.0.1") as server:
        kube = KubeClient(httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.port}"))
        yield fake, kube
        await kube.aclose()


async def test_an_authenticated_token_is_the_user_the_api_server_names(api: tuple[FakeApiServer, KubeClient]) -> None:
    fake, kube = api
    method = TokenReviewMethod(kube)
    assert await method.identify("good") == Identity(SA, frozenset(SA_GROUPS), "kubernetes")
    assert fake.bodies == [{"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": "good"}}]
    assert method.via == "kubernetes" and method.scheme["scheme"] == "Bearer"


async def test_a_token_the_api_server_does_not_know_is_none(api: tuple[FakeApiServer, KubeClient]) -> None:
    assert await TokenReviewMethod(api[1]).identify("stranger") is None


async def test_audiences_are_asked_for_and_must_be_confirmed(api: tuple[FakeApiServer, KubeClient]) -> None:
    fake, kube = api
    method = TokenReviewMethod(kube, audiences=["gatehouse"])
    # An API server that does not check audiences answers with none: the token may be meant for someone else.
    assert await method.identify("good-1") is None
    assert fake.bodies[-1]["spec"]["audiences"] == ["gatehouse"]
    fake.audiences = ["gatehouse"]
    assert await method.identify("good-2") is not None


async def test_answers_are_cached_by_digest_for_their_ttl(api: tuple[FakeApiServer, KubeClient]) -> None:
    fake, kube = api
    clock = Clock()
    method = TokenReviewMethod(kube, ttl=60, clock=clock)
    for _ in range(3):
        assert await method.identify("good") is not None
        assert await method.identify("stranger") is None
    assert fake.requests == {"good": 1, "stranger": 1}
    assert all("good" not in key and "stranger" not in key for key in method._cache)  # never the token itself
    clock.now += 11  # a no is kept 10 s, a yes 60 s
    await method.identify("good")
    await method.identify("stranger")
    assert fake.requests == {"good": 1, "stranger": 2}
    clock.now += 50
    await method.identify("good")
    assert fake.requests == {"good": 2, "stranger": 2}


async def test_a_yes_is_not_cached_past_the_tokens_own_exp(api: tuple[FakeApiServer, KubeClient]) -> None:
    fake, kube = api
    clock = Clock()
    method = TokenReviewMethod(kube, ttl=60, clock=clock)
    soon = jwt.encode({"sub": SA, "exp": int(time.time()) + 5}, "only-the-api-server-checks-this-token", algorithm="HS256")
    later = jwt.encode({"sub": SA, "exp": int(time.time()) + 3600}, "only-the-api-server-checks-this-token", algorithm="HS256")
    assert await method.identify(soon) is not None and await method.identify(later) is not None
    clock.now += 6
    await method.identify(soon)
    await method.identify(later)
    assert fake.requests == {soon: 2, later: 1}


async def test_the_cache_is_bounded_and_drops_the_oldest(api: tuple[FakeApiServer, KubeClient]) -> None:
    fake, kube = api
    method = TokenReviewMethod(kube, max_entries=2)
    for token in ["good-a", "good-b", "good-c", "good-c", "good-b", "good-a"]:
        await method.identify(token)
    assert len(method._cache) == 2
    assert fake.requests == {"good-a": 2, "good-b": 1, "good-c": 1}


async def test_403_says_the_runtime_may_not_create_tokenreviews(api: tuple[FakeApiServer, KubeClient]) -> None:
    fake, kube = api
    method = TokenReviewMethod(kube)
    with pytest.raises(Unavailable, match="may not create tokenreviews") as raised:
        await method.identify("forbidden")
    assert "system:auth-delegator" in str(raised.value)
    with pytest.raises(Unavailable):  # not cached: once the RBAC is fixed, the next request works
        await method.identify("forbidden")
    assert fake.requests["forbidden"] == 2


async def test_500_is_unavailable(api: tuple[FakeApiServer, KubeClient]) -> None:
    with pytest.raises(Unavailable, match=r"HTTP 500.*etcd is on fire"):
        await TokenReviewMethod(api[1]).identify("broken")


async def test_an_unreachable_api_server_is_unavailable() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    kube = KubeClient(httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}"))
    try:
        with pytest.raises(Unavailable, match="could not be reached") as raised:
            await TokenReviewMethod(kube).identify("good-secret-token")
        assert "good-secret-token" not in str(raised.value)
    finally:
        await kube.aclose()
