"""REST approvals, server-sent events and outgoing webhooks on the runtime (GitHub issue 5).

Modules: ``settings`` (read once by ``serve``) and ``auth`` (bearer tokens) → ``api`` (:class:`RestApi`: the
routes, and the owner of ``stream`` (SSE) and ``webhooks``) → ``models`` (every body, one parser each),
``idempotency`` (durable keys), ``views`` (records with who decided). A decision is applied by
:func:`agent_runtime.server.decide_one.decide_one`, shared with the Kubernetes mirror.
"""

from agent_runtime.rest.api import RestApi
from agent_runtime.rest.settings import RestSettings, load_rest_settings

__all__ = ["RestApi", "RestSettings", "load_rest_settings"]
