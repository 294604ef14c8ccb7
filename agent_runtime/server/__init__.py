"""The Gatehouse agent runtime server: A2A over HTTP with the human-approval gate.

Modules: ``settings`` (read once at start-up) → ``app`` (assembles everything) → ``executor`` (A2A requests)
→ ``turns`` (ADK runs) → ``gate`` (per-call policy and pauses); ``resume`` (the one decision path, also for
internal sources), ``decide_one`` (one request at a time, for REST and Kubernetes) and ``sweeper`` (timeouts);
``database``, ``toolsets``, ``metrics``. Durable approval state lives in :mod:`agent_runtime.approvals`; the
REST API, events and webhooks in :mod:`agent_runtime.rest`. The model's own questions (``hitl_request``):
``hitl_tool`` (the ADK tool) and ``hitl_flow`` (pause, answer, confirm, timeout, resume), stored by
``approvals/hitl_store.py``.
"""

import sys


def _import_a2a_server_without_grpc() -> None:
    """a2a-sdk's request handlers and routes import its optional gRPC handler and transports eagerly, and with
    them grpcio (~15 MB resident); this server speaks JSON-RPC only. Import them once with ``grpc`` hidden: a2a-sdk
    then keeps the placeholders it uses when grpcio is not installed. ``grpc`` stays importable for anything else
    afterwards."""
    if "a2a.server.routes" in sys.modules or "grpc" in sys.modules:
        return
    sys.modules["grpc"] = None  # type: ignore[assignment]  # meanwhile `import grpc` raises ImportError
    try:
        import a2a.server.request_handlers
        import a2a.server.routes  # noqa: F401
    finally:
        if "grpc" in sys.modules and sys.modules["grpc"] is None:
            del sys.modules["grpc"]


_import_a2a_server_without_grpc()

__all__: list[str] = []
