"""The Gatehouse agent runtime server: A2A over HTTP with the human-approval gate.

Modules: ``settings`` (read once at start-up) → ``app`` (assembles everything) → ``executor`` (A2A requests)
→ ``turns`` (ADK runs) → ``gate`` (per-call policy and pauses); ``resume`` (the one decision path, also for
internal sources), ``decide_one`` (one request at a time, for REST and Kubernetes) and ``sweeper`` (timeouts);
``database``, ``toolsets``, ``metrics``. Durable approval state lives in :mod:`agent_runtime.approvals`; the
REST API, events and webhooks in :mod:`agent_runtime.rest`. The model's own questions (``hitl_request``):
``hitl_tool`` (the ADK tool) and ``hitl_flow`` (pause, answer, confirm, timeout, resume), stored by
``approvals/hitl_store.py``.
"""

__all__: list[str] = []
