"""The gateway's ASGI app: authentication (the Agent's: tokens, JWT, TokenReview), the binding of MCP sessions to
principals, the MCP endpoint at :data:`MCP_PATH`, and the probes."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

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
from agent_runtime.access.settings import AccessSettings, is_loopback
from agent_runtime.agent_config import GatewayConfig
from agent_runtime.gateway.bindings import BindSessions
from agent_runtime.gateway.server import build_server
from agent_runtime.gateway.upstream import Upstream

MCP_PATH = "/mcp"
READY_TIMEOUT = 5.0  # seconds /readyz waits for the upstream to list its tools


@dataclass(frozen=True)
class GatewaySettings:
    config: GatewayConfig
    host: str = "127.0.0.1"
    port: int = 8080
    access: AccessSettings = field(default_factory=AccessSettings)


def build_authenticator(settings: GatewaySettings) -> Authenticator:
    """As the agent runtime's: refuses an open, anonymous gateway on a non-loopback address."""
    access = settings.access
    methods: list[BearerMethod] = []
    if access.tokens:
        methods.append(TokenFileMethod(access.tokens))
    if access.jwt is not None:
        methods.append(JwtMethod(access.jwt))
    authenticator = Authenticator(methods, access.identities)
    if not authenticator.required and not is_loopback(settings.host) and not access.allow_anonymous_remote:
        raise ValueError(
            f"refusing to serve {settings.host} without authentication: configure tokens (--api-token-file) or a JWT "
            "issuer in the gateway's access settings, serve 127.0.0.1, or pass --insecure-allow-anonymous"
        )
    return authenticator


def build_gateway_app(settings: GatewaySettings, upstream: Upstream | None = None) -> ASGIApp:
    config = settings.config
    upstream = upstream or Upstream(config.upstream)
    authenticator = build_authenticator(settings)
    server = build_server(config, upstream)
    mcp = server.streamable_http_app(streamable_http_path=MCP_PATH, host=settings.host)

    async def healthz(_: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(_: Request) -> Response:
        try:
            await asyncio.wait_for(upstream.list_tools(), READY_TIMEOUT)
        except Exception as exc:
            return JSONResponse({"status": "starting", "reason": "UpstreamUnreachable", "problems": [str(exc)]}, 503)
        return JSONResponse({"status": "ready"})

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        keeper = asyncio.create_task(upstream.run(), name="gateway-upstream")
        try:
            async with server.session_manager.run():
                yield
        finally:
            keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keeper

    allowed = runtime_hosts(settings.access.allowed_hosts, local_mode=not authenticator.required,
                            loopback_bind=is_loopback(settings.host), public_url=None,
                            anonymous_remote=settings.access.allow_anonymous_remote)
    guarded: ASGIApp = RequirePrincipal(BindSessions(mcp), authenticator=authenticator, proxy=settings.access.proxy)
    if allowed is not None:
        guarded = HostCheck(guarded, allowed=allowed, exempt=frozenset({"/healthz", "/readyz"}))
    return Starlette(routes=[Route("/healthz", healthz), Route("/readyz", readyz), Mount("/", app=guarded)],
                     lifespan=lifespan)


__all__ = ["MCP_PATH", "GatewaySettings", "build_authenticator", "build_gateway_app"]
