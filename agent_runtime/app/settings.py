"""Runtime settings, read once at start-up (never at import time) and passed down explicitly."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agent_runtime.access.settings import AccessSettings
from agent_runtime.app.limits import DEFAULT_MAX_BODY_BYTES
from agent_runtime.contract.agent_config import AgentConfig
from agent_runtime.infra.database import default_database_url
from agent_runtime.kube.settings import KubeSettings
from agent_runtime.rest.settings import RestSettings


@dataclass(frozen=True)
class RuntimeSettings:
    config: AgentConfig
    host: str = "127.0.0.1"
    port: int = 8080
    state_dir: Path = Path(".gatehouse")
    database_url: str | None = None
    public_url: str | None = None
    sweep_interval: float = 0.25
    tools_check_interval: float = 10.0  # seconds between checks that each MCP server still answers (app/tool_watch.py)
    rest: RestSettings = field(default_factory=RestSettings)  # webhooks
    access: AccessSettings = field(default_factory=AccessSettings)  # who may call (every channel), who is who
    kube: KubeSettings | None = None  # Kubernetes-visible approvals (agent_runtime.kube), off when None
    tls: bool = False  # served over HTTPS (--tls-cert/--tls-key): the card's default URL says https
    otel: bool = False  # approval waits exported as OpenTelemetry spans (agent_runtime.telemetry.tracing.enabled)
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES  # request bodies over this are refused (agent_runtime.app.limits), A2A and REST
    metrics_token: str | None = None  # --metrics-token-file: /metrics needs it as a bearer token
    metrics_port: int | None = None  # --metrics-port: /metrics there (same --host), not on the main port

    @property
    def db_url(self) -> str:
        return self.database_url or default_database_url(self.state_dir)

    @property
    def url(self) -> str:
        return self.public_url or f"{'https' if self.tls else 'http'}://{self.host}:{self.port}/"


def load_config(config_path: Path | None, manifests: Sequence[Path]) -> AgentConfig:
    """The AgentConfig from ``--config config.json`` or from manifests (``-f``), exactly one of them."""
    if (config_path is None) == (not manifests):
        raise ValueError("give either --config FILE or one or more -f MANIFEST")
    if config_path is not None:
        return AgentConfig.from_json(config_path.read_text())
    from agent_runtime.contract.manifests import select_agent_config

    return select_agent_config(manifests)


__all__ = ["RuntimeSettings", "load_config"]
