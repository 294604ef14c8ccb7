"""The Kubernetes client's lanes (agent_runtime/kube/client.py): requests side by side each borrow a client of one
connection, given back when they end, so the connections stay as many as the requests in flight at once (httpx's
pool scans every connection it holds twice per request); against the emulated API."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from agent_runtime.kube import client as kube_client
from agent_runtime.kube.client import KubeClient, KubeError
from tests.support.kube_server import RunningEmulator

pytestmark = pytest.mark.e2e

EVENTS = "/api/v1/namespaces/default/events"


def event(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": "default"},
            "involvedObject": {"kind": "Agent", "name": "file-manager", "namespace": "default"},
            "reason": "Test", "message": "lanes", "type": "Normal"}


@pytest.fixture
async def kube(kube_api: RunningEmulator) -> AsyncIterator[KubeClient]:
    client = KubeClient.connect(None, False)  # $KUBECONFIG: the emulator
    yield client
    await client.aclose()


async def test_requests_side_by_side_get_a_lane_each_and_give_it_back(kube: KubeClient) -> None:
    await asyncio.gather(*(kube.create(EVENTS, event(f"first-{i}")) for i in range(8)))
    lanes = list(kube._lanes)
    assert 1 < len(lanes) <= 8 and sorted(map(id, kube._idle)) == sorted(map(id, lanes))  # all given back
    for round_ in range(5):  # the same lanes serve what follows: no new connection per request
        await asyncio.gather(*(kube.create(EVENTS, event(f"again-{round_}-{i}")) for i in range(len(lanes))))
    assert kube._lanes == lanes and len(kube._idle) == len(lanes)
    got = await kube.get(EVENTS)
    assert len(got["items"]) == 8 + 5 * len(lanes)


async def test_a_failed_request_gives_its_lane_back(kube: KubeClient) -> None:
    await kube.create(EVENTS, event("once"))
    with pytest.raises(KubeError) as refused:
        await kube.create(EVENTS, event("once"))
    assert refused.value.status == 409
    assert len(kube._lanes) == 1 and kube._idle == kube._lanes


async def test_past_the_lane_limit_the_shared_client_serves(kube: KubeClient, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kube_client, "MAX_LANES", 2)
    await asyncio.gather(*(kube.create(EVENTS, event(f"many-{i}")) for i in range(6)))
    assert len(kube._lanes) == 2
    assert len((await kube.get(EVENTS))["items"]) == 6


async def test_without_lanes_one_client_serves_everything(kube_api: RunningEmulator) -> None:
    plain = KubeClient(httpx.AsyncClient(base_url=kube_api.url))
    try:
        await asyncio.gather(*(plain.create(EVENTS, event(f"plain-{i}")) for i in range(4)))
        assert plain._lanes == [] and len((await plain.get(EVENTS))["items"]) == 4
    finally:
        await plain.aclose()


async def test_closing_closes_the_lanes(kube_api: RunningEmulator) -> None:
    client = KubeClient.connect(None, False)
    await asyncio.gather(*(client.create(EVENTS, event(f"close-{i}")) for i in range(3)))
    lanes = list(client._lanes)
    await client.aclose()
    assert lanes and all(lane.is_closed for lane in lanes) and client._lanes == []
