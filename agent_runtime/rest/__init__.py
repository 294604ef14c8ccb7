"""REST approvals, server-sent events and outgoing webhooks on the runtime.

Modules: ``settings`` (read once by ``serve``) and ``auth`` (bearer tokens) → ``api`` (:class:`~agent_runtime.rest.api.RestApi`:
the routes, and the owner of ``stream`` (SSE) and ``webhooks``) → ``models`` (every body, one parser each),
``idempotency`` (durable keys), ``views`` (records with who decided); ``audit`` (``GET /audit`` for auditors, and
the audit log's retention) stands beside ``api``. A decision is applied by
:class:`agent_runtime.server.decide_one.DecideOne`, which the app hands in. This ``__init__`` imports the settings
only, so reading them at start-up does not import a2a-sdk's server (see :mod:`agent_runtime.app.factory`).
"""

from agent_runtime.rest.settings import RestSettings, load_rest_settings

__all__ = ["RestSettings", "load_rest_settings"]
