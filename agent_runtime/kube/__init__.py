"""Kubernetes-visible approvals: the runtime mirrors each request as a ``ToolApproval`` and takes decisions
written on them (``kubectl gatehouse approve``).

Modules: ``settings`` (on or off, read once at start-up) → ``bridge`` (assembles the parts) → ``mirror``
(queued writes: ToolApprovals, their status, Events, the Agent's ``pendingApprovals``, retention) and
``watcher`` (list + watch, decisions → :class:`~agent_runtime.server.resume.Resumer`); ``objects`` (pure
builders), ``client`` (a small async API client over httpx).
"""

from agent_runtime.kube.settings import KubeSettings, detect

__all__ = ["KubeSettings", "detect"]
