"""Translate ``Agent`` (+ its ``ModelConfig`` and ``RemoteMCPServer``s) into an :class:`AgentConfig`.

A pure function: no I/O, no clock, no environment. The operator calls it on every reconcile and the
runtime calls it for ``serve -f manifest.yaml``. Every problem is collected with the field path of the
resource it concerns, so one run reports all of them.

Secrets the runtime reads as files (``spec.access``: bearer tokens, the JWT issuer's keys) are mounted by the
operator under :data:`ACCESS_DIR`; the paths are defined here, once, and the AgentConfig carries only the paths.
:func:`access_files` says which Secret key goes to which file. The Postgres URL of ``spec.state.postgres`` never
enters the AgentConfig either: :func:`database_env` names the Secret key the operator hands to the runtime as
:data:`DATABASE_URL_ENV` (read by ``gatehouse-runtime serve --database-url``).

Agent tools (``spec.tools[].agent``) become ``AgentConfig.sub_agents``; with the Agents of the namespace given
(``translate(..., agents=...)``) their chains are checked for cycles and depth. :func:`agent_url` is the one formula
for an Agent's card URL, used here for a sub-agent and by the operator for the Agent's own ``--public-url``.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass

from agent_runtime.contract import agent_config as ac
from agent_runtime.contract import redaction, wire
from agent_runtime.contract.durations import parse_duration
from agent_runtime.contract.errors import Problem, TranslationError
from agent_runtime.contract.globs import glob_to_regex
from agent_runtime.contract.resources import Agent, MCPGateway, ModelConfig, RemoteMCPServer
from agent_runtime.contract.resources.agent import (
    PUBLIC_URL_PATTERN,
    AccessSpec,
    AgentTool,
    ApprovalSpec,
    ApproversSpec,
    AuditSpec,
    DelegatorSpec,
    RedactSpec,
)

# Where the operator mounts the access Secrets in the runtime's pod (read-only), and the file names there.
ACCESS_DIR = "/var/run/gatehouse/access"
TOKEN_FILE = posixpath.join(ACCESS_DIR, "tokens")
JWKS_FILE = posixpath.join(ACCESS_DIR, "jwks.json")
GENERATED_TOKEN_KEY = "tokens"  # the key of the token Secret the operator generates
# The environment variable ``gatehouse-runtime serve --database-url`` falls back to (agent_runtime/clients/cli.py).
DATABASE_URL_ENV = "GATEHOUSE_DATABASE_URL"
# The port every runtime pod serves on (the operator's Deployment and Service), part of an Agent's in-cluster URL.
RUNTIME_PORT = 8080
# Where the kubelet mounts a pod's ServiceAccount token for the API server (automountServiceAccountToken): the
# runtime's own credential towards the API. It is never sent to another agent: whoever received it could act as this
# runtime on the API server.
SERVICE_ACCOUNT_TOKEN_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/token"
# An Agent calls the Agents of its namespace it uses as tools with a token of its ServiceAccount made for them alone:
# projected by the kubelet with this audience and a short expiry (refreshed before it ends), so they know it as
# system:serviceaccount:<namespace>:<agent>, and the API server, which accepts only its own audiences, refuses it.
# Runtimes accept Kubernetes tokens only for this audience (a TokenReview with audiences).
AGENT_TOKEN_AUDIENCE = "gatehouse.dev/a2a"
AGENT_TOKEN_DIR = "/var/run/secrets/gatehouse.dev/a2a"
AGENT_TOKEN_FILE = posixpath.join(AGENT_TOKEN_DIR, "token")
AGENT_TOKEN_SECONDS = 600  # the shortest expiry the API server issues; the kubelet renews at 80 % of it
DEFAULT_SUB_AGENT_DESCRIPTION = "Ask the agent {name} to do something: send it a request in plain words and get its answer."


def agent_url(name: str, namespace: str, public_url: str | None = None) -> str:
    """Where an Agent's runtime serves its card: ``spec.a2aConfig.publicUrl`` when given, else its Service's in-cluster
    address. The one formula for both the URL the card announces (the operator's ``--public-url``) and the URL an
    Agent that uses it as a tool calls."""
    return public_url or f"http://{name}.{namespace}.svc.cluster.local:{RUNTIME_PORT}/"


def service_account_principal(namespace: str, agent_name: str) -> str:
    """The principal an Agent's runtime is known as where it presents its ServiceAccount token (checked with a
    TokenReview): the runtime always runs as the ServiceAccount named like the Agent."""
    return f"system:serviceaccount:{namespace}:{agent_name}"


def generated_access_secret(agent_name: str) -> str:
    """The Secret the operator generates for an Agent that names no ``spec.access.tokenSecretRef``."""
    return f"{agent_name}-access"


@dataclass(frozen=True)
class SecretFile:
    """One Secret key the runtime reads as the file ``path``; ``field`` names where the Agent asks for it."""

    secret: str
    key: str
    path: str
    field: str

    @property
    def file_name(self) -> str:
        """``path`` relative to :data:`ACCESS_DIR` (the item's path in the mounted volume)."""
        return posixpath.relpath(self.path, ACCESS_DIR)


def access_files(agent: Agent | MCPGateway) -> list[SecretFile]:
    """The Secret keys mounted under :data:`ACCESS_DIR` for ``agent`` in a cluster, in a stable order: the token
    Secret (``spec.access.tokenSecretRef``, else the generated ``<agent>-access``), then the JWKS when ``jwt`` is set."""
    access = agent.spec.access
    ref = access.token_secret_ref
    if ref is not None:
        files = [SecretFile(ref.name, ref.key, TOKEN_FILE, "spec.access.tokenSecretRef")]
    else:
        name = generated_access_secret(agent.name)
        files = [SecretFile(name, GENERATED_TOKEN_KEY, TOKEN_FILE, f"generated Secret {name!r}")]
    if access.jwt is not None:
        jwks = access.jwt.jwks_secret_ref
        files.append(SecretFile(jwks.name, jwks.key, JWKS_FILE, "spec.access.jwt.jwksSecretRef"))
    return files


def database_env(agent: Agent | MCPGateway) -> ac.SecretEnvRef | None:
    """The database URL the runtime reads from a Secret (``spec.state.postgres.urlSecretRef``); ``None`` for sqlite."""
    postgres = agent.spec.state.postgres
    if postgres is None:
        return None
    ref = postgres.url_secret_ref
    return ac.SecretEnvRef(env=DATABASE_URL_ENV, secret=ref.name, key=ref.key)


def env_name(*parts: str) -> str:
    """A stable environment variable name for a secret reference, e.g. GATEHOUSE_MCP_FILES_AUTHORIZATION."""
    return "_".join(re.sub(r"[^A-Za-z0-9]+", "_", p).strip("_").upper() for p in ("GATEHOUSE", *parts))


def _check_regex(pattern: str, path: str, problems: list[Problem]) -> None:
    try:
        re.compile(pattern)
    except re.error as exc:
        problems.append(Problem(path, f"invalid regex {pattern!r}: {exc}"))


def _duration(value: str, path: str, problems: list[Problem]) -> float:
    try:
        return parse_duration(value)
    except ValueError as exc:
        problems.append(Problem(path, str(exc)))
        return 0.0


def _model(agent: Agent, model_configs: Mapping[str, ModelConfig], problems: list[Problem]) -> ac.ModelSettings | None:
    ref = agent.spec.model_config_ref
    found = model_configs.get(ref)
    if found is None:
        problems.append(
            Problem("spec.modelConfig", f"ModelConfig {ref!r} not found in namespace {agent.namespace!r}")
        )
        return None
    spec = found.spec
    where = f"ModelConfig {ref!r} spec"
    if spec.provider == "Scripted":
        if spec.api_key_secret:
            problems.append(Problem(f"{where}.apiKeySecret", "the Scripted provider takes no API key"))
        rules = []
        for i, rule in enumerate(spec.scripted.rules if spec.scripted else []):
            _check_regex(rule.match, f"{where}.scripted.rules[{i}].match", problems)
            calls = [ac.ScriptedToolCall(name=c.name, args=c.args) for c in rule.tool_calls]
            then = [ac.ScriptedToolCall(name=c.name, args=c.args) for c in rule.then]
            rules.append(ac.ScriptedRule(match=rule.match, tool_calls=calls, then=then, reply=rule.reply))
        no_match = spec.scripted.no_match_reply if spec.scripted else None
        return ac.ScriptedModel(model=spec.model, rules=rules, no_match_reply=no_match)
    if spec.scripted is not None:
        problems.append(Problem(f"{where}.scripted", f"only the Scripted provider takes a scripted block, not {spec.provider}"))
    api_key = None
    if spec.api_key_secret and not spec.api_key_secret_key:
        problems.append(Problem(f"{where}.apiKeySecretKey", "required when apiKeySecret is set"))
    elif spec.api_key_secret_key and not spec.api_key_secret:
        problems.append(Problem(f"{where}.apiKeySecret", "required when apiKeySecretKey is set"))
    elif spec.api_key_secret and spec.api_key_secret_key:
        api_key = ac.SecretEnvRef(env=ac.MODEL_API_KEY_ENV, secret=spec.api_key_secret, key=spec.api_key_secret_key)
    if spec.provider == "Gemini":
        return ac.GeminiModel(model=spec.model, api_key=api_key, base_url=spec.base_url)
    return ac.LiteLLMModel(provider=spec.provider, model=spec.model, api_key=api_key, base_url=spec.base_url)


def _servers(
    agent: Agent, mcp_servers: Mapping[str, RemoteMCPServer], problems: list[Problem]
) -> list[ac.McpServerConfig]:
    out: list[ac.McpServerConfig] = []
    offered_by: dict[str, str] = {}
    seen: set[str] = set()
    for i, tool in enumerate(agent.spec.tools):
        ref = tool.mcp_server
        if ref is None:
            continue  # an Agent tool (_sub_agents)
        path = f"spec.tools[{i}].mcpServer"
        if ref.name in seen:
            problems.append(Problem(f"{path}.name", f"RemoteMCPServer {ref.name!r} is listed more than once"))
            continue
        seen.add(ref.name)
        for j, name in enumerate(ref.tool_names):
            if name in wire.HITL_TOOL_ALIASES and agent.spec.human_tools.hitl_request:
                problems.append(Problem(f"{path}.toolNames[{j}]", f"{name!r} is reserved for the built-in human tool"))
            elif name in offered_by:
                problems.append(
                    Problem(f"{path}.toolNames[{j}]", f"tool {name!r} is also offered by server {offered_by[name]!r}")
                )
            else:
                offered_by[name] = ref.name
        for j, name in enumerate(ref.require_approval):
            if name not in ref.tool_names:
                problems.append(
                    Problem(
                        f"{path}.requireApproval[{j}]",
                        f"{name!r} is not in toolNames of server {ref.name!r} ({', '.join(ref.tool_names)})",
                    )
                )
        found = _server(ref.name, ref.tool_names, ref.require_approval, f"{path}.name", agent.namespace, mcp_servers,
                        problems)
        if found is not None:
            out.append(found)
    return out


def _server(
    name: str, tool_names: list[str], require_approval: list[str], path: str, namespace: str,
    mcp_servers: Mapping[str, RemoteMCPServer], problems: list[Problem],
) -> ac.McpServerConfig | None:
    """The RemoteMCPServer ``name`` as an Agent's tool server or a gateway's upstream; ``path`` names the reference."""
    server = mcp_servers.get(name)
    if server is None:
        problems.append(Problem(path, f"RemoteMCPServer {name!r} not found in namespace {namespace!r}"))
        return None
    where = f"RemoteMCPServer {name!r} spec"
    if not re.match(r"^https?://", server.spec.url):
        problems.append(Problem(f"{where}.url", f"must be an http:// or https:// URL, got {server.spec.url!r}"))
    timeout = _duration(server.spec.timeout, f"{where}.timeout", problems)
    headers = [
        ac.HeaderRef(
            name=h.name,
            value_from=ac.SecretEnvRef(env=env_name("MCP", name, h.name), secret=h.secret_key_ref.name, key=h.secret_key_ref.key),
        )
        for h in server.spec.headers_from
    ]
    return ac.McpServerConfig(
        name=name,
        url=server.spec.url,
        protocol=server.spec.protocol,
        timeout_seconds=timeout,
        tool_names=list(tool_names),
        require_approval=list(require_approval),
        headers=headers,
    )


def _agent_tools(agent: Agent) -> list[tuple[int, AgentTool]]:
    """``spec.tools[i].agent`` of every tool of type Agent, with its index."""
    return [(i, t.agent) for i, t in enumerate(agent.spec.tools) if t.agent is not None]


def _local_children(agent: Agent) -> list[str]:
    """The Agents of its namespace ``agent`` uses as tools (its Agent tools without cardUrl), in order."""
    return [tool.name for _, tool in _agent_tools(agent) if tool.card_url is None]


def _cycle_from(root: Agent, child: str, graph: Mapping[str, Agent]) -> list[str] | None:
    """The first cycle reachable from ``root`` through its tool ``child`` (depth first, tools in order), as the chain of
    Agent names from ``root`` up to the Agent met twice; ``None`` if there is none. Agents not in ``graph`` end a chain."""
    stack = [root.name]
    on_stack = {root.name}
    done: set[str] = set()

    def visit(name: str) -> list[str] | None:
        if name in on_stack:
            return [*stack, name]
        if name in done or name not in graph:
            return None
        stack.append(name)
        on_stack.add(name)
        for nxt in _local_children(graph[name]):
            found = visit(nxt)
            if found is not None:
                return found
        stack.pop()
        on_stack.discard(name)
        done.add(name)
        return None

    return visit(child)


def _longest_chain(name: str, graph: Mapping[str, Agent], memo: dict[str, list[str]]) -> list[str]:
    """The longest chain of Agent tools starting at the Agent ``name``, itself first (a remote agent ends a chain as its
    card URL, an Agent not in ``graph`` as its name). Called only where no cycle is reachable from ``name``."""
    if name in memo:
        return memo[name]
    best = [name]
    found = graph.get(name)
    for _, tool in _agent_tools(found) if found is not None else []:
        tail = _longest_chain(tool.name, graph, memo) if tool.card_url is None else [tool.card_url]
        if 1 + len(tail) > len(best):
            best = [name, *tail]
    memo[name] = best
    return best


def _sub_agents(
    agent: Agent,
    agents: Mapping[str, Agent] | None,
    in_cluster: bool,
    mcp_tool_names: Mapping[str, str],
    problems: list[Problem],
) -> list[ac.SubAgentConfig]:
    """``spec.tools[].agent``: each another agent offered to the model as one tool.

    ``agents``: the Agents of the namespace by name (``None``: unknown). Known, an Agent tool must name one of them, and
    no chain of Agent tools may come back to an Agent already on it (a cycle) or be longer than
    ``spec.access.maxDelegationDepth``. Unknown, an Agent tool is translated with the in-cluster URL and a generic
    description, and only what this Agent says itself is checked (it does not name itself; one hop is within any depth).
    """
    graph: Mapping[str, Agent] = agents or {}  # this Agent's own entry is never read: its tools are those given
    known = agents is not None
    depth_limit = agent.spec.access.max_delegation_depth
    out: list[ac.SubAgentConfig] = []
    first: dict[str, int] = {}
    envs: dict[str, int] = {}
    memo: dict[str, list[str]] = {}
    for i, tool in _agent_tools(agent):
        path = f"spec.tools[{i}].agent"
        name = tool.name
        if name in wire.HITL_TOOL_ALIASES and agent.spec.human_tools.hitl_request:
            problems.append(Problem(f"{path}.name", f"{name!r} is reserved for the built-in human tool"))
            continue
        if name in mcp_tool_names:
            problems.append(Problem(f"{path}.name", f"tool {name!r} is also offered by server {mcp_tool_names[name]!r}"))
            continue
        if name in first:
            problems.append(Problem(f"{path}.name", f"tool {name!r} is also the Agent tool spec.tools[{first[name]}]"))
            continue
        first[name] = i
        timeout = _duration(tool.timeout, f"{path}.timeout", problems)
        description = tool.description
        if tool.card_url is not None:
            if not re.match(PUBLIC_URL_PATTERN, tool.card_url):  # the CRD's pattern
                problems.append(Problem(f"{path}.cardUrl", f"must be an absolute http:// or https:// URL, got {tool.card_url!r}"))
            token = None
            ref = tool.credentials_secret_ref
            if ref is not None:
                token = ac.SecretEnvRef(env=env_name("AGENT", name, "TOKEN"), secret=ref.name, key=ref.key)
                if token.env in envs:
                    problems.append(
                        Problem(
                            f"{path}.credentialsSecretRef",
                            f"its environment variable {token.env} is also that of spec.tools[{envs[token.env]}]; "
                            "rename one of the tools",
                        )
                    )
                envs.setdefault(token.env, i)
            out.append(
                ac.SubAgentConfig(
                    name=name,
                    agent=tool.card_url,
                    card_url=tool.card_url,
                    description=description or DEFAULT_SUB_AGENT_DESCRIPTION.format(name=name),
                    token=token,
                    timeout_seconds=timeout or 300.0,
                )
            )
            continue
        if tool.credentials_secret_ref is not None:
            problems.append(
                Problem(
                    f"{path}.credentialsSecretRef",
                    "only a remote agent (cardUrl) takes credentials: an Agent of this namespace is called with this "
                    "Agent's ServiceAccount token",
                )
            )
        if name == agent.name:
            problems.append(Problem(f"{path}.name", "names this Agent itself: an Agent cannot be its own tool"))
            continue
        child = graph.get(name)
        if child is None and known:
            problems.append(Problem(f"{path}.name", f"Agent {name!r} not found in namespace {agent.namespace!r}"))
        elif child is not None and in_cluster and not child.spec.access.kubernetes_tokens:
            problems.append(
                Problem(
                    f"{path}.name",
                    f"Agent {name!r} does not accept Kubernetes ServiceAccount tokens (its spec.access.kubernetesTokens "
                    "is false), so this Agent could not authenticate to it",
                )
            )
        cycle = _cycle_from(agent, name, graph)
        if cycle is not None:
            where = "form a cycle" if cycle[-1] == agent.name else "lead into a cycle"
            problems.append(
                Problem(f"{path}.name", f"the Agent tools {where}: {' → '.join(cycle)}; a request would go round it for ever")
            )
        else:
            chain = [agent.name, *_longest_chain(name, graph, memo)]
            if len(chain) - 1 > depth_limit:
                problems.append(
                    Problem(
                        f"{path}.name",
                        f"the chain of Agent tools {' → '.join(chain)} is {len(chain) - 1} agents deep, more than "
                        f"spec.access.maxDelegationDepth ({depth_limit})",
                    )
                )
        out.append(
            ac.SubAgentConfig(
                name=name,
                agent=f"{agent.namespace}/{name}",
                card_url=agent_url(name, agent.namespace, child.spec.a2a_config.public_url if child else None),
                description=description or (child.spec.description if child else "")
                or DEFAULT_SUB_AGENT_DESCRIPTION.format(name=name),
                token_file=AGENT_TOKEN_FILE if in_cluster else None,
                timeout_seconds=timeout or 300.0,
            )
        )
    return out


def _policy(agent: Agent, problems: list[Problem]) -> ac.ApprovalPolicy:
    known = {name for t in agent.spec.tools if t.mcp_server is not None for name in t.mcp_server.tool_names}
    known.update(tool.name for _, tool in _agent_tools(agent))  # the parent may gate a delegation itself
    if agent.spec.human_tools.hitl_request:
        known.update(wire.HITL_TOOL_ALIASES)
    return _approval_policy(agent.spec.approval, known, problems)


def _approval_policy(spec: ApprovalSpec, known: set[str] | None, problems: list[Problem]) -> ac.ApprovalPolicy:
    """``spec.approval`` of an Agent or an MCPGateway, the same fields read the same way; ``known``: the tools a rule,
    an exemption or an approvers entry may name (``None``: any, for a gateway that offers every upstream tool, whose
    names are known only when the upstream answers)."""
    for i, name in enumerate(spec.exempt):
        if known is not None and name not in known:
            problems.append(Problem(f"spec.approval.exempt[{i}]", f"unknown tool {name!r}; known tools: {sorted(known)}"))
    default_approvers = _approvers(spec.approvers, "spec.approval.approvers", problems)
    rules = []
    for i, rule in enumerate(spec.rules):
        path = f"spec.approval.rules[{i}]"
        if known is not None and rule.tool not in known:
            problems.append(Problem(f"{path}.tool", f"unknown tool {rule.tool!r}; known tools: {sorted(known)}"))
        when = rule.when
        if when is not None and when.regex is not None:
            _check_regex(when.regex, f"{path}.when.regex", problems)
        if when is not None and when.glob is not None:
            glob_to_regex(when.glob)  # always compiles; kept here so a future syntax error surfaces at translation
        if rule.approvers is not None and rule.action != "require":
            problems.append(
                Problem(
                    f"{path}.approvers",
                    f"approvers apply only to action require; this rule's action {rule.action!r} never waits for a decision",
                )
            )
        if rule.allow_edit and rule.action != "require":
            problems.append(
                Problem(
                    f"{path}.allowEdit",
                    f"allowEdit applies only to action require; this rule's action {rule.action!r} never waits for a decision",
                )
            )
        rules.append(
            ac.RuleConfig(
                tool=rule.tool,
                action=rule.action,
                arg=when.arg if when else None,
                glob=when.glob if when else None,
                regex=when.regex if when else None,
                approvers=_approvers(rule.approvers, f"{path}.approvers", problems),
                allow_edit=rule.allow_edit,
            )
        )
    tool_approvers: dict[str, ac.ApproversConfig] = {}
    first: dict[str, int] = {}
    for i, entry in enumerate(spec.tool_approvers):
        path = f"spec.approval.toolApprovers[{i}]"
        if known is not None and entry.tool not in known:
            problems.append(Problem(f"{path}.tool", f"unknown tool {entry.tool!r}; known tools: {sorted(known)}"))
        approvers = _approvers(entry.approvers, f"{path}.approvers", problems)
        if entry.tool in first:
            problems.append(
                Problem(
                    f"{path}.tool",
                    f"tool {entry.tool!r} is already named in spec.approval.toolApprovers[{first[entry.tool]}]; "
                    "give each tool one approvers block",
                )
            )
            continue
        first[entry.tool] = i
        if approvers is not None:
            tool_approvers[entry.tool] = approvers
    for i, name in enumerate(spec.editable_tools):
        if known is not None and name not in known:
            problems.append(Problem(f"spec.approval.editableTools[{i}]", f"unknown tool {name!r}; known tools: {sorted(known)}"))
    timeout = _duration(spec.timeout, "spec.approval.timeout", problems)
    grant_ttl = _duration(spec.grant_ttl, "spec.approval.grantTTL", problems)
    return ac.ApprovalPolicy(
        require_for_all_tools=spec.require_for_all_tools,
        exempt=list(spec.exempt),
        rules=rules,
        timeout_seconds=timeout,
        on_timeout=spec.on_timeout,
        allow_session_grants=spec.allow_session_grants,
        approvers=default_approvers,
        tool_approvers=tool_approvers,
        grant_ttl_seconds=grant_ttl,
        redact=_redact(spec.redact, problems),
        editable_tools=list(spec.editable_tools),
    )


def _redact(spec: RedactSpec, problems: list[Problem]) -> ac.RedactConfig:
    """``spec.approval.redact``; a path that cannot be read or a pattern that does not compile is named with its path
    (and left out: the translation fails anyway)."""
    paths, patterns = [], []
    for i, path in enumerate(spec.paths):
        try:
            redaction.parse_path(path)
            paths.append(path)
        except ValueError as exc:
            problems.append(Problem(f"spec.approval.redact.paths[{i}]", str(exc)))
    for i, pattern in enumerate(spec.patterns):
        before = len(problems)
        _check_regex(pattern, f"spec.approval.redact.patterns[{i}]", problems)
        if len(problems) == before:
            patterns.append(pattern)
    return ac.RedactConfig(paths=list(dict.fromkeys(paths)), patterns=list(dict.fromkeys(patterns)), builtins=spec.builtins)


def _approvers(spec: ApproversSpec | None, path: str, problems: list[Problem]) -> ac.ApproversConfig | None:
    """One approvers block; refused when nobody could ever approve under it."""
    if spec is None:
        return None
    users, groups = list(dict.fromkeys(spec.users)), list(dict.fromkeys(spec.groups))
    if not users and not groups and not spec.any_authenticated:
        problems.append(
            Problem(path, "lists neither users nor groups: nobody could approve; name at least one user or group, "
                          "or set anyAuthenticated: true")
        )
    elif not groups and not spec.any_authenticated and spec.required > len(users):
        problems.append(
            Problem(
                f"{path}.required",
                f"{spec.required} approvals are required but only {len(users)} user(s) are listed and no groups: "
                "no call could ever be approved; lower required, or add users or groups",
            )
        )
    return ac.ApproversConfig(users=users, groups=groups, required=spec.required, allow_requester=spec.allow_requester,
                              any_authenticated=spec.any_authenticated)


def _access(agent: Agent, in_cluster: bool, problems: list[Problem]) -> ac.AccessConfig:
    return _access_config(agent.spec.access, agent.namespace, in_cluster, problems)


def _access_config(access: AccessSpec, namespace: str, in_cluster: bool, problems: list[Problem]) -> ac.AccessConfig:
    """``spec.access`` of an Agent or an MCPGateway."""
    principals: dict[str, int] = {}
    for i, identity in enumerate(access.identities):
        if identity.principal in principals:
            problems.append(
                Problem(
                    f"spec.access.identities[{i}].principal",
                    f"{identity.principal!r} is already listed at spec.access.identities[{principals[identity.principal]}]",
                )
            )
        else:
            principals[identity.principal] = i
    alias_of: dict[str, tuple[str, str]] = {}  # alias -> (its principal, where it was given)
    for i, identity in enumerate(access.identities):
        for j, alias in enumerate(identity.aliases):
            path = f"spec.access.identities[{i}].aliases[{j}]"
            if alias == identity.principal:
                continue
            if alias in principals:
                problems.append(
                    Problem(
                        path,
                        f"{alias!r} is the principal of spec.access.identities[{principals[alias]}]: a name must resolve to "
                        "one principal",
                    )
                )
            elif alias in alias_of and alias_of[alias][0] != identity.principal:
                other, where = alias_of[alias]
                problems.append(
                    Problem(
                        path,
                        f"alias {alias!r} is also given to principal {other!r} ({where}): a name must resolve to one principal",
                    )
                )
            else:
                alias_of.setdefault(alias, (identity.principal, path))
    jwt = None
    if access.jwt is not None:
        spec = access.jwt
        jwt = ac.JwtConfig(
            jwks_file=JWKS_FILE,
            issuer=spec.issuer,
            audience=spec.audience,
            principal_claim=spec.principal_claim,
            groups_claim=spec.groups_claim,
        )
    return ac.AccessConfig(
        token_file=TOKEN_FILE if access.token_secret_ref is not None or in_cluster else None,
        jwt=jwt,
        kubernetes_tokens=access.kubernetes_tokens,
        identities=[
            ac.IdentityConfig(principal=i.principal, aliases=list(dict.fromkeys(i.aliases))) for i in access.identities
        ],
        unowned_tasks_owner=access.unowned_tasks_owner,
        delegators=list(dict.fromkeys(_delegator(namespace, d) for d in access.delegators)),
        bridges={_delegator(namespace, d): d.channel for d in access.delegators if d.channel is not None},
        max_delegation_depth=access.max_delegation_depth,
    )


def _delegator(namespace: str, delegator: DelegatorSpec) -> str:
    """The principal a delegator entry names (an Agent: its runtime's ServiceAccount)."""
    if delegator.agent is not None:
        return service_account_principal(namespace, delegator.agent)
    return str(delegator.principal)


def _audit(spec: AuditSpec, problems: list[Problem]) -> ac.AuditConfig:
    auditors = ac.AuditorsConfig(users=list(dict.fromkeys(spec.auditors.users)), groups=list(dict.fromkeys(spec.auditors.groups)))
    return ac.AuditConfig(auditors=auditors, retention_seconds=_duration(spec.retention, "spec.audit.retention", problems))


def translate(
    agent: Agent,
    model_configs: Mapping[str, ModelConfig],
    mcp_servers: Mapping[str, RemoteMCPServer],
    *,
    in_cluster: bool = False,
    agents: Mapping[str, Agent] | None = None,
) -> ac.AgentConfig:
    """Build the AgentConfig for ``agent``; raise :class:`TranslationError` listing every problem.

    ``in_cluster``: the config is for the pods the operator runs, which always have a token file at
    :data:`TOKEN_FILE` (the Agent's ``tokenSecretRef``, else the Secret the operator generates), and their
    ServiceAccount token for Agents at :data:`AGENT_TOKEN_FILE`, which they present to the Agents they use as tools.
    Without it (``serve -f``, ``gatehouse render``) ``access.token_file`` is set only when the Agent names a token
    Secret, and an Agent tool gets no token file.

    ``agents``: the Agents of ``agent``'s namespace by name (``agent`` itself may be among them; the one given wins).
    With them an Agent tool must name one of them, takes its ``publicUrl`` and ``description``, and the chains of
    Agent tools through them are checked for cycles and against ``spec.access.maxDelegationDepth``. ``None`` (not
    known, e.g. ``serve -f`` with this Agent's manifest alone): an Agent tool is translated with the in-cluster URL
    (:func:`agent_url`) and a generic description, and only this Agent's own tools are checked (none may name the
    Agent itself); an Agent missing from a given mapping likewise ends a chain.
    """
    problems: list[Problem] = []
    model = _model(agent, model_configs, problems)
    servers = _servers(agent, mcp_servers, problems)
    mcp_tool_names: dict[str, str] = {}
    for tool in agent.spec.tools:
        if tool.mcp_server is not None:
            for name in tool.mcp_server.tool_names:
                mcp_tool_names.setdefault(name, tool.mcp_server.name)
    sub_agents = _sub_agents(agent, agents, in_cluster, mcp_tool_names, problems)
    policy = _policy(agent, problems)
    if agent.spec.approval.on_timeout == "ask":  # only a hook's CLI has a person at a terminal to ask
        problems.append(Problem("spec.approval.onTimeout", "ask hands the decision to the person at a CLI's terminal: "
                                "only an MCPGateway's hooks can ask; use deny or approve"))
    access = _access(agent, in_cluster, problems)
    audit = _audit(agent.spec.audit, problems)
    if problems or model is None:
        raise TranslationError(problems)
    spec = agent.spec
    card = ac.CardConfig(
        name=agent.name,
        description=spec.description,
        skills=[ac.SkillConfig(**s.model_dump()) for s in spec.a2a_config.skills],
    )
    return ac.AgentConfig(
        name=agent.name,
        namespace=agent.namespace,
        description=spec.description,
        instruction=spec.system_message,
        model=model,
        mcp_servers=servers,
        sub_agents=sub_agents,
        approval=policy,
        human_tools=ac.HumanTools(hitl_request=spec.human_tools.hitl_request),
        access=access,
        audit=audit,
        card=card,
    )


def translate_gateway(
    gateway: MCPGateway, mcp_servers: Mapping[str, RemoteMCPServer], *, in_cluster: bool = False
) -> ac.GatewayConfig:
    """Build the GatewayConfig for ``gateway``; raise :class:`TranslationError` listing every problem. Its approval,
    access and audit blocks go through the same functions as an Agent's (``in_cluster`` as for :func:`translate`)."""
    problems: list[Problem] = []
    spec = gateway.spec
    upstream = spec.upstream
    server = None
    if upstream is not None:  # none: a hooks-only gateway, whose policy names the CLI's tools
        for j, name in enumerate(upstream.require_approval):
            if upstream.tool_names and name not in upstream.tool_names:
                problems.append(Problem(f"spec.upstream.requireApproval[{j}]",
                                        f"{name!r} is not in toolNames ({', '.join(upstream.tool_names)})"))
        server = _server(upstream.name, upstream.tool_names, upstream.require_approval, "spec.upstream.name",
                         gateway.namespace, mcp_servers, problems)
    known = set(upstream.tool_names) if upstream is not None and upstream.tool_names else None
    policy = _approval_policy(spec.approval, known, problems)
    access = _access_config(spec.access, gateway.namespace, in_cluster, problems)
    audit = _audit(spec.audit, problems)
    if problems or (upstream is not None and server is None):
        raise TranslationError(problems)
    return ac.GatewayConfig(
        name=gateway.name, namespace=gateway.namespace, description=spec.description, upstream=server,
        approval=policy, access=access, audit=audit,
    )


def referenced_secrets(config: ac.AgentConfig | ac.GatewayConfig) -> set[str]:
    """Names of the Secrets an AgentConfig's environment comes from (the operator reads them by name)."""
    return {ref.secret for ref in secret_env(config)}


def secret_env(config: ac.AgentConfig | ac.GatewayConfig) -> list[ac.SecretEnvRef]:
    """Every environment variable the runtime expects from a Secret, in a stable order."""
    refs = [h.value_from for s in config.mcp_servers for h in s.headers]
    if isinstance(config, ac.GatewayConfig):  # a gateway has its upstream's headers only
        return refs
    refs += [a.token for a in config.sub_agents if a.token is not None]
    api_key = getattr(config.model, "api_key", None)
    if api_key is not None:
        refs.insert(0, api_key)
    return refs
