"""The runtime's Kubernetes side, assembled: one client, the :class:`Mirror`, the :class:`DecisionWatcher`,
the :class:`Orphans` check and the :class:`RuntimeReadyReporter`.

Built by :func:`agent_runtime.app.factory.build_runtime` when :func:`agent_runtime.kube.settings.detect`
found a cluster; started after the stores are open and stopped before they close. Starting never waits
for the API: an unreachable cluster only delays the mirror, it never delays or fails the agent. At start
it catches up (:meth:`Mirror.reconcile`, then an orphan sweep), and sweeps again every ``check_seconds``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from agent_runtime.approvals import ApprovalService
from agent_runtime.contract.principals import Identities
from agent_runtime.infra.tasks import cancel_and_wait
from agent_runtime.kube import objects
from agent_runtime.kube.client import KubeClient
from agent_runtime.kube.mirror import Mirror
from agent_runtime.kube.orphans import Orphans
from agent_runtime.kube.runtime_ready import Readiness, RuntimeReadyReporter
from agent_runtime.kube.settings import KubeSettings
from agent_runtime.kube.watcher import DecisionWatcher
from agent_runtime.questions.store import QuestionStore
from agent_runtime.server.decide_one import DecideOne

log = logging.getLogger(__name__)


class KubeBridge:
    def __init__(
        self, settings: KubeSettings, agent: str, approvals: ApprovalService, decide_one: DecideOne,
        client: KubeClient | None = None, questions: QuestionStore | None = None, identities: Identities | None = None,
        of: objects.OwnerKind = objects.AGENT,
    ) -> None:
        self.settings = settings
        self.agent = agent
        self.client = client or KubeClient.connect(settings.kubeconfig, settings.in_cluster)
        self.mirror = Mirror(
            self.client, approvals, agent, settings.namespace, settings.retention_seconds, questions=questions, of=of
        )
        self.orphans = Orphans(self.client, self.mirror, approvals, questions, settings.check_seconds)
        self.watcher = DecisionWatcher(
            self.client, self.mirror, approvals, decide_one, settings.watch_seconds, identities=identities,
            trust_kubectl=settings.trust_kubectl, on_unknown=self.orphans.orphan,
        )
        self.runtime_ready = RuntimeReadyReporter(
            self.client, self.mirror.agent_status_path, self.mirror.instance, recheck=settings.check_seconds,
        )
        self._approvals = approvals
        self._unsubscribe = approvals.events.subscribe(self.mirror.on_event)
        self._unsubscribe_questions = questions.subscribe(self.mirror.question_listener) if questions is not None else None
        self._reconciler: asyncio.Task[None] | None = None

    def approval_name(self, request_id: str) -> str:
        """The name of the ToolApproval that mirrors ``request_id`` (known before it is created)."""
        return objects.approval_name(self.agent, request_id)

    def start(self, readiness: Callable[[], Readiness]) -> None:
        """Start mirroring, watching votes and reporting ``readiness`` (the runtime's, read when it changes)."""
        self.mirror.start()
        self.watcher.start()
        self.runtime_ready.start(readiness)
        self._reconciler = asyncio.create_task(self._reconcile(), name="gatehouse-kube-reconcile")

    async def _reconcile(self) -> None:
        delay = 0.5
        while True:
            try:
                await self.mirror.reconcile()
                await self.orphans.sweep()
                break
            except Exception as exc:
                log.warning("kube: catching up with the cluster failed (retrying in %.1fs): %s", delay, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)
        await self.orphans.run()

    async def report_failure(self, readiness: Readiness, timeout: float = 5.0) -> None:
        """Tell the Agent why the runtime could not start (it exits next): one write, at most ``timeout`` seconds."""
        try:
            await asyncio.wait_for(self.runtime_ready.report(readiness), timeout)
        except Exception as exc:
            log.warning("kube: could not write the Agent's RuntimeReady condition: %s", exc)

    async def stop(self) -> None:
        self._unsubscribe()
        if self._unsubscribe_questions is not None:
            self._unsubscribe_questions()
        await cancel_and_wait([self._reconciler])
        await self.runtime_ready.stop()
        await self.watcher.stop()
        await self.mirror.stop()
        await self.client.aclose()


__all__ = ["KubeBridge"]
