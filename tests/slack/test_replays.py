"""The replay memory every bridge process shares (agent_runtime/slack/replays.py), against the emulated Kubernetes API:
each "bridge" is its own :class:`RequestCheck` with its own client, as separate processes and a restart would be.
Requests are signed as Slack signs them (tests/support/slack_api.py)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from agent_runtime.kube.client import KubeClient
from agent_runtime.slack import messages
from agent_runtime.slack.replays import NAME, SKEW, ReplayMemory, ReplayMemoryUnavailable, key_of
from agent_runtime.slack.signature import REPLAYED, WINDOW, RequestCheck
from tests.support import slack_api
from tests.support.kube_server import RunningEmulator

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
NS = "gatehouse-system"
CM = "v1/configmaps"


def click(value: str) -> bytes:
    return slack_api.block_action("U0ALICE", "C1", "1.1", messages.DENY, value).encode()


def headers(body: bytes, timestamp: int) -> dict[str, str]:
    return {k.lower(): v for k, v in slack_api.signed(body.decode(), SECRET, timestamp).items()}


def stored(api: RunningEmulator) -> dict[str, str]:
    return dict((api.emulator.get_object(CM, NS, NAME) or {}).get("data") or {})


@pytest.fixture
async def bridges(kube_api: RunningEmulator) -> AsyncIterator[Callable[..., RequestCheck]]:
    """A maker of bridges' request checks, each with its own API client (and clock, if given)."""
    async with AsyncExitStack() as stack:
        def bridge(clock: Callable[[], float] = time.time, kubeconfig: Path | None = None) -> RequestCheck:
            kube = KubeClient.connect(kubeconfig, False)  # None: $KUBECONFIG, the admin
            stack.push_async_callback(kube.aclose)
            return RequestCheck(SECRET, ReplayMemory(kube, NS, clock=clock), clock)

        yield bridge


async def test_a_request_seen_by_one_bridge_is_a_replay_for_a_restarted_one_and_for_another(
        kube_api: RunningEmulator, bridges: Callable[..., RequestCheck]) -> None:
    body = click('{"ns": "team-a", "name": "deny-me", "rid": "apr-1"}')
    signed = headers(body, int(time.time()))
    assert await bridges().refusal(body, signed) == ""
    assert await bridges().refusal(body, signed) == REPLAYED  # after a restart: a new process, nothing in memory
    assert await bridges().refusal(body, signed) == REPLAYED  # another replica
    assert list(stored(kube_api)) == [key_of(signed["x-slack-signature"])]  # a hash, not the signature itself
    other = click('{"ns": "team-a", "name": "another", "rid": "apr-2"}')
    assert await bridges().refusal(other, headers(other, int(time.time()))) == ""  # another request is new


async def test_the_same_request_at_many_bridges_at_once_is_accepted_exactly_once(
        kube_api: RunningEmulator, bridges: Callable[..., RequestCheck]) -> None:
    body = click('{"ns": "team-a", "name": "race", "rid": "apr-3"}')
    signed = headers(body, int(time.time()))
    checks = [bridges() for _ in range(6)]
    answers = await asyncio.gather(*(c.refusal(body, signed) for c in checks))
    assert sorted(answers) == ["", *[REPLAYED] * 5]
    # and the ConfigMap the first one created is shared, not made twice
    assert len(stored(kube_api)) == 1


async def test_entries_are_swept_once_their_request_is_past_its_five_minutes(
        kube_api: RunningEmulator, bridges: Callable[..., RequestCheck]) -> None:
    now = [time.time()]
    sent = int(now[0])
    check = bridges(clock=lambda: now[0])
    old = click('{"ns": "team-a", "name": "old", "rid": "apr-4"}')
    old_key = key_of(headers(old, sent)["x-slack-signature"])
    assert await check.refusal(old, headers(old, sent)) == ""
    assert stored(kube_api) == {old_key: str(sent + WINDOW)}
    now[0] = sent + WINDOW + SKEW - 1  # not yet: a replica's clock may be behind
    assert await check.memory.sweep() == 0 and old_key in stored(kube_api)
    now[0] = sent + WINDOW + SKEW + 1
    fresh = click('{"ns": "team-a", "name": "fresh", "rid": "apr-5"}')
    assert await check.refusal(fresh, headers(fresh, int(now[0]))) == ""  # a write sweeps what is past
    assert list(stored(kube_api)) == [key_of(headers(fresh, int(now[0]))["x-slack-signature"])]
    now[0] += WINDOW + SKEW + 1
    assert await check.memory.sweep() == 1 and stored(kube_api) == {}  # and so does the sweep, with no request


async def test_the_charts_rbac_is_enough_and_without_the_configmap_nothing_gets_through(
        kube_api: RunningEmulator, bridges: Callable[..., RequestCheck], tmp_path: Path) -> None:
    emulator = kube_api.emulator
    token = emulator.add_service_account(NS, "gatehouse-slack")
    emulator.enforce_rbac()
    emulator.grant(f"system:serviceaccount:{NS}:gatehouse-slack", ["get", "patch"], "configmaps", NS)  # the chart's Role
    check = bridges(kubeconfig=kube_api.kubeconfig_for(tmp_path / "bridge", token))
    body = click('{"ns": "team-a", "name": "rbac", "rid": "apr-6"}')
    # the chart creates the ConfigMap; its bridge may not create one
    with pytest.raises(ReplayMemoryUnavailable, match="missing and cannot be created"):
        await check.refusal(body, headers(body, int(time.time())))
    kube_api.call(lambda: emulator.seed("v1/configmaps", {"metadata": {"name": NAME, "namespace": NS}}))
    signed = headers(body, int(time.time()))
    assert await check.refusal(body, signed) == ""
    assert await check.refusal(body, signed) == REPLAYED
