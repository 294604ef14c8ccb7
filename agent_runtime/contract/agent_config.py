"""``AgentConfig``: the one contract between the operator and the runtime.

The operator writes it as ``config.json`` into the ``<agent>-config`` Secret; the runtime reads it with
``gatehouse-runtime serve --config``. Both sides import this module, so a field added here is added for both.
Secret values never appear here: only the names of the environment variables that carry them and the
Secret keys those variables come from.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agent_runtime.contract import redaction
from agent_runtime.contract.channels import BridgeChannel

SCHEMA_VERSION: Literal["gatehouse.dev/agent-config/v1"] = "gatehouse.dev/agent-config/v1"
MODEL_API_KEY_ENV = "GATEHOUSE_MODEL_API_KEY"


class ConfigModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SecretEnvRef(ConfigModel):
    """A secret value delivered as an environment variable ``env`` from Secret ``secret``/``key``."""

    env: str
    secret: str
    key: str


class ScriptedToolCall(ConfigModel):
    name: str
    args: dict[str, Any] = Field(default_factory=dict)


class ScriptedRule(ConfigModel):
    match: str
    tool_calls: list[ScriptedToolCall] = Field(default_factory=list)
    then: list[ScriptedToolCall] = Field(default_factory=list)  # a second round, once the first round's results are in
    reply: str = ""


class ScriptedModel(ConfigModel):
    provider: Literal["Scripted"] = "Scripted"
    model: str
    rules: list[ScriptedRule] = Field(default_factory=list)
    no_match_reply: str | None = None


class GeminiModel(ConfigModel):
    provider: Literal["Gemini"] = "Gemini"
    model: str
    api_key: SecretEnvRef | None = None
    base_url: str | None = None


class LiteLLMModel(ConfigModel):
    """OpenAI, Anthropic, Ollama and generic LiteLLM models, all served through LiteLLM."""

    provider: Literal["OpenAI", "Anthropic", "Ollama", "LiteLLM"]
    model: str
    api_key: SecretEnvRef | None = None
    base_url: str | None = None


ModelSettings = Annotated[ScriptedModel | GeminiModel | LiteLLMModel, Field(discriminator="provider")]


class HeaderRef(ConfigModel):
    name: str
    value_from: SecretEnvRef


class McpServerConfig(ConfigModel):
    name: str
    url: str
    protocol: Literal["STREAMABLE_HTTP", "SSE"] = "STREAMABLE_HTTP"
    timeout_seconds: float = 30.0
    tool_names: list[str]
    require_approval: list[str] = Field(default_factory=list)
    headers: list[HeaderRef] = Field(default_factory=list)


class SubAgentConfig(ConfigModel):
    """Another A2A agent offered to the model as one tool (``spec.tools[].type: Agent``, :mod:`agent_runtime.delegation`).

    The model calls tool ``name`` with ``{"request": "<text>"}``; the runtime sends that text to the agent at ``card_url``
    with its own credentials and hands the reply back. When the sub-agent pauses, this agent's task pauses with the
    sub-agent's requests inside its own; decisions sent here are forwarded there on behalf of the human who made them.
    """

    name: str  # the tool name the model calls (the Agent's name, or the tool name given for a remote agent)
    agent: str  # who it is, for people and the audit: "<namespace>/<name>" for an Agent, else the card URL
    card_url: str  # where its agent card is served (http(s)://host:port/; the card path is appended when missing)
    description: str = ""
    token: SecretEnvRef | None = None  # a bearer token from a Secret (a remote agent's credentialsSecretRef)
    token_file: str | None = None  # a bearer token read from this file on every call (the pod's ServiceAccount token)
    timeout_seconds: float = Field(default=300.0, gt=0)  # one request to the sub-agent


class ApproversConfig(ConfigModel):
    """Who may decide a gated call (:mod:`agent_runtime.contract.authority`): ``required`` distinct approvals from the
    listed users or members of the listed groups, or any authenticated person with ``any_authenticated`` (the explicit
    opt-in to "anyone may decide"); one allowed deny denies. ``allow_requester`` False: the principal who started the
    task may not decide its calls (separation of duties)."""

    users: list[str] = Field(default_factory=list)
    groups: list[str] = Field(default_factory=list)
    required: int = Field(default=1, ge=1)
    allow_requester: bool = True
    any_authenticated: bool = False


class RuleConfig(ConfigModel):
    tool: str
    action: Literal["require", "allow", "deny"]
    arg: str | None = None
    glob: str | None = None
    regex: str | None = None
    approvers: ApproversConfig | None = None  # a require rule's own approvers (else the tool's, else the default)
    allow_edit: bool = False  # an approver may approve the calls this rule gates with changed arguments (contract/edits.py)


class RedactConfig(ConfigModel):
    """What of a gated call's arguments is shown as ``«redacted»`` wherever the approval leaves the runtime's
    database for a broader audience (:mod:`agent_runtime.contract.redaction`); fixed on a request when its call pauses."""

    paths: list[str] = Field(default_factory=list)  # argument names or simple JSON paths: token, $.headers.authorization
    patterns: list[str] = Field(default_factory=list)  # regular expressions searched in every string value
    builtins: bool = True  # also the built-in secret shapes (redaction.BUILTIN_PATTERNS)

    @model_validator(mode="after")
    def _readable(self) -> RedactConfig:
        redaction.check(self)
        return self


class ApprovalPolicy(ConfigModel):
    """The effective policy. Per-server ``require_approval`` lives on :class:`McpServerConfig`."""

    require_for_all_tools: bool = False
    exempt: list[str] = Field(default_factory=list)
    rules: list[RuleConfig] = Field(default_factory=list)
    timeout_seconds: float = 900.0
    on_timeout: Literal["deny", "approve", "ask"] = "deny"  # ask: a hook hands it to the terminal; MCP calls: deny
    allow_session_grants: bool = False
    approvers: ApproversConfig | None = None  # the default for every gated call; None: the requester decides alone
    tool_approvers: dict[str, ApproversConfig] = Field(default_factory=dict)  # per tool name
    grant_ttl_seconds: float = 3600.0  # a session grant lasts at most this long (and never beyond its context)
    redact: RedactConfig = Field(default_factory=RedactConfig)  # what approvers and viewers do not see of the arguments
    editable_tools: list[str] = Field(default_factory=list)  # tools whose gated calls may be approved with changed arguments


class IdentityConfig(ConfigModel):
    """One person known under several names: every alias (a Kubernetes user name, a JWT principal, a token-file
    user) is resolved to ``principal``, so N-of-M and separation of duties count them once."""

    principal: str = Field(min_length=1)
    aliases: list[str] = Field(default_factory=list)


class JwtConfig(ConfigModel):
    """JWTs accepted as bearer tokens: signature checked against the JWKS file, issuer, audience and expiry too."""

    jwks_file: str
    issuer: str
    audience: str
    principal_claim: str | None = None  # None: the principal is "<issuer>#<sub>"
    groups_claim: str = "groups"


class AccessConfig(ConfigModel):
    """Who may call the agent at all (authentication), and who is who (identities). The approvers live under
    ``approval``; secrets (tokens, keys) arrive as files, never here."""

    token_file: str | None = None  # principal[:groups=a,b]:token per line
    jwt: JwtConfig | None = None
    kubernetes_tokens: bool = False  # ServiceAccount tokens checked with a TokenReview (in a cluster)
    identities: list[IdentityConfig] = Field(default_factory=list)
    unowned_tasks_owner: str | None = None  # who owns tasks written before tasks had owners
    # Callers trusted to act on behalf of the human they relay (a parent agent's principal, a chat bridge): their
    # decisions count as that human's, judged against this agent's approvers (agent_runtime.delegation).
    delegators: list[str] = Field(default_factory=list)
    bridges: dict[str, BridgeChannel] = Field(default_factory=dict)  # delegator principal → the channel it is (slack)
    max_delegation_depth: int = Field(default=3, ge=1)  # how many agents deep a request may travel to reach this one


class AuditorsConfig(ConfigModel):
    """Principals who may read the audit log: these users, and members of these groups."""

    users: list[str] = Field(default_factory=list)
    groups: list[str] = Field(default_factory=list)


class AuditConfig(ConfigModel):
    """The audit log (:mod:`agent_runtime.approvals.audit`): who may read it (``GET /audit``; nobody when no auditor
    is named) and how long its events are kept."""

    auditors: AuditorsConfig = Field(default_factory=AuditorsConfig)
    retention_seconds: float = 90 * 86400.0


class HumanTools(ConfigModel):
    hitl_request: bool = False


class SkillConfig(ConfigModel):
    id: str
    name: str
    description: str = ""
    tags: list[str] = Field(default_factory=list)
    examples: list[str] = Field(default_factory=list)


class CardConfig(ConfigModel):
    name: str
    description: str = ""
    version: str = "0.1.0"
    skills: list[SkillConfig] = Field(default_factory=list)


class AgentConfig(ConfigModel):
    schema_version: Literal["gatehouse.dev/agent-config/v1"] = SCHEMA_VERSION
    name: str
    namespace: str = "default"
    description: str = ""
    instruction: str = ""
    model: ModelSettings
    mcp_servers: list[McpServerConfig] = Field(default_factory=list)
    sub_agents: list[SubAgentConfig] = Field(default_factory=list)
    approval: ApprovalPolicy = Field(default_factory=ApprovalPolicy)
    human_tools: HumanTools = Field(default_factory=HumanTools)
    access: AccessConfig = Field(default_factory=AccessConfig)
    audit: AuditConfig = Field(default_factory=AuditConfig)
    card: CardConfig

    def to_json(self) -> str:
        return self.model_dump_json(indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str | bytes) -> AgentConfig:
        return cls.model_validate_json(text)


GATEWAY_SCHEMA_VERSION: Literal["gatehouse.dev/gateway-config/v1"] = "gatehouse.dev/gateway-config/v1"


class GatewayConfig(ConfigModel):
    """What an MCPGateway's runtime (``gatehouse-runtime gateway --config``) needs: its upstream and the same approval,
    access and audit settings as an Agent's, read by the same code (:mod:`agent_runtime.contract.policy`,
    :mod:`agent_runtime.contract.authority`, :mod:`agent_runtime.access`). A schema of its own, so neither runtime ever starts
    from the other's config by mistake."""

    schema_version: Literal["gatehouse.dev/gateway-config/v1"] = GATEWAY_SCHEMA_VERSION
    name: str
    namespace: str = "default"
    description: str = ""
    # tool_names empty: every upstream tool is offered. None: a hooks-only gateway (no /mcp, nothing forwarded).
    upstream: McpServerConfig | None = None
    approval: ApprovalPolicy = Field(default_factory=ApprovalPolicy)
    access: AccessConfig = Field(default_factory=AccessConfig)
    audit: AuditConfig = Field(default_factory=AuditConfig)

    @property
    def mcp_servers(self) -> list[McpServerConfig]:
        """The upstream as the policy reads an Agent's tool servers (:func:`agent_runtime.contract.policy.evaluate`)."""
        return [self.upstream] if self.upstream is not None else []

    def to_json(self) -> str:
        return self.model_dump_json(indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str | bytes) -> GatewayConfig:
        return cls.model_validate_json(text)
