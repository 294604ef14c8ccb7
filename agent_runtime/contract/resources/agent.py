"""The ``Agent`` custom resource (``crds/agent.yaml``): what to run, which tools need a human, and who is who.

Follow one field end to end: ``spec.tools[].mcpServer.requireApproval`` is declared in
``crds/agent.yaml``, modelled here as :class:`McpServerTool.require_approval`, turned into
``AgentConfig.mcp_servers[].require_approval`` by :mod:`agent_runtime.contract.translator`, and enforced by
:mod:`agent_runtime.contract.policy` at call time.

Every field's ``description`` is the same text as in the CRD (``kubectl explain agent.spec...``); a test keeps
the two equal. Rules between fields (an approvers block names somebody, an alias belongs to one principal) are
checked by the translator, with field paths, and by CEL rules in the CRD where the API server can check them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from agent_runtime.contract.channels import BridgeChannel
from agent_runtime.contract.resources.common import Resource, SpecModel

# A Kubernetes quantity as a claim's size is written (1Gi, 500Mi, 10G); the API server parses the rest.
QUANTITY_PATTERN = r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$"
# An absolute http(s) URL: a scheme, a host, then anything without whitespace.
PUBLIC_URL_PATTERN = r"^https?://[^\s/?#]+([/?#]\S*)?$"
# A tool name a model can call (and an Agent tool's name): a letter or underscore, then up to 63 more.
TOOL_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$"
# The same words as the CRD's CEL rules on spec.tools[] and spec.access.delegators[].
MCP_SERVER_TOOL_MESSAGE = "a tool of type McpServer needs an mcpServer block and takes no agent block"
AGENT_TOOL_MESSAGE = "a tool of type Agent needs an agent block and takes no mcpServer block"
DELEGATOR_MESSAGE = "a delegator names exactly one of agent or principal"


class McpServerTool(SpecModel):
    name: str = Field(min_length=1, description="Name of a RemoteMCPServer in the Agent's namespace.")
    kind: Literal["RemoteMCPServer"] = Field(
        default="RemoteMCPServer", description="Kind of the tool server; only RemoteMCPServer."
    )
    tool_names: list[str] = Field(min_length=1, description="Tools of that server offered to the model.")
    require_approval: list[str] = Field(
        default_factory=list, description="Tools of that server that pause for a human's approval."
    )


class AgentCredentialsRef(SpecModel):
    name: str = Field(min_length=1, description="Name of a Secret in the Agent's namespace.")
    key: str = Field(default="token", min_length=1, description="Key of that Secret holding the bearer token.")


class AgentTool(SpecModel):
    """Another agent offered to the model as one tool: an Agent of this namespace, or a remote A2A agent (cardUrl)."""

    name: str = Field(
        pattern=TOOL_NAME_PATTERN,
        description="The tool name the model calls; without cardUrl also the name of an Agent in this namespace.",
    )
    card_url: str | None = Field(
        default=None,
        min_length=1,
        description="Absolute http(s) URL of a remote A2A agent (where its agent card is served) instead of an Agent of "
        "this namespace; then name is only the tool name.",
    )
    credentials_secret_ref: AgentCredentialsRef | None = Field(
        default=None,
        description="Only with cardUrl: a Secret key holding the bearer token this agent presents to the remote agent "
        "(an Agent of this namespace is called with this agent's ServiceAccount token).",
    )
    description: str | None = Field(
        default=None,
        description="What the model is told the tool does; default: the Agent's spec.description, else a generic text.",
    )
    timeout: str = Field(default="5m", description="How long one request to the agent may take, e.g. 30s, 5m.")


class ToolSpec(SpecModel):
    type: Literal["McpServer", "Agent"] = Field(
        default="McpServer",
        description="Kind of tool source: McpServer (tools of an MCP server) or Agent (another agent as one tool).",
    )
    mcp_server: McpServerTool | None = Field(
        default=None, description="An MCP server and which of its tools the model may call; only with type McpServer."
    )
    agent: AgentTool | None = Field(
        default=None, description="Another agent the model may call as one tool; only with type Agent."
    )

    @model_validator(mode="after")
    def _one_source(self) -> ToolSpec:
        if self.type == "McpServer" and (self.mcp_server is None or self.agent is not None):
            raise ValueError(MCP_SERVER_TOOL_MESSAGE)
        if self.type == "Agent" and (self.agent is None or self.mcp_server is not None):
            raise ValueError(AGENT_TOOL_MESSAGE)
        return self


class RuleCondition(SpecModel):
    arg: str = Field(min_length=1, description="Name of the tool argument to test.")
    glob: str | None = Field(default=None, description="Segment-aware glob the argument must match (** spans segments).")
    regex: str | None = Field(default=None, description="Python regular expression searched in the argument.")

    @model_validator(mode="after")
    def _exactly_one_matcher(self) -> RuleCondition:
        if (self.glob is None) == (self.regex is None):
            raise ValueError("set exactly one of 'glob' or 'regex'")
        return self


class ApproversSpec(SpecModel):
    """Who may decide a gated call: ``required`` distinct approvals from the listed users or group members."""

    users: list[str] = Field(
        default_factory=list, description="Principals (user names) who may approve or deny."
    )
    groups: list[str] = Field(
        default_factory=list, description="Groups whose members may approve or deny."
    )
    required: int = Field(
        default=1, ge=1, description="How many distinct allowed principals must approve; one allowed deny denies."
    )
    allow_requester: bool = Field(
        default=True, description="Whether the principal who started the task may decide its calls (false: separation of duties)."
    )
    any_authenticated: bool = Field(
        default=False,
        description="Whether any authenticated person (never a ServiceAccount) may decide, besides the users and groups "
        "listed: the explicit opt-in to letting anyone decide.",
    )


class ApprovalRule(SpecModel):
    tool: str = Field(min_length=1, description="Tool the rule applies to.")
    when: RuleCondition | None = Field(default=None, description="Argument test; without it the rule applies to every call.")
    action: Literal["require", "allow", "deny"] = Field(
        default="require", description="require: pause for a decision; allow: run; deny: refuse."
    )
    approvers: ApproversSpec | None = Field(
        default=None, description="Who may decide calls this rule gates; only with action require."
    )
    allow_edit: bool = Field(
        default=False,
        description="Whether an approver may approve a call this rule gates with changed arguments (the edited call is "
        "checked against the whole policy again); only with action require.",
    )


class ToolApprovers(SpecModel):
    tool: str = Field(min_length=1, description="Tool whose gated calls these approvers decide.")
    approvers: ApproversSpec = Field(description="Who may decide that tool's gated calls.")


class RedactSpec(SpecModel):
    """What approvers and viewers do not see of a gated call's arguments (the task's owner sees everything)."""

    paths: list[str] = Field(
        default_factory=list,
        description="Argument names or simple JSON paths (token, headers.authorization, $.items[*].secret) whose whole "
        "value is shown as «redacted»; names match without regard to case.",
    )
    patterns: list[str] = Field(
        default_factory=list,
        description="Python regular expressions searched in every string argument; each match is shown as «redacted» "
        "(only its group named secret, if it has one).",
    )
    builtins: bool = Field(
        default=True,
        description="Also redact the built-in secret shapes: API keys (sk-…, sk_live_…), GitHub, Slack, AWS and Google "
        "keys, bearer tokens, JWTs, private keys and passwords in URLs.",
    )


SLACK_CHANNEL_PATTERN = r"^(#[a-z0-9][a-z0-9._-]{0,79}|[CG][A-Z0-9]{6,20})$"


class SlackNotifySpec(SpecModel):
    channel: str = Field(
        pattern=SLACK_CHANNEL_PATTERN,
        description="The Slack channel the Slack bridge (gatehouse slack) posts this agent's approval requests to: a "
        "channel ID (C0123ABCD) or #name; the bridge's Slack app must be a member of it.",
    )


class NotifySpec(SpecModel):
    slack: SlackNotifySpec | None = Field(
        default=None, description="Post each approval request to Slack, with Approve and Deny buttons (docs/slack.md)."
    )


class ApprovalSpec(SpecModel):
    require_for_all_tools: bool = Field(default=False, description="Gate every tool call, except the exempt tools.")
    exempt: list[str] = Field(default_factory=list, description="Tools requireForAllTools does not gate.")
    rules: list[ApprovalRule] = Field(
        default_factory=list,
        description="Argument-conditional rules, tested in order before anything else; the first that applies wins.",
    )
    timeout: str = Field(default="15m", description="How long a request waits for a decision, e.g. 30s, 15m, 1h30m.")
    on_timeout: Literal["deny", "approve", "ask"] = Field(
        default="deny", description="What a request that waited too long becomes (ask: an MCPGateway's hooks only).")
    allow_session_grants: bool = Field(
        default=False, description="Whether an approval may cover the same tool for the rest of the conversation."
    )
    approvers: ApproversSpec | None = Field(
        default=None, description="Who may decide every gated call without approvers of its own; none: the requester alone."
    )
    tool_approvers: list[ToolApprovers] = Field(
        default_factory=list,
        description="Approvers per tool, over spec.approval.approvers; a rule's own approvers win over them.",
    )
    grant_ttl: str = Field(
        default="1h", alias="grantTTL", description="How long a session grant lasts at most, e.g. 30m, 1h."
    )
    redact: RedactSpec = Field(
        default_factory=RedactSpec,
        description="Arguments shown as «redacted» in ToolApprovals, Events, REST, the event stream and webhooks; the "
        "task's owner sees them in full, and an approval stays bound to the real arguments by their hash.",
    )
    editable_tools: list[str] = Field(
        default_factory=list,
        description="Tools whose gated calls an approver may approve with changed arguments, whichever part of the "
        "policy gated them (the edited call is checked against the whole policy again).",
    )
    notify: NotifySpec = Field(
        default_factory=NotifySpec,
        description="Where people are told of this agent's approval requests besides kubectl, REST and the inbox; "
        "read by the cluster's Slack bridge, not by the runtime.",
    )


class HumanToolsSpec(SpecModel):
    hitl_request: bool = Field(default=False, description="Offer the model the built-in hitl_request tool to ask the human.")


class A2ASkill(SpecModel):
    id: str = Field(min_length=1, description="Skill id in the agent card.")
    name: str = Field(min_length=1, description="Skill name in the agent card.")
    description: str = Field(default="", description="What the skill does.")
    tags: list[str] = Field(default_factory=list, description="Keywords for the skill.")
    examples: list[str] = Field(default_factory=list, description="Example requests.")


class A2AConfigSpec(SpecModel):
    skills: list[A2ASkill] = Field(default_factory=list, description="Skills the A2A agent card announces.")
    public_url: str | None = Field(
        default=None,
        pattern=PUBLIC_URL_PATTERN,
        description="Absolute http(s) URL the agent card announces, e.g. behind an ingress; default: "
        "http://<agent>.<namespace>.svc.cluster.local:8080/.",
    )


class DeploymentSpec(SpecModel):
    replicas: int = Field(default=1, ge=0, description="Runtime pods; more than 1 needs spec.state.postgres.")
    image: str | None = Field(default=None, description="Runtime image; default: the operator's runtime image.")
    resources: dict[str, Any] | None = Field(
        default=None,
        description="Container resources (requests, limits), replacing the default as a whole; default: requests "
        "cpu 100m, memory 256Mi; limits memory 1Gi.",
    )
    pod_security_context: dict[str, Any] | None = Field(
        default=None,
        description="Pod securityContext fields, merged over the defaults (non-root uid 10001, fsGroup 10001, "
        "seccomp RuntimeDefault).",
    )
    security_context: dict[str, Any] | None = Field(
        default=None,
        description="Container securityContext fields, merged over the defaults (no privilege escalation, all "
        "capabilities dropped, read-only root filesystem).",
    )
    env: list[dict[str, Any]] = Field(default_factory=list, description="Extra container environment variables.")
    service_account_name: str | None = Field(
        default=None,
        description="Must be the Agent's own name if set: the runtime always runs as the ServiceAccount named like the "
        "Agent, so that the admission policy can tell the runtime from users.",
    )


class SqliteStateSpec(SpecModel):
    size: str = Field(
        default="1Gi",
        pattern=QUANTITY_PATTERN,
        description="Storage the claim requests; it can grow (if its StorageClass allows expansion), never shrink.",
    )
    storage_class_name: str | None = Field(
        default=None,
        min_length=1,
        description="StorageClass of the claim; default: the cluster's default StorageClass. A claim's class never "
        "changes.",
    )
    delete_claim_with_agent: bool = Field(
        default=False,
        description="Delete the claim, and the state on it, with the Agent; default: keep it for an Agent of the "
        "same name.",
    )


class DatabaseUrlSecretRef(SpecModel):
    name: str = Field(min_length=1, description="Name of a Secret in the Agent's namespace.")
    key: str = Field(default="url", min_length=1, description="Key of that Secret holding the database URL.")


class PostgresStateSpec(SpecModel):
    url_secret_ref: DatabaseUrlSecretRef = Field(
        description="Secret key with the database URL, e.g. postgresql+asyncpg://user:password@host:5432/db; given "
        "to the runtime as the environment variable GATEHOUSE_DATABASE_URL, never written into its config."
    )


class StateSpec(SpecModel):
    """Where the runtime keeps tasks, sessions and pending approvals: one of the three, sqlite when none is set."""

    sqlite: SqliteStateSpec | None = Field(
        default=None,
        description="A sqlite file on the PersistentVolumeClaim '<agent>-state' (the default): one replica, "
        "rollouts Recreate.",
    )
    postgres: PostgresStateSpec | None = Field(
        default=None, description="A Postgres database: several replicas allowed, rollouts RollingUpdate."
    )
    ephemeral: bool = Field(
        default=False,
        description="A sqlite file in each pod's emptyDir: pending approvals and tasks are lost with the pod "
        "(condition Durable=False).",
    )

    @model_validator(mode="after")
    def _one_kind(self) -> StateSpec:
        if sum((self.sqlite is not None, self.postgres is not None, self.ephemeral)) > 1:
            raise ValueError("choose one kind of state: sqlite, postgres or ephemeral")
        return self

    @property
    def kind(self) -> Literal["sqlite", "postgres", "ephemeral"]:
        if self.postgres is not None:
            return "postgres"
        return "ephemeral" if self.ephemeral else "sqlite"


class AccessSecretRef(SpecModel):
    """A key of a Secret in the Agent's namespace, mounted into the runtime pods as a file (never copied)."""

    name: str = Field(min_length=1, description="Name of a Secret in the Agent's namespace.")
    key: str = Field(min_length=1, description="Key of that Secret.")


class TokenSecretRef(AccessSecretRef):
    key: str = Field(default="tokens", min_length=1, description="Key of that Secret; one 'principal[:groups=a,b]:token' a line.")


class JwksSecretRef(AccessSecretRef):
    key: str = Field(default="jwks.json", min_length=1, description="Key of that Secret holding the JSON Web Key Set.")


class JwtSpec(SpecModel):
    issuer: str = Field(min_length=1, description="The iss every accepted JWT must carry.")
    audience: str = Field(min_length=1, description="The aud every accepted JWT must carry.")
    jwks_secret_ref: JwksSecretRef = Field(description="Secret key with the issuer's signing keys (JWKS).")
    principal_claim: str | None = Field(
        default=None, description="Claim naming the principal, e.g. email; default: '<issuer>#<sub>'."
    )
    groups_claim: str = Field(default="groups", min_length=1, description="Claim listing the principal's groups.")


class IdentitySpec(SpecModel):
    principal: str = Field(min_length=1, description="The one name a person is counted under.")
    aliases: list[str] = Field(
        default_factory=list, description="Other names of the same person (a Kubernetes user, a JWT principal, a token user)."
    )


class DelegatorSpec(SpecModel):
    """A caller trusted to decide on behalf of the human whose request it relays: an Agent of this namespace, or any
    principal."""

    agent: str | None = Field(
        default=None,
        min_length=1,
        description="An Agent of this namespace, i.e. its runtime's ServiceAccount system:serviceaccount:<namespace>:<agent>.",
    )
    principal: str | None = Field(
        default=None, min_length=1, description="A principal as authenticated, e.g. system:serviceaccount:chat:slack-bridge."
    )
    channel: BridgeChannel | None = Field(
        default=None,
        description="The channel this delegator is: slack for the Slack bridge (gatehouse slack). Its ballots are then "
        "shown as decided in Slack; without it, as kubectl.",
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> DelegatorSpec:
        if (self.agent is None) == (self.principal is None):
            raise ValueError(DELEGATOR_MESSAGE)
        return self


class AccessSpec(SpecModel):
    token_secret_ref: TokenSecretRef | None = Field(
        default=None,
        description="Secret with the bearer tokens callers may present; default: the Secret '<agent>-access' the operator "
        "generates once with one token for '<agent>-admin'.",
    )
    jwt: JwtSpec | None = Field(default=None, description="Accept JWTs signed by this issuer as bearer tokens.")
    kubernetes_tokens: bool = Field(
        default=True, description="Accept Kubernetes ServiceAccount tokens, checked with a TokenReview."
    )
    identities: list[IdentitySpec] = Field(
        default_factory=list, description="People known under several names, each counted once as its principal."
    )
    unowned_tasks_owner: str | None = Field(
        default=None, description="Principal who owns tasks created before tasks had owners; default: nobody."
    )
    delegators: list[DelegatorSpec] = Field(
        default_factory=list,
        description="Callers trusted to decide on behalf of the human whose request they relay (a parent Agent, a chat "
        "bridge): their decisions count as that human's, judged against this agent's approvers.",
    )
    max_delegation_depth: int = Field(
        default=3,
        ge=1,
        le=10,
        description="How many agents deep delegation may go: the runtime refuses a request that came through more "
        "agents than this, and this agent's longest chain of Agent tools (A → B → C is 2) may be no longer.",
    )


class AuditorsSpec(SpecModel):
    users: list[str] = Field(default_factory=list, description="Principals (user names) who may read the audit log.")
    groups: list[str] = Field(default_factory=list, description="Groups whose members may read the audit log.")


class AuditSpec(SpecModel):
    auditors: AuditorsSpec = Field(
        default_factory=AuditorsSpec,
        description="Who may read the audit log (GET /audit, gatehouse audit export); none named: nobody, over the API.",
    )
    retention: str = Field(
        default="90d", description="How long audit events and votes are kept, e.g. 30d, 365d; older ones are deleted."
    )


class AgentSpec(SpecModel):
    description: str = Field(default="", description="What the agent does (also its A2A card description).")
    system_message: str = Field(default="", description="Instruction given to the model.")
    model_config_ref: str = Field(
        alias="modelConfig", min_length=1, description="Name of a ModelConfig in the Agent's namespace."
    )
    tools: list[ToolSpec] = Field(default_factory=list, description="Tool sources offered to the model.")
    approval: ApprovalSpec = Field(
        default_factory=ApprovalSpec, description="Which tool calls wait for a human, and who decides."
    )
    human_tools: HumanToolsSpec = Field(default_factory=HumanToolsSpec, description="Built-in tools for asking the human.")
    a2a_config: A2AConfigSpec = Field(default_factory=A2AConfigSpec, alias="a2aConfig", description="The A2A agent card.")
    deployment: DeploymentSpec = Field(default_factory=DeploymentSpec, description="How the operator runs the runtime.")
    state: StateSpec = Field(
        default_factory=StateSpec,
        description="Where the agent keeps tasks, sessions and pending approvals; default: sqlite on a "
        "PersistentVolumeClaim.",
    )
    access: AccessSpec = Field(default_factory=AccessSpec, description="Who may call the agent at all, and who is who.")
    audit: AuditSpec = Field(
        default_factory=AuditSpec, description="The audit log of approvals: who may read it, and how long it is kept."
    )


class Agent(Resource):
    kind: Literal["Agent"] = "Agent"
    spec: AgentSpec
