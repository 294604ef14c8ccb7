"""Kubernetes-visible approvals: the runtime mirrors each request as a ``ToolApproval`` and takes decisions
written on them (``kubectl gatehouse approve``).

Modules: ``settings`` (on or off, read once at start-up) → ``bridge`` (assembles the parts) → ``mirror``
(queued writes: ToolApprovals, their status, Events, the Agent's ``pendingApprovals``, retention),
``watcher`` (list + watch, decisions → :class:`~agent_runtime.server.resume.Resumer`), ``orphans``
(ToolApprovals whose request the runtime has no record of become ``Orphaned``) and ``runtime_ready`` (the
runtime's readiness as the Agent's condition ``RuntimeReady``); ``objects`` (pure builders), ``client`` (a
small async API client over httpx), ``token_review`` (Kubernetes tokens as credentials); ``sdk`` (the runtime's one
typed door to the ``kubernetes`` package: credentials, and the blocking ToolApproval calls of ``kubectl gatehouse``).
"""

from agent_runtime.kube.settings import KubeSettings, detect

__all__ = ["KubeSettings", "detect"]
