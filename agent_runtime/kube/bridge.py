"""The runtime's Kubernetes side, assembled: one client, the :class:`Mirror` and the :class:`DecisionWatcher`.

Built by :func:`agent_runtime.app.factory.build_runtime` when :func:`agent_runtime.kube.settings.detect`
found a cluster; started after the stores are open and stopped before they close. Starting never waits
for the API: an unreachable cluster only delays the mirror, it never delays or fails the agent.
"""

from __future__ import annotations

import asyncio
import logging

from agent_runtime.approvals import ApprovalService
from agent_runtime.kube import objects
from agent_runtime.kube.client import KubeClient
from agent_runtime.kube.mirror import Mirror
from agent_runtime.kube.settings import KubeSettings
from agent_runtime.kube.watcher import DecisionWatcher
from agent_runtime.principals import Identities
from agent_runtime.questions.store import HitlStore
from agent_runtime.server.decide_one import DecideOne

log = logging.getLogger(__name__)


class KubeBridge:
    def __init__(
        self, settings: KubeSettings, agent: str, approvals: ApprovalService, decide_one: DecideOne,
        client: KubeClient | None = None, hitl: HitlStore | None = None, identities: Identities | None = None,
    ) -> None:
        self.settings = settings
        self.agent = agent
        self.client = client or KubeClient.connect(settings.kubeconfig, settings.in_cluster)
        self.mirror = Mirror(self.client, approvals, agent, settings.namespace, settings.retention_seconds, hitl=hitl)
        self.watcher = DecisionWatcher(
            self.client, self.mirror, approvals, decide_one, settings.watch_seconds, identities=identities,
            trust_kubectl=settings.trust_kubectl,
        )
        self._approvals = approvals
        self._unsubscribe = approvals.events.subscribe(self.mirror.on_event)
        self._unsubscribe_hitl = hitl.subscribe(self.mirror.hitl_listener) if hitl is not None else None
        self._reconciler: asyncio.Task[None] | None = None

    def approval_name(self, request_id: str) -> str:
        """The name of the ToolApproval that mirrors ``request_id`` (known before it is created)."""
        return objects.approval_name(self.agent, request_id)

    def start(self) -> None:
        self.mirror.start()
        self.watcher.start()
        self._reconciler = asyncio.create_task(self._reconcile(), name="gatehouse-kube-reconcile")

    async def _reconcile(self) -> None:
        delay = 0.5
        while True:
            try:
                await self.mirror.reconcile()
                return
            except Exception as exc:
                log.warning("kube: catching up with the cluster failed (retrying in %.1fs): %s", delay, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)

    async def stop(self) -> None:
        self._unsubscribe()
        if self._unsubscribe_hitl is not None:
            self._unsubscribe_hitl()
        if self._reconciler is not None:
            self._reconciler.cancel()
            await asyncio.gather(self._reconciler, return_exceptions=True)
        await self.watcher.stop()
        await self.mirror.stop()
        await self.client.aclose()


__all__ = ["KubeBridge"]
