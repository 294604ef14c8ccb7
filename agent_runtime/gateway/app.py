"""The gateway's ASGI app: authentication (the Agent's: tokens, JWT), the binding of MCP sessions to principals, the
MCP endpoint at :data:`MCP_PATH`, the REST approvals API (``/approvals``: the same as an Agent runtime's, over the
held calls), the browser inbox at ``/ui/`` (the Agent runtime's pages and login, over the held calls) and the probes.
The held calls live in the same approvals store as an Agent's pauses (sqlite in ``--state-dir``, or
``--database-url``), decided through ``DecideOne`` and timed out by the same sweeper."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp.server.transport_security import RequestBodyLimitMiddleware
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.types import ASGIApp

from agent_runtime.access.authenticator import Authenticator
from agent_runtime.access.hosts import HostCheck, runtime_hosts
from agent_runtime.access.jwt_tokens import JwtMethod
from agent_runtime.access.methods import BearerMethod, TokenFileMethod
from agent_runtime.access.middleware import RequirePrincipal
from agent_runtime.access.revocations import StoredRevocations
from agent_runtime.access.session_keys import shared_key
from agent_runtime.access.sessions import Sessions
from agent_runtime.access.settings import AccessSettings, is_loopback
from agent_runtime.approvals import ApprovalService, Resolution
from agent_runtime.contract.agent_config import GatewayConfig
from agent_runtime.gateway.bindings import BindSessions
from agent_runtime.gateway.events import RecentEvents
from agent_runtime.gateway.fast_calls import FastCalls
from agent_runtime.gateway.held import KEEPALIVE_SECONDS, HeldCalls
from agent_runtime.gateway.server import build_server
from agent_runtime.gateway.upstream import Upstream
from agent_runtime.hooks.endpoint import HOOK_PATH, HookEndpoint
from agent_runtime.infra.database import Database, default_database_url
from agent_runtime.infra.tasks import cancel_and_wait
from agent_runtime.kube import objects
from agent_runtime.kube.bridge import KubeBridge
from agent_runtime.kube.client import KubeClient
from agent_runtime.kube.settings import KubeSettings
from agent_runtime.kube.token_review import TokenReviewMethod
from agent_runtime.pauses.registry import PauseKinds
from agent_runtime.pauses.resumptions import Resumptions
from agent_runtime.rest.api import RestApi
from agent_runtime.rest.settings import RestSettings
from agent_runtime.server.decide_one import DecideOne
from agent_runtime.server.sweeper import TimeoutSweeper
from agent_runtime.server.task_store import CachedTaskStore
from agent_runtime.telemetry.metrics import Metrics
from agent_runtime.ui.login import TokenLogin
from agent_runtime.ui.pages import InboxPages
from agent_runtime.ui.runtime_inbox import RuntimeInbox

log = logging.getLogger(__name__)

MCP_PATH = "/mcp"
READY_TIMEOUT = 5.0  # seconds /readyz waits for the upstream to list its tools


@dataclass(frozen=True)
class GatewaySettings:
    config: GatewayConfig
    host: str = "127.0.0.1"
    port: int = 8080
    access: AccessSettings = field(default_factory=AccessSettings)
    state_dir: Path = Path(".gatehouse")
    database_url: str | None = None
    sweep_interval: float = 0.25
    keepalive: float = KEEPALIVE_SECONDS  # seconds between progress notifications to a client waiting on a held call
    kube: KubeSettings | None = None  # held calls mirrored as ToolApprovals (spec.gatewayRef), decided with kubectl

    @property
    def db_url(self) -> str:
        return self.database_url or default_database_url(self.state_dir)


@dataclass(frozen=True)
class Serving:
    """The gateway's readiness as the ToolApprovals' owner shows it (kube.runtime_ready): serving once started."""

    ready: bool = True
    reason: str = "Ready"
    message: str = "the gateway serves its MCP endpoint"


class NoTasks:
    """The A2A resumer of a gateway: it has no A2A tasks, so every decided request is a held call's (Resumptions hands
    those to :class:`HeldCalls`); anything else is logged and left alone."""

    async def resume(self, task_id: str, context_id: str, resolutions: dict[str, Resolution], source: str,
                     note: str) -> Any:
        log.warning("gateway: a decision for %s, which is no held call of this gateway: ignored", task_id)


def build_authenticator(settings: GatewaySettings, kube: KubeClient | None = None) -> Authenticator:
    """As the agent runtime's (tokens, JWT, and with a cluster Kubernetes tokens through a TokenReview): refuses an
    open, anonymous gateway on a non-loopback address."""
    access = settings.access
    methods: list[BearerMethod] = []
    if access.tokens:
        methods.append(TokenFileMethod(access.tokens))
    if access.jwt is not None:
        methods.append(JwtMethod(access.jwt))
    if access.kubernetes_tokens and kube is not None:
        methods.append(TokenReviewMethod(kube))
    authenticator = Authenticator(methods, access.identities)
    if not authenticator.required and not is_loopback(settings.host) and not access.allow_anonymous_remote:
        raise ValueError(
            f"refusing to serve {settings.host} without authentication: configure tokens (--api-token-file) or a JWT "
            "issuer in the gateway's access settings, serve 127.0.0.1, or pass --insecure-allow-anonymous"
        )
    return authenticator


def build_gateway_app(settings: GatewaySettings, upstream: Upstream | None = None) -> ASGIApp:
    config = settings.config
    if upstream is None and config.upstream is not None:
        upstream = Upstream(config.upstream)
    db = Database(settings.db_url)
    approvals = ApprovalService(db)
    metrics = Metrics()
    held = HeldCalls(config, approvals, keepalive=settings.keepalive)
    kinds = PauseKinds()
    kinds.add_taskless(held)
    resumptions = Resumptions(approvals, NoTasks(), kinds)
    tasks = CachedTaskStore(db)  # a gateway has no A2A tasks: DecideOne and the inbox find none
    decide = DecideOne(approvals, metrics, resumptions, tasks, config)
    rest = RestApi(RestSettings(), agent=config.name, db=db, approvals=approvals, metrics=metrics, decide_one=decide)
    sweeper = TimeoutSweeper(approvals, resumptions, config.approval.on_timeout, settings.sweep_interval)
    bridge = None if settings.kube is None else KubeBridge(
        settings.kube, config.name, approvals, decide, identities=settings.access.identities, of=objects.GATEWAY)
    authenticator = build_authenticator(settings, bridge.client if bridge is not None else None)
    # The inbox: the Agent runtime's pages, login and sessions (key and sign-outs in this database), over the held calls.
    revocations = StoredRevocations(db)
    sessions = Sessions.from_key_file(settings.access.session_key_file, settings.access.session_ttl,
                                      revocations=revocations, always_secure=settings.access.secure_cookies)
    inbox = InboxPages(RuntimeInbox(config.name, approvals=approvals, decide_one=decide, tasks=None, questions=None,
                                    allow_session=config.approval.allow_session_grants, gateway=True),
                       sessions, TokenLogin(authenticator))
    # No upstream: a hooks-only gateway (docs/gateway.md), with no MCP endpoint at all rather than one that lists nothing.
    server = build_server(config, upstream, held) if upstream is not None else None
    if server is not None:  # made for its session manager (with the SDK's DNS-rebinding check on loopback), served below
        server.streamable_http_app(streamable_http_path=MCP_PATH, host=settings.host, event_store=RecentEvents())

    async def healthz(_: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(_: Request) -> Response:
        if upstream is None:  # hooks only: nothing to reach before serving
            return JSONResponse({"status": "ready"})
        try:
            await asyncio.wait_for(upstream.list_tools(), READY_TIMEOUT)
        except Exception as exc:
            return JSONResponse({"status": "starting", "reason": "UpstreamUnreachable", "problems": [str(exc)]}, 503)
        return JSONResponse({"status": "ready"})

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        await approvals.create_tables()
        if settings.access.session_key_file is None:
            sessions.use_key(await shared_key(db))
        await revocations.open()
        await rest.start()
        sweeper.start()
        if bridge is not None:
            bridge.start(lambda: Serving())
        keeper = asyncio.create_task(upstream.run(), name="gateway-upstream") if upstream is not None else None
        abandoning = asyncio.create_task(held.keep_abandoning(settings.sweep_interval), name="gateway-abandoned")
        try:
            async with server.session_manager.run() if server is not None else contextlib.nullcontext():
                yield
        finally:
            # The background tasks first: the abandoning sweep writes to the database disposed of below.
            await cancel_and_wait((abandoning, keeper))
            if bridge is not None:
                await bridge.stop()
            await sweeper.stop()
            await rest.stop()
            await db.dispose()

    allowed = runtime_hosts(settings.access.allowed_hosts, local_mode=not authenticator.required,
                            loopback_bind=is_loopback(settings.host), public_url=None,
                            anonymous_remote=settings.access.allow_anonymous_remote)
    hook = Route(HOOK_PATH, HookEndpoint(config, held, approvals).handle, methods=["POST"])  # agent CLIs' PreToolUse
    # /mcp first and straight to the SDK's session manager: not through the SDK's own Starlette app (its middleware
    # and router again) nor past every REST and inbox route (bench `gateway` section, docs/gateway.md "Speed").
    # Behind the binding and the SDK's body-size limit: an ungated tools/call answered without the SDK's server,
    # everything else by it (agent_runtime/gateway/fast_calls.py).
    mcp_routes = [Route(MCP_PATH, BindSessions(RequestBodyLimitMiddleware(
        FastCalls(config, upstream, server, server.session_manager), server.session_manager.max_request_body_size)))] \
        if server is not None and upstream is not None else []
    inner = Starlette(routes=[*mcp_routes, *rest.routes, hook, *inbox.routes])  # /mcp, /approvals…, /hooks…, /ui…
    guarded: ASGIApp = RequirePrincipal(inner, authenticator=authenticator, sessions=sessions,
                                        proxy=settings.access.proxy)
    if allowed is not None:
        guarded = HostCheck(guarded, allowed=allowed, exempt=frozenset({"/healthz", "/readyz"}))
    return Starlette(routes=[Route("/healthz", healthz), Route("/readyz", readyz), Mount("/", app=guarded)], lifespan=lifespan)


__all__ = ["MCP_PATH", "GatewaySettings", "build_authenticator", "build_gateway_app"]
