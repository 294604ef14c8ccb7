"""``gatehouse slack``, assembled: settings read once at start-up → the Kubernetes clients (the bridge's own identity),
the Slack Web API client, the channel-free :class:`~agent_runtime.bridges.keeper.MessageKeeper` and
:class:`~agent_runtime.bridges.ballots.Ballots` over Slack's notifier and people, the shared
:class:`~agent_runtime.slack.replays.ReplayMemory` and the interactions endpoint, in one Starlette app whose lifespan
starts and stops the keeper and the memory's sweep.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from starlette.applications import Starlette

from agent_runtime.bridges.ballots import Ballots
from agent_runtime.bridges.keeper import MessageKeeper
from agent_runtime.kube import toolapproval_client
from agent_runtime.kube.client import KubeClient
from agent_runtime.slack.api import SlackApi
from agent_runtime.slack.decisions import Decider
from agent_runtime.slack.endpoint import Interactions
from agent_runtime.slack.notifier import SlackNotifier
from agent_runtime.slack.people import SlackPeople
from agent_runtime.slack.replays import NAME as REPLAYS_NAME
from agent_runtime.slack.replays import ReplayMemory
from agent_runtime.slack.signature import RequestCheck
from agent_runtime.slack.users import UserMap


@dataclass(frozen=True)
class SlackSettings:
    bot_token: str  # xoxb-…: SLACK_BOT_TOKEN
    signing_secret: str  # the app's signing secret: SLACK_SIGNING_SECRET
    namespaces: tuple[str, ...]  # where the ToolApprovals are watched
    users: UserMap
    kubeconfig: Path | None = None  # None: in a pod, the bridge's ServiceAccount
    in_cluster: bool = False
    api_url: str | None = None  # the Slack Web API (default https://slack.com/api/); tests point it at a stand-in
    vote_wait: float = 10.0  # how long a click waits for the runtime's verdict before the person is told it was sent
    replay_namespace: str = "default"  # where the replay memory (a ConfigMap) lives: the bridge's own namespace
    replay_configmap: str = REPLAYS_NAME


def build_app(settings: SlackSettings) -> Starlette:
    kube = KubeClient.connect(settings.kubeconfig, settings.in_cluster)
    votes = toolapproval_client.connect(config_file=str(settings.kubeconfig) if settings.kubeconfig else None)
    slack = SlackApi.connect(settings.bot_token, settings.api_url)
    notifier = SlackNotifier(slack)
    keeper = MessageKeeper(kube, notifier, list(settings.namespaces))
    memory = ReplayMemory(kube, settings.replay_namespace, settings.replay_configmap)
    ballots = Ballots(kube, votes, notifier, SlackPeople(settings.users, slack), settings.vote_wait)
    interactions = Interactions(RequestCheck(settings.signing_secret, memory), Decider(ballots, slack))

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        keeper.start()
        memory.start()
        try:
            yield
        finally:
            await interactions.drain()
            await memory.stop()
            await keeper.stop()
            await kube.aclose()

    app = Starlette(routes=interactions.routes(), lifespan=lifespan)
    app.state.keeper = keeper
    return app


__all__ = ["SlackSettings", "build_app"]
