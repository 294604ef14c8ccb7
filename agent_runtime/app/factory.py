"""The one place that assembles the runtime: stores, agent, gate, executor, request handler, channels, routes.

It sits above every other package of the runtime: the core (:mod:`agent_runtime.server`, approvals, questions)
knows nothing of REST or Kubernetes; :mod:`agent_runtime.rest` and :mod:`agent_runtime.kube` get the few core
parts they use from here.

``build_runtime(settings)`` wires the parts (cheap, no I/O); the Starlette lifespan then opens the stores
(creates every table once), lists the MCP tools once (readiness), and starts the timeout sweeper.

Routes: A2A JSON-RPC at ``/``, the agent card at ``/.well-known/agent-card.json``, ``/healthz``,
``/readyz`` (200 once the stores are open, the MCP tools listed and the tasks a restart interrupted resumed,
while the database stays usable; else 503
with the reason: :mod:`agent_runtime.app.readiness`, which the Kubernetes side also reports on the Agent as
``RuntimeReady``), ``/metrics`` (Prometheus; behind a token or on a port of its own when told:
:mod:`agent_runtime.app.metrics_endpoint`), the REST approvals API with its event stream
(:mod:`agent_runtime.rest`), the audit log at ``/audit`` (:mod:`agent_runtime.rest.audit`) and the approvals
inbox at ``/ui/`` (:mod:`agent_runtime.ui`). In local mode and on loopback, a request addressed to another host is
refused first (:mod:`agent_runtime.access.hosts`: DNS rebinding); every request body is capped
(:mod:`agent_runtime.app.limits`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import re
import sys
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any


def _import_a2a_server_without_grpc() -> None:
    """a2a-sdk's request handlers and routes import its optional gRPC handler and transports eagerly, and with
    them grpcio (~15 MB resident); this server speaks JSON-RPC only. Import them once with ``grpc`` hidden: a2a-sdk
    then keeps the placeholders it uses when grpcio is not installed. ``grpc`` stays importable for anything else
    afterwards. Done here, before the imports below, because every path that builds the app (CLI, tests, bench)
    imports this module first."""
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

# ruff: noqa: E402  (the imports below come after the workaround on purpose)
from a2a.server.agent_execution import SimpleRequestContextBuilder
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from google.adk.agents import LlmAgent
from google.adk.runners import Runner
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agent_runtime.access.authenticator import Authenticator
from agent_runtime.access.hosts import HostCheck, runtime_hosts
from agent_runtime.access.methods import BearerMethod, TokenFileMethod
from agent_runtime.access.middleware import PrincipalContextBuilder, RequirePrincipal
from agent_runtime.access.revocations import StoredRevocations
from agent_runtime.access.session_keys import shared_key
from agent_runtime.access.sessions import Sessions
from agent_runtime.access.settings import is_loopback
from agent_runtime.app.card import agent_card
from agent_runtime.app.json_numbers import whole_numbers_as_integers
from agent_runtime.app.limits import BodyLimit
from agent_runtime.app.metrics_endpoint import MetricsServer, metrics_route
from agent_runtime.app.readiness import (
    RECOVERING,
    STARTING,
    STOPPING,
    DatabaseWatch,
    Readiness,
    database_unavailable,
    gated_tools_missing,
    ready,
    tools_unreachable,
)
from agent_runtime.app.settings import RuntimeSettings
from agent_runtime.app.tool_watch import ToolServersWatch
from agent_runtime.approvals import ApprovalService
from agent_runtime.contract import policy
from agent_runtime.contract.translator import AGENT_TOKEN_AUDIENCE
from agent_runtime.delegation.client import SubAgentClient
from agent_runtime.delegation.flow import DelegationFlow, DelegationRuntime
from agent_runtime.delegation.tool import SubAgentTool
from agent_runtime.elicitations import elicitation_wire
from agent_runtime.elicitations.flow import ElicitationFlow, ElicitationRuntime
from agent_runtime.infra.database import Database
from agent_runtime.infra.fresh_ids import FreshIds
from agent_runtime.infra.tasks import cancel_and_wait
from agent_runtime.models.factory import build_model
from agent_runtime.pauses.registry import PauseKinds
from agent_runtime.pauses.resumptions import Resumptions
from agent_runtime.questions.flow import QuestionFlow, QuestionRuntime
from agent_runtime.rest.api import RestApi
from agent_runtime.rest.audit import AuditApi
from agent_runtime.server.decide_one import DecideOne
from agent_runtime.server.executor import GatehouseExecutor
from agent_runtime.server.gate import Gate
from agent_runtime.server.resume import GatehouseRequestHandler, Resumer
from agent_runtime.server.sessions import DurableSessionService
from agent_runtime.server.sweeper import TimeoutSweeper
from agent_runtime.server.task_store import CachedTaskStore
from agent_runtime.server.toolsets import CachingMcpToolset, ToolServerUnreachable, build_toolset, list_tool_servers
from agent_runtime.server.turns import LEGACY_USER_ID, TurnRunner
from agent_runtime.telemetry import tracing
from agent_runtime.telemetry.metrics import Metrics
from agent_runtime.ui.login import TokenLogin
from agent_runtime.ui.pages import InboxPages
from agent_runtime.ui.runtime_inbox import RuntimeInbox

if TYPE_CHECKING:
    # Imported where a runtime is told to use them (a cluster, a JWT issuer): the Kubernetes bridge and PyJWT are
    # start-up time for a runtime that needs neither (tests/app/test_lazy_imports.py, bench/README.md "Round three").
    from agent_runtime.kube.bridge import KubeBridge

log = logging.getLogger(__name__)

MISSING_TOOL_RETRY = 5.0  # seconds between listings while a gated tool is missing
RECOVERY_READY_WAIT = 30.0
"""Seconds /readyz waits for start-up recovery (resuming tasks decided before a restart) before reporting ready."""


def _agent_name(name: str) -> str:
    cleaned = re.sub(r"\W", "_", name)
    return cleaned if cleaned and not cleaned[0].isdigit() else f"agent_{cleaned}"


@dataclass
class Runtime:
    settings: RuntimeSettings
    db: Database
    metrics: Metrics
    approvals: ApprovalService
    sessions: DurableSessionService
    task_store: CachedTaskStore
    toolsets: Mapping[str, CachingMcpToolset]
    gate: Gate
    handler: GatehouseRequestHandler
    resumer: Resumer
    sweeper: TimeoutSweeper
    decide_one: DecideOne
    kube: KubeBridge | None = None
    _stage: Readiness = STARTING  # how far start-up got (or stopping); see ``readiness``
    _lister: asyncio.Task[None] | None = None
    _recovery: asyncio.Task[None] | None = None
    _tool_watch: ToolServersWatch | None = None
    questions: QuestionRuntime | None = None
    elicitations: ElicitationRuntime | None = None
    delegations: DelegationRuntime | None = None
    kinds: PauseKinds = field(default_factory=PauseKinds)  # the kinds of paused call (a taskless kind registers here)
    _database: DatabaseWatch | None = field(default=None, init=False)  # once the stores are open

    @property
    def readiness(self) -> Readiness:
        """What /readyz and the Agent's ``RuntimeReady`` say: the start-up stage, unless the database went bad
        since it opened (while not stopping). Setting it sets the stage."""
        fault = self._database.fault if self._database is not None else None
        return fault if fault is not None and self._stage is not STOPPING else self._stage

    @readiness.setter
    def readiness(self, value: Readiness) -> None:
        self._stage = value

    async def check_database(self) -> None:
        """Check the database now (``/readyz``; Postgres: unless it was checked within the last second)."""
        if self._database is not None:
            await self._database.refresh()

    @property
    def ready(self) -> bool:
        return self.readiness.ready

    @property
    def problems(self) -> list[str]:
        """Why the runtime is not ready (what /readyz lists): empty while ready."""
        return [] if self.readiness.ready else [self.readiness.message]

    async def open(self) -> None:
        await self.sessions.create_tables()
        await self.task_store.initialize()
        found = await self.approvals.create_tables()
        await self._adopt_unowned(found)
        if self.questions is not None:
            await self.questions.open()
        if self.elicitations is not None:
            await self.elicitations.open()
        if self.delegations is not None:
            await self.delegations.open()
        self.metrics.pending.set(await self.approvals.pending_count())
        self.db.pin()  # the files opened, from now on watched (removed, replaced, read-only; Postgres: SELECT 1)
        self._database = DatabaseWatch(self.db.check, max_age=0.0 if self.db.sqlite else 1.0)  # sqlite: a few stats
        self._database.start()
        self.sweeper.start()
        if self.kube is not None:
            self.kube.start(lambda: self.condition)

    def serve(self) -> None:
        """Once every channel listens for approval events (webhooks, the event stream): list the MCP tools, resume
        what a restart interrupted, then report ready."""
        self._lister = asyncio.create_task(self._list_tools(), name="gatehouse-list-tools")

    async def _adopt_unowned(self, version_found: int) -> None:
        """Tasks, sessions and requests written before they had owners go to one principal, never to everyone."""
        access = self.settings.access
        owner = access.owner_of_unowned(authenticated=access.configured)
        tasks = await self.task_store.adopt_unowned(owner)
        sessions = await self.sessions.adopt(LEGACY_USER_ID, owner)
        requests = await self.approvals.adopt_unowned(owner)
        if tasks or sessions or requests:
            log.warning("state from before task owners (version %d): %d task(s), %d conversation(s) and %d request(s) "
                        "now belong to %r", version_found, tasks, sessions, requests, owner)

    async def _list_tools(self) -> None:
        """List the MCP tools once (retrying until the servers answer and offer every gated tool); then the runtime is
        ready, and the servers are watched from then on (:mod:`agent_runtime.app.tool_watch`)."""
        config = self.settings.config
        while True:
            try:
                listed = await list_tool_servers(self.toolsets)
                offered = {(server, tool) for tool, server in listed.items()}
                missing = {tool: gate for tool, gate in policy.gated_mcp_tools(config).items() if (gate[0], tool) not in offered}
                if missing:
                    self.readiness = gated_tools_missing(missing)
                    log.error("%s", self.readiness.message)
                    for toolset in self.toolsets.values():
                        toolset.forget_listing()  # list again: the server may be fixed meanwhile
                    await asyncio.sleep(MISSING_TOOL_RETRY)
                    continue
                for server in config.mcp_servers:  # not gated: the model just never gets it, but say so
                    if absent := [t for t in server.tool_names if (server.name, t) not in offered]:
                        log.warning("MCP server %s does not offer %s (named in its toolNames): the model will not get "
                                    "them", server.name, ", ".join(absent))
                self.gate.register_tools(listed)
                break
            except ToolServerUnreachable as exc:  # names the server; its URL says where it was looked for
                urls = {server.name: server.url for server in self.settings.config.mcp_servers}
                self.readiness = tools_unreachable(f"{exc} (at {urls.get(exc.server, '?')})")
                log.warning("MCP tools not listed yet: %s", self.readiness.message)
                await asyncio.sleep(1.0)
            except Exception as exc:
                self.readiness = tools_unreachable(f"{type(exc).__name__}: {exc}")
                log.warning("MCP tools not listed yet: %s", exc)
                await asyncio.sleep(1.0)
        self.readiness = RECOVERING
        await self._recover()
        self.readiness = ready(sorted(self.toolsets))
        if self.toolsets:
            self._tool_watch = ToolServersWatch(config.mcp_servers, interval=self.settings.tools_check_interval)
            self._tool_watch.start()

    @property
    def tool_fault(self) -> Readiness | None:
        """A server that stopped answering after start-up (None: all answer, or not watched yet)."""
        return self._tool_watch.fault if self._tool_watch is not None else None

    @property
    def condition(self) -> Readiness:
        """What the Agent's ``RuntimeReady`` says: the readiness, or, while ready, a server lost since start-up.
        (``/readyz`` keeps 200 then: approvers must still reach the pod to decide what is pending.)"""
        readiness = self.readiness
        fault = self.tool_fault
        return fault if readiness.ready and fault is not None else readiness

    async def _recover(self) -> None:
        """Resume the tasks a restart interrupted between their last decision and their resume, before reporting
        ready, so a task does not change state after /readyz said 200. A recovery still running after
        ``RECOVERY_READY_WAIT`` seconds (a slow tool) goes on in the background: readiness does not wait on a tool."""
        recovery = asyncio.create_task(self._resume_recorded(), name="gatehouse-resume-recorded")
        self._recovery = recovery
        try:
            await asyncio.wait_for(asyncio.shield(recovery), RECOVERY_READY_WAIT)
        except TimeoutError:
            log.warning("resuming tasks decided before a restart is still running after %.0f s; reporting ready "
                        "meanwhile", RECOVERY_READY_WAIT)

    async def _resume_recorded(self) -> None:
        try:
            if resumed := await self.decide_one.resume_recorded():
                log.warning("resumed %d task(s) decided one request at a time before a restart", resumed)
        except Exception:
            log.exception("resuming tasks decided before a restart failed")

    async def failed(self, exc: BaseException) -> None:
        """Opening failed (the process exits next): say why on /readyz and, with a cluster, on the Agent."""
        self.readiness = database_unavailable(f"{type(exc).__name__}: {exc}")
        if self.kube is not None:
            await self.kube.report_failure(self.readiness)

    async def close(self) -> None:
        self.readiness = STOPPING
        await cancel_and_wait((self._lister, self._recovery))
        if self._tool_watch is not None:
            await self._tool_watch.stop()
        if self.kube is not None:
            await self.kube.stop()
        await self.sweeper.stop()
        if self._database is not None:
            await self._database.stop()
        if self.questions is not None:
            await self.questions.close()
        if self.elicitations is not None:
            await self.elicitations.close()
        if self.delegations is not None:
            await self.delegations.close()
        with contextlib.suppress(Exception):
            await self.handler.aclose()
        for toolset in self.toolsets.values():
            with contextlib.suppress(Exception):
                await toolset.close()
        await self.task_store.write_unwritten()
        await self.db.dispose()


def build_runtime(settings: RuntimeSettings) -> Runtime:
    config = settings.config
    db = Database(settings.db_url)
    metrics = Metrics(config.name)
    # New task and context ids, known empty until written under (one process on sqlite only; see fresh_ids.py).
    fresh = FreshIds() if db.sqlite else None
    approvals = ApprovalService(db, fresh=fresh)
    approvals.events.subscribe(metrics.on_approval_event)
    if settings.otel:  # each approval wait as an OpenTelemetry span (agent_runtime/telemetry/tracing.py); off: nothing imported
        approvals.events.subscribe(tracing.start(config.name).on_approval_event)
    # Postgres may have replicas: there the session cache checks the database and tasks are not cached.
    sessions = DurableSessionService(db, validate_cache=not db.sqlite, fresh=fresh)
    task_store = CachedTaskStore(db, fresh=fresh)
    toolsets = {server.name: build_toolset(server) for server in config.mcp_servers}
    gate = Gate(config, approvals, metrics)
    kinds = PauseKinds()  # filled below, in routing order (pauses/registry.py)
    questions = QuestionRuntime(config, db, metrics, fresh=fresh)  # hitl_request: tools (if humanTools.hitlRequest), store, flow
    # sub-agents (spec.tools[].type Agent): one tool and one A2A client each; their pauses wait in gatehouse_delegations
    clients = {sub.name: SubAgentClient(sub) for sub in config.sub_agents}
    delegations = DelegationRuntime(clients, db, config.approval.timeout_seconds, fresh=fresh)
    agent = LlmAgent(
        name=_agent_name(config.name),
        model=build_model(config.model),
        description=config.description,
        instruction=config.instruction,
        tools=[*toolsets.values(), *questions.tools, *(SubAgentTool(sub, clients[sub.name]) for sub in config.sub_agents)],
        before_model_callback=gate.before_model,
        before_tool_callback=gate.before_tool,
        after_tool_callback=gate.after_tool,
    )
    runner = Runner(app_name=config.name, agent=agent, session_service=sessions, auto_create_session=True)
    # MCP tools' questions (elicitation): a round waits as long as an approval would
    elicitations = ElicitationRuntime(db, config.approval.timeout_seconds, fresh=fresh)
    turns = TurnRunner(runner, sessions, approvals, metrics, config.approval.timeout_seconds, recorders=[
        (QuestionFlow.name, questions.recorder), (ElicitationFlow.name, elicitations.recorder),
        (DelegationFlow.name, delegations.recorder),
    ])
    # the kinds of paused call besides approvals, in routing order (pauses/registry.py)
    if config.sub_agents:
        kinds.add(delegations.flow_for(turns, approvals.finish_execution))
    kinds.add(elicitations.flow_for(turns, _retry(toolsets), approvals.finish_execution, single_process=db.sqlite))
    kinds.add(questions.flow_for(turns))
    name_of = None  # the ToolApproval a request is mirrored as, with a cluster
    if settings.kube:
        from agent_runtime.kube.objects import approval_name

        name_of = functools.partial(approval_name, config.name)
    executor = GatehouseExecutor(
        config, turns, approvals, metrics, single_process=db.sqlite, approval_name=name_of, owner_of=task_store.owner_of,
        kinds=kinds,
    )
    handler = GatehouseRequestHandler(
        agent_executor=executor, task_store=task_store, agent_card=agent_card(config, settings.url), approvals=approvals,
        kinds=kinds,
        request_context_builder=SimpleRequestContextBuilder(task_id_generator=fresh, context_id_generator=fresh),
        # a2a-sdk keeps an ActiveTask (queues, producer and consumer tasks: ~40 KB) per paused task until it is idle
        # this long; the store keeps the task, and a decision or a subscription recreates it from there. A person
        # decides seconds later at the soonest, so holding it longer only raises the peak of a burst of pauses (1 s:
        # ~60 held at once in the bench's fill, +2.3 MB RSS with 1,000 paused; bench/README.md, "Issue 40, bar 2:
        # what a pause leaves for the collector").
        interrupted_task_timeout=0.1,
    )
    resumer = Resumer(handler, task_store.owner_of)
    # a decision continues its pause through the kind: a taskless kind's callback, else the A2A resumer (pauses/)
    resumptions = Resumptions(approvals, resumer, kinds, metrics)
    sweeper = TimeoutSweeper(approvals, resumptions, config.approval.on_timeout, settings.sweep_interval)
    questions.watch(handler, settings.sweep_interval)
    elicitations.watch(handler, settings.sweep_interval)
    delegations.watch(handler, max(settings.sweep_interval, 1.0))  # each round asks every open sub-agent task over HTTP
    decide = DecideOne(approvals, metrics, resumptions, task_store, config)
    kube: KubeBridge | None = None
    if settings.kube:
        from agent_runtime.kube.bridge import KubeBridge

        kube = KubeBridge(
            settings.kube, config.name, approvals, decide, questions=questions.store, identities=settings.access.identities,
        )
    return Runtime(
        settings, db, metrics, approvals, sessions, task_store, toolsets, gate, handler, resumer, sweeper, decide,
        kube=kube, questions=questions, elicitations=elicitations, delegations=delegations, kinds=kinds,
    )


def _retry(toolsets: dict[str, CachingMcpToolset]) -> Any:
    """The elicitation flow's way back to a tool: retry its call on the server that offered it."""

    async def retry(server: str | None, tool: str, args: dict[str, Any], responses: dict[str, Any],
                    state: str | None) -> elicitation_wire.ToolRound:
        toolset = toolsets.get(server or "")
        if toolset is None:
            return elicitation_wire.ToolRound(result=elicitation_wire.failed_result(f"the tool server {server} is unknown"))
        return await toolset.continue_call(tool, args, responses, state)

    return retry


def build_authenticator(settings: RuntimeSettings, runtime: Runtime) -> Authenticator:
    """The one authenticator of every channel; refuses an open, anonymous runtime on a non-loopback address."""
    access = settings.access
    methods: list[BearerMethod] = []
    if access.tokens:
        methods.append(TokenFileMethod(access.tokens))
    if access.jwt is not None:
        from agent_runtime.access.jwt_tokens import JwtMethod

        methods.append(JwtMethod(access.jwt))
    if access.kubernetes_tokens and runtime.kube is not None:
        from agent_runtime.kube.token_review import TokenReviewMethod

        # Only tokens made for Agents (their audience): a token for the API server is refused, so no caller has to
        # hand this runtime a credential it could use on the API server in the caller's name.
        methods.append(TokenReviewMethod(runtime.kube.client, audiences=[AGENT_TOKEN_AUDIENCE]))
    authenticator = Authenticator(methods, access.identities)
    if not authenticator.required and not is_loopback(settings.host) and not access.allow_anonymous_remote:
        raise ValueError(
            f"refusing to serve {settings.host} without authentication: configure tokens (--api-token-file), a JWT issuer "
            "or Kubernetes tokens in the Agent's access settings, serve 127.0.0.1, or pass --insecure-allow-anonymous"
        )
    if not authenticator.required and not is_loopback(settings.host):
        log.warning("INSECURE: anyone who can reach %s:%d may use this agent and decide its calls "
                    "(--insecure-allow-anonymous)", settings.host, settings.port)
    return authenticator


def build_app(settings: RuntimeSettings) -> Starlette:
    runtime = build_runtime(settings)
    authenticator = build_authenticator(settings, runtime)
    insecure = not authenticator.required and not is_loopback(settings.host)
    rest = RestApi(
        settings.rest, agent=settings.config.name, db=runtime.db, approvals=runtime.approvals, metrics=runtime.metrics,
        decide_one=runtime.decide_one,
    )
    audit = AuditApi(settings.config.audit, db=runtime.db, agent=settings.config.name)  # GET /audit, retention
    revocations = StoredRevocations(runtime.db)  # signing out holds for every replica, and across restarts
    sessions = Sessions.from_key_file(settings.access.session_key_file, settings.access.session_ttl,
                                      revocations=revocations, always_secure=settings.access.secure_cookies)
    allowed = runtime_hosts(  # the DNS-rebinding guard (local mode, loopback binds); None: off
        settings.access.allowed_hosts, local_mode=not authenticator.required, loopback_bind=is_loopback(settings.host),
        public_url=settings.public_url, anonymous_remote=settings.access.allow_anonymous_remote,
    )
    host_check = [] if allowed is None else [Middleware(HostCheck, allowed=allowed, exempt=frozenset({"/healthz", "/readyz"}))]
    metrics = metrics_route(runtime.metrics.render, settings.metrics_token)
    metrics_server = None if settings.metrics_port is None else MetricsServer(
        Starlette(routes=[metrics], middleware=host_check), settings.host, settings.metrics_port)
    inbox = InboxPages(RuntimeInbox(
        settings.config.name, approvals=runtime.approvals, decide_one=runtime.decide_one, tasks=runtime.task_store,
        questions=runtime.questions.store if runtime.questions is not None else None,
        allow_session=settings.config.approval.allow_session_grants,
    ), sessions, TokenLogin(authenticator))  # /ui/: the approvals inbox

    async def healthz(_: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(_: Request) -> Response:
        warning = {"warning": "anonymous access allowed (--insecure-allow-anonymous)"} if insecure else {}
        await runtime.check_database()
        readiness = runtime.readiness
        if readiness.ready:
            lost = runtime.tool_fault  # on the Agent's condition; the pod stays in its Service for the approvers
            warnings = {"warnings": [lost.message]} if lost is not None else {}
            return JSONResponse({"status": "ready", **warning, **warnings})
        status = "unavailable" if readiness.reason == "DatabaseUnavailable" else "starting"
        body = {"status": status, "reason": readiness.reason, "problems": [readiness.message], **warning}
        return JSONResponse(body, status_code=503)

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        try:
            await runtime.open()
        except Exception as exc:
            log.exception("runtime failed to start")
            await runtime.failed(exc)
            raise
        if settings.access.session_key_file is None:  # the inbox's sessions: one key for every replica and restart
            sessions.use_key(await shared_key(runtime.db))
        await revocations.open()
        await rest.start()
        await audit.start()
        runtime.serve()
        try:
            if metrics_server is not None:
                await metrics_server.start()
            yield
        finally:
            if metrics_server is not None:
                await metrics_server.stop()
            await audit.stop()
            await rest.stop()
            await runtime.close()

    routes = [
        Route("/healthz", healthz),
        Route("/readyz", readyz),
        *([metrics] if metrics_server is None else []),  # else on a port of its own
        *rest.routes,
        *audit.routes,
        *inbox.routes,
        *create_agent_card_routes(agent_card(settings.config, settings.url, authenticator.security_schemes())),
        # Whole numbers as JSON integers: protobuf Structs would write approvers.required as 1.0 (json_numbers.py).
        *whole_numbers_as_integers(
            create_jsonrpc_routes(runtime.handler, rpc_url="/", context_builder=PrincipalContextBuilder())),
    ]
    middleware = [  # outermost first: a misdirected request (DNS rebinding) or a body over the cap is refused first
        *host_check,
        Middleware(BodyLimit, max_bytes=settings.max_body_bytes),
        Middleware(RequirePrincipal, authenticator=authenticator, sessions=sessions,
                   proxy=settings.access.proxy),
    ]
    app = Starlette(routes=routes, lifespan=lifespan, middleware=middleware)
    app.state.runtime = runtime
    return app


__all__ = ["Runtime", "agent_card", "build_app", "build_authenticator", "build_runtime"]
