"""The runtime core: A2A over HTTP with the human-approval gate, knowing nothing of REST or Kubernetes.

Modules: ``executor`` (A2A requests) → ``turns`` (ADK runs) → ``gate`` (per-call policy and pauses); ``resume``
(the one decision path, also for internal sources), ``decide_one`` (one request at a time, for the REST and
Kubernetes channels) and ``sweeper`` (timeouts); ``sessions``, ``task_store`` and ``toolsets``. Durable approval
state lives in :mod:`agent_runtime.approvals`, the model's own questions (``hitl_request``) in
:mod:`agent_runtime.questions`. The channels (:mod:`agent_runtime.rest`, :mod:`agent_runtime.kube`) build on
this package; :mod:`agent_runtime.app` assembles them all.
"""

__all__: list[str] = []
