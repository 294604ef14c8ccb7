"""Command line: ``gatehouse`` (users' commands) and ``gatehouse-runtime`` (what the operator runs).

Each command is a thin shell over a module that does the work; heavy imports happen inside commands.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape

from agent_runtime.contract.errors import TranslationError

app = typer.Typer(help="Gatehouse: a human approval gate for AI agents.", no_args_is_help=True)
runtime_app = typer.Typer(help="Gatehouse agent runtime.", no_args_is_help=True)
err = Console(stderr=True)


@app.command()
def render(
    files: list[Path] = typer.Option(..., "-f", "--file", help="Manifest files (Agent, ModelConfig, RemoteMCPServer)."),
    agent: str | None = typer.Option(None, "--agent", help="Agent to render when the files hold several."),
) -> None:
    """Translate manifests into the AgentConfig JSON the runtime runs (what the operator mounts)."""
    from agent_runtime.contract.manifests import select_agent_config

    try:
        config = select_agent_config(files, agent)
    except (TranslationError, FileNotFoundError) as exc:
        _fail(exc)
    typer.echo(config.to_json(), nl=False)


def _fail(exc: Exception) -> None:
    if isinstance(exc, TranslationError):
        err.print("[bold red]invalid manifests:[/]")
        for problem in exc.problems:
            err.print(f"  - {problem}")
    else:  # one line, however long (rich would wrap it at 80 columns when stderr is no terminal)
        err.print(f"[bold red]error:[/] {escape(str(exc))}", soft_wrap=True)
    import gc

    gc.set_threshold(*DEFAULT_GC_THRESHOLDS)  # serve changes them while it starts (a CliRunner test goes on here)
    raise typer.Exit(2)


@runtime_app.command()
def serve(
    config: Path | None = typer.Option(None, "--config", help="AgentConfig JSON (the operator mounts /config/config.json)."),
    files: list[Path] = typer.Option([], "-f", "--file", help="Manifests (Agent, ModelConfig, MCP server) instead."),
    host: str = typer.Option("127.0.0.1", "--host"),
    port: int = typer.Option(8080, "--port"),
    state_dir: Path = typer.Option(Path(".gatehouse"), "--state-dir", help="Where the default sqlite database lives."),
    database_url: str | None = typer.Option(
        None, "--database-url", envvar="GATEHOUSE_DATABASE_URL",  # translator.DATABASE_URL_ENV: how the operator passes it
        help="e.g. postgresql+asyncpg://user:pw@host/db (or env GATEHOUSE_DATABASE_URL: a URL with a password stays "
        "out of the command line).",
    ),
    public_url: str | None = typer.Option(None, "--public-url", help="URL announced in the agent card."),
    log_level: str = typer.Option("warning", "--log-level"),
    api_token_file: Path | None = typer.Option(
        None, "--api-token-file",
        help="Bearer tokens for every channel (A2A, REST), 'principal[:groups=a,b]:token' a line (also env GATEHOUSE_API_TOKEN).",
    ),
    insecure_allow_anonymous: bool = typer.Option(
        False, "--insecure-allow-anonymous", help="Serve a non-loopback address with no authentication (anyone may decide)."
    ),
    webhooks: list[str] = typer.Option([], "--webhook", help="POST approval events here (repeatable; env GATEHOUSE_WEBHOOKS)."),
    webhook_format: str = typer.Option("json", "--webhook-format", envvar="GATEHOUSE_WEBHOOK_FORMAT", help="json or slack."),
    webhook_secret_file: Path | None = typer.Option(
        None, "--webhook-secret-file", help="HMAC-SHA256 key for X-Gatehouse-Signature (or env GATEHOUSE_WEBHOOK_SECRET)."
    ),
    idempotency_ttl: str = typer.Option(
        "24h", "--idempotency-ttl", envvar="GATEHOUSE_IDEMPOTENCY_TTL",
        help="How long a REST decision's Idempotency-Key is remembered (per principal), e.g. 24h, 90m.",
    ),
    kubeconfig: Path | None = typer.Option(None, "--kubeconfig", help="Mirror approvals as ToolApprovals in this cluster."),
    kube_namespace: str | None = typer.Option(None, "--kube-namespace", help="Their namespace (with $KUBECONFIG: turns it on)."),
    approval_retention: str = typer.Option("1h", "--approval-retention", help="Delete finished ToolApprovals after this."),
    kube_check_interval: str = typer.Option(
        "60s", "--kube-check-interval",
        help="How often to look for orphaned ToolApprovals and recheck the Agent's status (0: at start-up only).",
    ),
    tools_check_interval: str = typer.Option(
        "10s", "--tools-check-interval",
        help="How often, once ready, to check that each MCP server still answers (its loss shows on the Agent's "
             "RuntimeReady condition and under /readyz's warnings).",
    ),
    trust_kubectl: bool = typer.Option(
        False, "--trust-kubectl-without-admission-policy",
        help="Count kubectl votes even when the Agent does not report the admission policy as enforcing.",
    ),
    tls_cert: Path | None = typer.Option(None, "--tls-cert", help="Serve HTTPS with this certificate (PEM; with --tls-key)."),
    tls_key: Path | None = typer.Option(None, "--tls-key", help="The certificate's private key (PEM)."),
    otel: bool = typer.Option(
        False, "--otel", help="Export each approval wait as an OpenTelemetry span over OTLP/HTTP (on by itself when "
        "OTEL_EXPORTER_OTLP_ENDPOINT is set; the standard OTEL_* variables configure it; needs gatehouse[otel]).",
    ),
    max_body_bytes: int = typer.Option(
        1 << 20, "--max-body-bytes", envvar="GATEHOUSE_MAX_BODY_BYTES", min=1,
        help="Refuse request bodies (A2A, REST) over this many bytes: a JSON-RPC error, or 413.",
    ),
    ui_trusted_proxies: list[str] = typer.Option(
        [], "--ui-trusted-proxy", envvar="GATEHOUSE_UI_TRUSTED_PROXIES",
        help="Believe X-Forwarded-User/-Groups from this address or network (repeatable; an oauth2-proxy in front of /ui/).",
    ),
    ui_session_key_file: Path | None = typer.Option(
        None, "--ui-session-key-file",
        help="Key (32+ bytes) signing the inbox's session cookies (default: one kept in the database, shared by replicas).",
    ),
    ui_trusted_proxy_secret_file: Path | None = typer.Option(
        None, "--ui-trusted-proxy-secret-file", envvar="GATEHOUSE_UI_TRUSTED_PROXY_SECRET_FILE",
        help="A shared secret (32+ characters) the trusted proxy must also send in X-Gatehouse-Proxy-Secret; required "
        "when a trusted network contains a loopback address (a sidecar proxy).",
    ),
    ui_session_ttl: str = typer.Option("8h", "--ui-session-ttl", help="How long an inbox login lasts."),
    ui_secure_cookie: bool = typer.Option(
        False, "--ui-secure-cookie", envvar="GATEHOUSE_UI_SECURE_COOKIE",
        help="Mark the inbox's session cookie Secure on every request (behind TLS that the runtime cannot see).",
    ),
    allowed_hosts: list[str] = typer.Option(
        [], "--allowed-host", envvar="GATEHOUSE_ALLOWED_HOSTS",
        help="A Host name to answer besides loopback and the --public-url host, where the DNS-rebinding check is on "
        "(local mode, loopback binds); repeatable; '*' turns the check off where a credential is configured.",
    ),
    metrics_token_file: Path | None = typer.Option(
        None, "--metrics-token-file", envvar="GATEHOUSE_METRICS_TOKEN_FILE",
        help="/metrics answers only 'Authorization: Bearer <this file's token>'.",
    ),
    metrics_port: int | None = typer.Option(
        None, "--metrics-port", envvar="GATEHOUSE_METRICS_PORT", min=1, max=65535,
        help="Serve /metrics on this port of --host instead of the main port.",
    ),
) -> None:
    """Serve one agent over A2A with the approval gate (JSON-RPC at /, card, /healthz, /readyz, /metrics, /approvals,
    the approvals inbox at /ui/)."""
    import gc
    import os

    # While start-up imports and builds (~280,000 long-lived tracked objects: google-adk, a2a-sdk, genai) only the
    # young generation is collected: the default thresholds walked the old objects again and again (~0.3 s of CPU),
    # and one full collection at the end (what replaced them) still cost ~0.13-0.19 s. The young collections free
    # the import-time cycles as they are made (3,600 objects, 4.3 MB; most are pydantic's inspect.signature(list),
    # a copy of sys.modules each) while they are still in the cache; _settle_heap freezes what is left and sets the
    # serving thresholds (so does _fail). Interleaved cold starts: bench/README.md "Round three".
    gc.set_threshold(*STARTUP_GC_THRESHOLDS)
    gc.enable()
    # a2a-sdk wraps every request-path call in an OpenTelemetry span (read once, at import); the runtime installs
    # no tracer, so they only cost time. Set OTEL_INSTRUMENTATION_A2A_SDK_ENABLED=true to keep them.
    os.environ.setdefault("OTEL_INSTRUMENTATION_A2A_SDK_ENABLED", "false")
    from agent_runtime.access.settings import load_access_settings
    from agent_runtime.app.settings import RuntimeSettings, load_config
    from agent_runtime.rest.settings import load_rest_settings

    try:
        agent_config = load_config(config, files)
        from agent_runtime.contract.durations import parse_duration as _duration

        proxies = tuple(p.strip() for item in ui_trusted_proxies for p in item.split(",") if p.strip())
        hosts = tuple(h.strip() for item in allowed_hosts for h in item.split(",") if h.strip())
        access = load_access_settings(
            agent_config.access, token_file=api_token_file, insecure_allow_anonymous=insecure_allow_anonymous,
            trusted_proxies=proxies, session_key_file=ui_session_key_file, session_ttl=_duration(ui_session_ttl),
            trusted_proxy_secret_file=ui_trusted_proxy_secret_file, secure_cookies=ui_secure_cookie, allowed_hosts=hosts,
        )
        rest = load_rest_settings(webhooks=webhooks, webhook_format=webhook_format, webhook_secret_file=webhook_secret_file,
                                  idempotency_ttl=idempotency_ttl)
        tls = _tls_files(tls_cert, tls_key)
        from agent_runtime.app.metrics_endpoint import read_token

        metrics_token = read_token(metrics_token_file) if metrics_token_file is not None else None
        if metrics_port == port:
            raise ValueError(f"--metrics-port {metrics_port} is the main --port: give it a port of its own")
    except (TranslationError, FileNotFoundError, ValueError) as exc:
        _fail(exc)
    from agent_runtime.infra.database import LocationError, check_location, default_database_url

    try:  # before anything is built: a state directory the runtime cannot use is one line, not a traceback
        check_location(database_url or default_database_url(state_dir),
                       "the state directory" if database_url is None else "the database directory")
    except LocationError as exc:
        _fail(exc)
    import uvicorn

    from agent_runtime.app.factory import build_app

    # ADK would otherwise probe Google application-default credentials for mTLS on every MCP connection
    # (seconds without a metadata server); MCP servers here are not Google endpoints. Opt back in by setting it.
    os.environ.setdefault("GOOGLE_API_USE_CLIENT_CERTIFICATE", "false")

    from agent_runtime.contract.durations import parse_duration
    from agent_runtime.kube import detect

    try:
        retention = parse_duration(approval_retention)
        check = 0.0 if kube_check_interval.strip() in ("0", "0s") else parse_duration(kube_check_interval)
        tools_check = parse_duration(tools_check_interval)
    except ValueError as exc:
        _fail(exc)
    kube = detect(kubeconfig, kube_namespace, retention, default_namespace=agent_config.namespace, trust_kubectl=trust_kubectl,
                  check_seconds=check)
    settings = RuntimeSettings(
        config=agent_config, host=host, port=port, state_dir=state_dir, database_url=database_url, public_url=public_url,
        rest=rest, access=access, kube=kube, tls=tls is not None,
        otel=_otel(otel), max_body_bytes=max_body_bytes, tools_check_interval=tools_check, metrics_token=metrics_token,
        metrics_port=metrics_port,
    )
    try:
        app = build_app(settings)
    except (ValueError, RuntimeError) as exc:  # a bad kubeconfig too (KubeConfigError is a ValueError: no import of
        _fail(exc)                             # the Kubernetes client outside a cluster, tests/app/test_lazy_imports.py)
    _settle_heap()
    # Idle keep-alive connections stay open longer than clients' and load balancers' own idle timeouts (uvicorn's
    # 5 s default): the server closing one just as a client reuses it reads as a reset (bench: lost pauses at 60).
    cert, key = tls or (None, None)
    from agent_runtime.app.announce import AnnouncingServer

    # proxy_headers=False, whatever $FORWARDED_ALLOW_IPS says: uvicorn would otherwise take the client address and
    # scheme from X-Forwarded-For/-Proto sent by 127.0.0.1 (a sidecar, a port-forward: anyone local), before the
    # trusted-proxy check looks at them (agent_runtime.access.proxy reads those headers itself, from a trusted proxy).
    server = AnnouncingServer(uvicorn.Config(app, host=host, port=port, log_level=log_level, access_log=False,
                                             timeout_keep_alive=75, ssl_certfile=cert, ssl_keyfile=key,
                                             proxy_headers=False),
                              agent_config.name, public_url)
    try:
        server.run()  # what uvicorn.run does for one process, with the URLs printed once it listens
    except KeyboardInterrupt:
        pass
    if not server.started:
        raise typer.Exit(3)  # uvicorn's STARTUP_FAILURE: it has logged why


@runtime_app.command()
def gateway(
    config: Path | None = typer.Option(None, "--config", help="GatewayConfig JSON (what the operator would mount)."),
    files: list[Path] = typer.Option([], "-f", "--file", help="Manifests (MCPGateway, RemoteMCPServer) instead."),
    name: str | None = typer.Option(None, "--gateway", help="MCPGateway to serve when the files hold several."),
    host: str = typer.Option("127.0.0.1", "--host"),
    port: int = typer.Option(8080, "--port", help="Port to listen on (0: any free port, printed in the ready line)."),
    log_level: str = typer.Option("warning", "--log-level"),
    api_token_file: Path | None = typer.Option(
        None, "--api-token-file", help="Bearer tokens callers may present, one 'principal[:groups=a,b]:token' a line."
    ),
    insecure_allow_anonymous: bool = typer.Option(
        False, "--insecure-allow-anonymous", help="Serve a non-loopback address without authentication."
    ),
    allowed_hosts: list[str] = typer.Option([], "--allowed-host", help="Host names allowed besides loopback (repeatable)."),
    state_dir: Path = typer.Option(Path(".gatehouse"), "--state-dir", help="Where the default sqlite database lives."),
    database_url: str | None = typer.Option(
        None, "--database-url", envvar="GATEHOUSE_DATABASE_URL", help="The held calls' database (default: sqlite)."
    ),
    keepalive: str = typer.Option(
        "15s", "--keepalive", help="How often a client waiting on a held call gets a progress notification."
    ),
    kubeconfig: Path | None = typer.Option(None, "--kubeconfig", help="Mirror held calls as ToolApprovals in this cluster."),
    kube_namespace: str | None = typer.Option(None, "--kube-namespace", help="Their namespace (with $KUBECONFIG: turns it on)."),
    trust_kubectl: bool = typer.Option(
        False, "--trust-kubectl-without-admission-policy",
        help="Count kubectl votes although no admission policy vouches for who wrote them (tests, a cluster you trust).",
    ),
) -> None:
    """Serve an MCPGateway: an MCP server (streamable HTTP at /mcp) in front of its upstream (docs/gateway.md)."""
    from agent_runtime.access.settings import load_access_settings
    from agent_runtime.contract.agent_config import GatewayConfig

    try:
        if (config is None) == (not files):
            raise ValueError("give either --config FILE or one or more -f MANIFEST")
        if config is not None:
            gateway_config = GatewayConfig.from_json(config.read_text())
        else:
            from agent_runtime.contract.manifests import select_gateway_config

            gateway_config = select_gateway_config(files, name)
        hosts = tuple(h.strip() for item in allowed_hosts for h in item.split(",") if h.strip())
        access = load_access_settings(gateway_config.access, token_file=api_token_file,
                                      insecure_allow_anonymous=insecure_allow_anonymous, allowed_hosts=hosts)
        import uvicorn

        from agent_runtime.contract.durations import parse_duration
        from agent_runtime.gateway.app import MCP_PATH, GatewaySettings, build_gateway_app
        from agent_runtime.hooks.endpoint import HOOK_PATH
        from agent_runtime.infra.database import LocationError, check_location, default_database_url
        from agent_runtime.kube import detect

        kube = detect(kubeconfig, kube_namespace, default_namespace=gateway_config.namespace, trust_kubectl=trust_kubectl)

        try:
            check_location(database_url or default_database_url(state_dir),
                           "the state directory" if database_url is None else "the database directory")
        except LocationError as exc:
            raise ValueError(str(exc)) from None

        app = build_gateway_app(GatewaySettings(config=gateway_config, host=host, port=port, access=access,
                                                state_dir=state_dir, database_url=database_url,
                                                keepalive=parse_duration(keepalive), kube=kube))
    except (TranslationError, FileNotFoundError, ValueError, RuntimeError) as exc:
        _fail(exc)

    class Announcing(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            if self.started:
                bound = next((s.getsockname()[1] for srv in self.servers for s in (srv.sockets or ())), port)
                shown = f"[{host}]" if ":" in host else host
                if gateway_config.upstream is None:
                    print(f"gateway {gateway_config.name} ready: http://{shown}:{bound}{HOOK_PATH} (hooks only: no "
                          "upstream)", flush=True)
                else:
                    print(f"gateway {gateway_config.name} ready: http://{shown}:{bound}{MCP_PATH} "
                          f"(upstream {gateway_config.upstream.url})", flush=True)

    Announcing(uvicorn.Config(app, host=host, port=port, log_level=log_level, access_log=False, timeout_keep_alive=75,
                              proxy_headers=False)).run()


def _otel(flag: bool) -> bool:
    """Approval spans on? ``--otel`` without the exporter installed is an error; an OTLP endpoint in the environment
    (which a cluster may set for every pod) without it is a warning, and the runtime serves without spans."""
    import os

    from agent_runtime.telemetry import tracing

    if not tracing.enabled(flag, os.environ) or tracing.exporter_installed():
        return tracing.enabled(flag, os.environ)
    missing = "the OTLP exporter is not installed (pip install 'gatehouse[otel]')"
    if flag:
        _fail(ValueError(f"--otel: {missing}"))
    err.print(f"[yellow]warning:[/] OTEL_EXPORTER_OTLP_ENDPOINT is set but {missing}: approval spans are off", soft_wrap=True)
    return False


def _tls_files(cert: Path | None, key: Path | None) -> tuple[str, str] | None:
    """Both or neither; each must be a readable file (checked here, so a typo is a one-line error, not a traceback)."""
    if cert is None and key is None:
        return None
    if cert is None or key is None:
        raise ValueError("--tls-cert and --tls-key go together: give both, or neither (TLS terminated elsewhere)")
    for flag, path in (("--tls-cert", cert), ("--tls-key", key)):
        if not path.is_file():
            raise FileNotFoundError(f"{flag} {path}: no such file")
    import ssl

    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(cert, key)
    except (ssl.SSLError, OSError) as exc:
        raise ValueError(f"--tls-cert {cert} / --tls-key {key}: not a usable certificate and key ({exc})") from None
    return str(cert), str(key)


GC_THRESHOLDS = (50_000, 10, 10)  # the collector's generations, after start-up (see _settle_heap)
STARTUP_GC_THRESHOLDS = (10_000, 1_000_000, 1_000_000)  # while serve starts: the young generation only (see serve)
DEFAULT_GC_THRESHOLDS = (700, 10, 10)  # CPython's


def _settle_heap() -> None:
    """Keep the garbage collector off the start-up heap (google-adk, a2a-sdk, genai: ~1M long-lived objects).

    Measured per pause + resume: 4.1 ms of collection, and a full collection every ~100 requests that stalled
    the loop for ~280 ms; after freezing what start-up built and collecting the young generation every
    10,000 allocations instead of 700: 0.2 ms, no stall. With 20 decisions in flight the young generation's
    collections still took ~5% of the CPU (each ~7 ms: the requests' live objects are scanned every time); every
    50,000 allocations: +6% decisions/s (interleaved A/B; 100,000 was slower than 50,000).
    """
    import gc

    gc.collect(0)  # the young generation: what start-up made since its last young collection (no full walk)
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    gc.enable()


def main() -> None:
    app()


def runtime_main() -> None:
    runtime_app()


@runtime_app.callback()
def _runtime() -> None:
    """Serve one agent over A2A."""


@app.callback()
def _gatehouse() -> None:
    """Gatehouse: a human approval gate for AI agents."""


@app.command("demo-tools")
def demo_tools(
    sandbox: Path = typer.Option(..., "--sandbox", help="Directory the file tools are confined to (created if missing)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
    port: int = typer.Option(8765, "--port", help="Port to listen on (0: any free port, printed in the ready line)."),
    journal: Path | None = typer.Option(None, "--journal", help="Append one JSON line per executed tool call here."),
    seed: bool = typer.Option(False, "--seed", help="Put the demo's files (notes.txt, old.txt, .env, …) where missing."),
    state_key_file: Path | None = typer.Option(
        None, "--state-key-file", help="Seal put_file's request state with this file's bytes (default: the demo key)."),
) -> None:
    """Serve the demo MCP file server (list_dir, read_file, write_file, delete_file, put_file) at http://HOST:PORT/mcp."""
    from agent_runtime.clients.demo_tools import DEMO_STATE_KEY, serve

    if seed:
        from agent_runtime.clients.demo.stack import seed as seed_files

        seed_files(sandbox, overwrite=False)
    key = state_key_file.read_bytes().strip() if state_key_file is not None else DEMO_STATE_KEY
    serve(sandbox, host=host, port=port, journal=journal, state_key=key)


@app.command()
def demo(
    interactive: bool | None = typer.Option(
        None, "--interactive/--no-interactive", help="Hand over to chat (default: when stdin is a terminal)."
    ),
    keep: bool = typer.Option(False, "--keep", help="Keep the temp dir (sandbox, runtime state, logs) afterwards."),
) -> None:
    """Run the example agent locally and walk through approve, deny, an argument rule and a batch decision.
    Without a terminal it answers itself and exits 0 only if every step behaved as expected."""
    from agent_runtime.clients.demo import run_demo

    code = run_demo(interactive=interactive, keep=keep)
    if code:
        raise typer.Exit(code)


@app.command()
def chat(
    url: str = typer.Argument(..., help="The agent's A2A base URL (its card is at URL/.well-known/agent-card.json)."),
    context_id: str | None = typer.Option(None, "--context-id", help="Continue this conversation (A2A context id)."),
) -> None:
    """Chat with an agent and approve or deny its gated tool calls ($GATEHOUSE_TOKEN, if set, is sent as the bearer
    token). Piped stdin decides only with explicit
    'approve' / 'deny <reason>' lines; end of input with a request pending exits 3 and leaves it pending;
    Ctrl-C leaves at once (exit 130), deciding nothing."""
    import asyncio

    from agent_runtime.clients.chat import EXIT_INTERRUPTED, run_chat

    try:
        code = asyncio.run(run_chat(url, context_id))
    except KeyboardInterrupt:
        # Leaving never decides: a request or question that was pending stays pending on the server.
        typer.echo("\ninterrupted: nothing was decided by this client", err=True)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    if code:
        raise typer.Exit(code)


audit_app = typer.Typer(help="The audit log of approvals.", no_args_is_help=True)
app.add_typer(audit_app, name="audit")


@audit_app.command("export")
def audit_export(
    since: str | None = typer.Option(
        None, "--since", help="From this time: a date (2026-11-01, midnight UTC), a time (2026-11-01T08:00:00Z) or a "
        "duration back from now (24h, 7d); default: the oldest kept.",
    ),
    until: str | None = typer.Option(None, "--until", help="Up to (not including) this time, in the same forms."),
    fmt: str = typer.Option("jsonl", "--format", help="jsonl (one JSON object a line) or csv (with a header row)."),
    url: str | None = typer.Option(None, "--url", help="The runtime's base URL: read GET /audit (needs an auditor's token)."),
    token: str | None = typer.Option(None, "--token", envvar="GATEHOUSE_TOKEN", help="An auditor's bearer token."),
    state_dir: Path | None = typer.Option(None, "--state-dir", help="Read the runtime's sqlite state directly instead."),
    database_url: str | None = typer.Option(
        None, "--database-url", help="Read this database directly instead (e.g. postgresql+asyncpg://…)."
    ),
    agent: str | None = typer.Option(None, "--agent", help="Only this agent's events (with a database: the name to label them)."),
    tool: str | None = typer.Option(None, "--tool", help="Only calls of this tool."),
    principal: str | None = typer.Option(None, "--principal", help="Only events this principal made (asked, voted, decided)."),
    requested_by: str | None = typer.Option(None, "--requested-by", help="Only calls this principal asked for."),
    event: str | None = typer.Option(None, "--event", help="Only this event (requested, voted, decided, timed_out, …)."),
    output: Path | None = typer.Option(None, "-o", "--output", help="Write here instead of stdout."),
) -> None:
    """Export the audit log (who asked, voted and decided what, when, through which channel) as JSON lines or CSV;
    progress goes to stderr."""
    import asyncio
    import sys
    import time

    from agent_runtime.clients import audit_export as ax

    try:
        if fmt not in ("jsonl", "csv"):
            raise ValueError(f"--format must be jsonl or csv, not {fmt!r}")
        filters = ax.make_filters(since=since, until=until, agent=agent, tool=tool, principal=principal,
                                  requested_by=requested_by, event=event, now=time.time())
        pages = ax.pages(url=url, token=token, state_dir=state_dir, database_url=database_url, agent=agent, filters=filters)
    except (ValueError, FileNotFoundError) as exc:
        _fail(exc)
    form: ax.Format = "csv" if fmt == "csv" else "jsonl"
    out = output.open("w", newline="", encoding="utf-8") if output is not None else sys.stdout
    try:
        count = asyncio.run(ax.export(pages, form, out, progress=lambda line: err.print(line, soft_wrap=True)))
    except ax.ExportError as exc:
        _fail(exc)
    finally:
        if output is not None:
            out.close()
    err.print(f"exported {count} entr{'y' if count == 1 else 'ies'}{f' to {output}' if output else ''}", soft_wrap=True)


@app.command()
def slack(
    namespaces: list[str] = typer.Option(
        [], "-n", "--namespace", envvar="GATEHOUSE_SLACK_NAMESPACES",
        help="Watch the ToolApprovals of this namespace (repeatable; env: space-separated)."),
    host: str = typer.Option("0.0.0.0", "--host", help="Address of the interactions endpoint."),
    port: int = typer.Option(3000, "--port", help="Port of the interactions endpoint (POST /slack/interactions)."),
    kubeconfig: Path | None = typer.Option(None, "--kubeconfig", help="Default: in a pod, its ServiceAccount; else $KUBECONFIG."),
    users_file: Path | None = typer.Option(
        None, "--users-file", envvar="GATEHOUSE_SLACK_USERS_FILE",
        help="Slack user → principal mapping (YAML: users, emailDomains, groups; the chart mounts a ConfigMap)."),
    email_domains: list[str] = typer.Option(
        [], "--email-domain", envvar="GATEHOUSE_SLACK_EMAIL_DOMAINS",
        help="A Slack user whose profile e-mail is in this domain is that e-mail's principal (repeatable)."),
    api_url: str | None = typer.Option(None, "--slack-api-url", envvar="GATEHOUSE_SLACK_API_URL",
                                       help="The Slack Web API base URL (default https://slack.com/api/)."),
    replay_namespace: str | None = typer.Option(
        None, "--replay-namespace", envvar="GATEHOUSE_SLACK_REPLAY_NAMESPACE",
        help="Namespace of the replay memory shared by every bridge process (default: in a pod, its own; else default)."),
    replay_configmap: str = typer.Option(
        "gatehouse-slack-replays", "--replay-configmap", envvar="GATEHOUSE_SLACK_REPLAY_CONFIGMAP",
        help="The ConfigMap holding the replay memory (created when missing, if the bridge may)."),
    log_level: str = typer.Option("info", "--log-level"),
) -> None:
    """The Slack bridge: post every Agent's approval requests to its Slack channel (spec.approval.notify.slack) and decide
    them from Approve/Deny buttons as the Slack user's principal. Needs SLACK_BOT_TOKEN and SLACK_SIGNING_SECRET."""
    import logging
    import os

    import uvicorn

    from agent_runtime.slack import SlackSettings, build_app
    from agent_runtime.slack.users import UserMap

    token, secret = os.environ.get("SLACK_BOT_TOKEN", ""), os.environ.get("SLACK_SIGNING_SECRET", "")
    try:
        if not token or not secret:
            raise ValueError("set SLACK_BOT_TOKEN (xoxb-…) and SLACK_SIGNING_SECRET (the Slack app's signing secret)")
        spaces = [ns for item in namespaces for ns in item.split()]
        if not spaces:
            raise ValueError("give at least one --namespace to watch")
        users = UserMap.load(users_file.read_text() if users_file else "", [d for i in email_domains for d in i.split()])
    except (ValueError, OSError) as exc:
        _fail(exc)
    in_cluster = kubeconfig is None and bool(os.environ.get("KUBERNETES_SERVICE_HOST"))
    if kubeconfig is None and not in_cluster and os.environ.get("KUBECONFIG"):
        kubeconfig = Path(os.environ["KUBECONFIG"].split(os.pathsep)[0])
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if replay_namespace is None:
        own = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")  # a pod's own namespace
        replay_namespace = own.read_text().strip() if in_cluster and own.is_file() else "default"
    settings = SlackSettings(token, secret, tuple(spaces), users, kubeconfig, in_cluster, api_url,
                             replay_namespace=replay_namespace, replay_configmap=replay_configmap)
    starlette = build_app(settings)
    err.print(f"gatehouse slack: watching {', '.join(spaces)}; interactions at http://{host}:{port}/slack/interactions; "
              f"replays remembered in configmap {replay_namespace}/{replay_configmap}", soft_wrap=True)
    uvicorn.run(starlette, host=host, port=port, log_level=log_level, access_log=False,
                proxy_headers=False)  # never X-Forwarded-For/-Proto from 127.0.0.1 (see `serve`)


hook_app = typer.Typer(help="Agent-CLI hooks: the gateway decides before the CLI runs a tool (docs/gateway.md).",
                       no_args_is_help=True)
app.add_typer(hook_app, name="hook")


@hook_app.command("claude-code")
def hook_claude_code(
    url: str = typer.Option(..., "--url", envvar="GATEHOUSE_HOOK_URL",
                            help="The gateway's hook endpoint, e.g. https://gate.example/hooks/claude-code."),
    token_file: Path | None = typer.Option(None, "--token-file", help="A file holding the hook's bearer token."),
    token: str | None = typer.Option(None, "--token", envvar="GATEHOUSE_TOKEN", help="The hook's bearer token."),
    timeout: float = typer.Option(
        50.0, "--timeout", min=0.1,
        help="Seconds to wait for a decision; keep it below the hook's timeout in settings.json (then: exit 2, denied)."),
    fail_open: bool = typer.Option(
        False, "--fail-open", help="An unreachable server lets the CLI's own permission rules decide instead of denying."),
) -> None:
    """Claude Code's PreToolUse command hook: stdin to the gateway, its decision to stdout. Whatever keeps the gateway
    from deciding exits 2 (blocked) with the reason on stderr."""
    import asyncio
    import sys

    from agent_runtime.hooks.command import BLOCK, decide

    try:
        secret = token_file.read_text().strip() if token_file is not None else token
    except OSError as exc:
        sys.stderr.write(f"Gatehouse hook: cannot read the token file ({exc}), so the call is denied.\n")
        raise typer.Exit(BLOCK) from None
    outcome = asyncio.run(decide(sys.stdin.read(), url, secret, timeout, fail_open))
    sys.stdout.write(outcome.stdout)
    sys.stderr.write(outcome.stderr)
    if outcome.code:
        raise typer.Exit(outcome.code)
