"""What each Agent depends on: kopf indexes for the custom resources, and the Secrets read by name.

kopf fills every index from its watch streams before any handler runs and keeps it current, event by
event. One of them is a lookup and three are read-only caches the translator reads from (no API call)::

    agent_dependencies    (kind, namespace, name) of a ModelConfig/RemoteMCPServer/Agent -> Agent names
                          (an Agent's dependencies include the Agents of its namespace it uses as tools)
    model_config_cache    (namespace, name) -> the ModelConfig's apiVersion/kind/metadata/spec
    mcp_server_cache      (namespace, name) -> the RemoteMCPServer's apiVersion/kind/metadata/spec
    agent_cache           namespace -> each Agent's apiVersion/kind/metadata/spec (the Agents an Agent uses as tools,
                          and theirs, for the translator's cycle and depth checks)
    gateway_names         (namespace, name) of each MCPGateway -> True (an Agent and an MCPGateway of one name would
                          own the same children: :meth:`Dependencies.name_taken`)
    gateway_upstreams     (namespace, RemoteMCPServer name) -> the MCPGateways naming it as their upstream

The index functions are small and pure, so they are ``async``: kopf runs them inline in its event loop
instead of handing each watch event to a worker thread and back. kopf passes ``namespace=None`` only for
cluster-scoped objects; every kind indexed here is namespaced, so such an object would contribute nothing.

Secrets are neither indexed nor watched: that would take ``list``/``watch`` on every Secret in the cluster,
which RBAC cannot narrow by label. Instead each reconcile reads the Secrets its Agent needs by name
(:class:`ReferencedSecrets`): those of the translated config's environment (a ModelConfig's ``apiKeySecret``, a
RemoteMCPServer's ``headersFrom``) and the access files (``spec.access``, or the generated ``<agent>-access``).
Of each it keeps the ``resourceVersion`` and the key names, never a value: the Problems for a missing Secret or
key come from the key names, ``gatehouse.dev/secrets-hash`` is a digest over (Secret, key, resourceVersion).
A periodic check (:func:`changed_secrets`, run by :mod:`gatehouse_operator.periodic`) reads them again and
reconciles the Agent when a version moved; any other trigger of the Agent re-reads them anyway.

:class:`Dependencies` wraps the indexes a handler receives as keyword arguments and answers "which Agents use
this ModelConfig/RemoteMCPServer/Agent?", "which ModelConfig and RemoteMCPServers does this Agent's translation get?"
and "which Agents of its namespace can this Agent reach through its Agent tools?".
"""

from __future__ import annotations

import copy
import hashlib
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import kopf
from pydantic import ValidationError

from agent_runtime.contract.agent_config import AgentConfig, GatewayConfig
from agent_runtime.contract.errors import Problem, problems_from_validation
from agent_runtime.contract.resources import GROUP, VERSION, Agent, ModelConfig, RemoteMCPServer
from agent_runtime.contract.translator import SecretFile, secret_env
from gatehouse_operator.kube import ChildrenApi

__all__ = ["Dependencies", "DependencyKind", "ReferencedSecrets", "SeenSecret", "changed_secrets", "is_missing"]

DependencyKind = str  # "ModelConfig" | "RemoteMCPServer" | "Agent"


def _plain(body: kopf.Body) -> dict[str, Any]:
    return {
        "apiVersion": body.get("apiVersion"),
        "kind": body.get("kind"),
        "metadata": {"name": body.metadata.name, "namespace": body.metadata.namespace},
        "spec": copy.deepcopy(dict(body.get("spec") or {})),
    }


@kopf.index(GROUP, VERSION, "agents")
async def agent_dependencies(
    namespace: str | None, name: str, spec: kopf.Spec, **_: Any
) -> dict[tuple[str, str, str], str]:
    if namespace is None:
        return {}
    keys = {("ModelConfig", namespace, spec.get("modelConfig") or "")}
    for tool in spec.get("tools") or []:
        keys.add(("RemoteMCPServer", namespace, (tool.get("mcpServer") or {}).get("name") or ""))
        keys.add(("Agent", namespace, _local_agent(tool)))
    return {key: name for key in keys if key[2]}


def _local_agent(tool: Mapping[str, Any]) -> str:
    """The Agent of this namespace a raw ``spec.tools[]`` entry uses as a tool; ``""`` for any other tool."""
    agent = tool.get("agent") or {}
    return "" if agent.get("cardUrl") else str(agent.get("name") or "")


@kopf.index(GROUP, VERSION, "agents")
async def agent_cache(namespace: str | None, body: kopf.Body, **_: Any) -> dict[str, dict[str, Any]]:
    if namespace is None:
        return {}
    return {namespace: _plain(body)}


@kopf.index(GROUP, VERSION, "mcpgateways")
async def gateway_names(namespace: str | None, name: str, **_: Any) -> dict[tuple[str, str], bool]:
    if namespace is None:
        return {}
    return {(namespace, name): True}


@kopf.index(GROUP, VERSION, "mcpgateways")
async def gateway_upstreams(namespace: str | None, name: str, spec: kopf.Spec, **_: Any) -> dict[tuple[str, str], str]:
    upstream = (spec.get("upstream") or {}).get("name")
    if namespace is None or not upstream:  # no upstream: a hooks-only gateway depends on no RemoteMCPServer
        return {}
    return {(namespace, str(upstream)): name}


@kopf.index(GROUP, VERSION, "modelconfigs")
async def model_config_cache(
    namespace: str | None, name: str, body: kopf.Body, **_: Any
) -> dict[tuple[str, str], dict[str, Any]]:
    if namespace is None:
        return {}
    return {(namespace, name): _plain(body)}


@kopf.index(GROUP, VERSION, "remotemcpservers")
async def mcp_server_cache(
    namespace: str | None, name: str, body: kopf.Body, **_: Any
) -> dict[tuple[str, str], dict[str, Any]]:
    if namespace is None:
        return {}
    return {(namespace, name): _plain(body)}


def _one(index: kopf.Index[Any, Any], key: Any) -> Any | None:
    store = index.get(key)
    return next(iter(store), None) if store is not None else None


def _all(index: kopf.Index[Any, Any], key: Any) -> set[Any]:
    store = index.get(key)
    return set(store) if store is not None else set()


@dataclass(frozen=True)
class Dependencies:
    """The indexes above, as a handler receives them (see :meth:`from_kwargs`)."""

    agent_dependencies: kopf.Index[tuple[str, str, str], str]
    model_config_cache: kopf.Index[tuple[str, str], dict[str, Any]]
    mcp_server_cache: kopf.Index[tuple[str, str], dict[str, Any]]
    agent_cache: kopf.Index[str, dict[str, Any]]
    gateway_names: kopf.Index[tuple[str, str], bool]
    gateway_upstreams: kopf.Index[tuple[str, str], str]

    @classmethod
    def from_kwargs(cls, kwargs: Mapping[str, Any]) -> Dependencies:
        return cls(**{name: kwargs[name] for name in cls.__dataclass_fields__})

    def known_agents(self) -> set[tuple[str, str]]:
        """Every Agent (namespace, name) in the index: all there are once kopf has listed them (read in the event
        loop, where kopf updates the index)."""
        return {(namespace, body["metadata"]["name"]) for namespace in list(self.agent_cache)
                for body in self.agent_cache.get(namespace, ())}

    def agents_using(self, kind: DependencyKind, namespace: str, name: str) -> set[str]:
        """Names of the Agents in ``namespace`` that use the ModelConfig, RemoteMCPServer or Agent ``name``."""
        return _all(self.agent_dependencies, (kind, namespace, name))

    def reachable_agents(self, agent: Agent) -> tuple[dict[str, Agent], list[Problem]]:
        """The Agents of ``agent``'s namespace it reaches through its Agent tools, theirs and so on (from the cache),
        by name: what the translator checks for cycles and depth. Nothing else is parsed.

        Missing ones are left out (the translator reports those ``agent`` names itself). One that is invalid is left
        out too, and is a Problem when ``agent`` names it itself (deeper down it is its parent's problem).
        """
        direct = {tool.name for t in agent.spec.tools if (tool := t.agent) is not None and tool.card_url is None}
        if not direct:  # most Agents: no need to look through every Agent of the namespace
            return {}, []
        store = self.agent_cache.get(agent.namespace)
        raw: dict[str, dict[str, Any]] = {}
        for body in store if store is not None else ():
            raw.setdefault(body["metadata"]["name"], body)
        found: dict[str, Agent] = {}
        problems: list[Problem] = []
        todo, seen = sorted(direct), {agent.name}
        while todo:
            name = todo.pop(0)
            if name in seen or name not in raw:
                continue
            seen.add(name)
            try:
                child = Agent.model_validate(raw[name])
            except ValidationError as exc:
                if name in direct:
                    problems += problems_from_validation(exc, prefix=f"Agent {name!r}")
                continue
            found[name] = child
            todo += [tool.name for t in child.spec.tools if (tool := t.agent) is not None and tool.card_url is None]
        return found, problems

    def gateways_using(self, namespace: str, server: str) -> set[str]:
        """The MCPGateways of ``namespace`` whose upstream is the RemoteMCPServer ``server``."""
        return _all(self.gateway_upstreams, (namespace, server))

    def name_taken(self, kind: str, namespace: str, name: str) -> Problem | None:
        """A Problem when the other kind (an Agent for an MCPGateway, and the reverse) has this name in this namespace:
        both would own the same children (``<name>`` Deployment, Service, ServiceAccount, ``<name>-config``...), so
        neither is applied while both exist, and the children already there keep running."""
        if kind == "MCPGateway":
            other = "Agent"
            taken = any(body["metadata"]["name"] == name for body in self.agent_cache.get(namespace, ()))
        else:
            other = "MCPGateway"
            taken = bool(_all(self.gateway_names, (namespace, name)))
        if not taken:
            return None
        return Problem("metadata.name", f"an {other} named {name!r} in namespace {namespace!r} owns the objects of that "
                                        "name (Deployment, Service, ServiceAccount, Secrets): rename one of the two")

    def mcp_servers(self, namespace: str, names: Sequence[str]) -> tuple[dict[str, RemoteMCPServer], list[Problem]]:
        """The RemoteMCPServers of ``names`` in the cache (an MCPGateway's upstream), and any that are invalid; missing
        ones are left out, for the translator to report with their field paths."""
        servers: dict[str, RemoteMCPServer] = {}
        problems: list[Problem] = []
        for name in names:
            raw = _one(self.mcp_server_cache, (namespace, name))
            if raw is not None:
                try:
                    servers[name] = RemoteMCPServer.model_validate(raw)
                except ValidationError as exc:
                    problems += problems_from_validation(exc, prefix=f"RemoteMCPServer {name!r}")
        return servers, problems

    def resolve(
        self, agent: Agent
    ) -> tuple[dict[str, ModelConfig], dict[str, RemoteMCPServer], list[Problem]]:
        """The ModelConfig and RemoteMCPServers the Agent names (from the caches), and any that are invalid.

        Missing ones are left out: the translator reports them with their field paths.
        """
        problems: list[Problem] = []
        models: dict[str, ModelConfig] = {}
        servers: dict[str, RemoteMCPServer] = {}
        ref = agent.spec.model_config_ref
        raw = _one(self.model_config_cache, (agent.namespace, ref))
        if raw is not None:
            try:
                models[ref] = ModelConfig.model_validate(raw)
            except ValidationError as exc:
                problems += problems_from_validation(exc, prefix=f"ModelConfig {ref!r}")
        for tool in agent.spec.tools:
            if tool.mcp_server is None:
                continue  # an Agent tool: reachable_agents
            name = tool.mcp_server.name
            raw = _one(self.mcp_server_cache, (agent.namespace, name))
            if raw is not None:
                try:
                    servers[name] = RemoteMCPServer.model_validate(raw)
                except ValidationError as exc:
                    problems += problems_from_validation(exc, prefix=f"RemoteMCPServer {name!r}")
        return models, servers, problems


@dataclass(frozen=True)
class SeenSecret:
    """What the operator keeps of a Secret it read or wrote: its ``resourceVersion`` and key names, never a value."""

    resource_version: str
    keys: frozenset[str]

    @classmethod
    def of(cls, secret: Mapping[str, Any]) -> SeenSecret:
        version = (secret.get("metadata") or {}).get("resourceVersion") or ""
        return cls(str(version), frozenset(secret.get("data") or {}))


class ReferencedSecrets:
    """The Secrets one reconcile of an Agent needs, each read by name once (a GET), kept as :class:`SeenSecret`.

    :meth:`versions` is what the periodic check compares against. The operator's state keeps the latest one per
    Agent (``OperatorState.referenced_secrets``), filled as the reconcile reads.
    """

    def __init__(self, kube: ChildrenApi, namespace: str) -> None:
        self._kube = kube
        self.namespace = namespace
        self._seen: dict[str, SeenSecret | None] = {}
        self.read_at = time.monotonic()  # when these versions were last known current (read, or checked)

    def get(self, name: str) -> SeenSecret | None:
        """The Secret ``name`` as first read in this reconcile; ``None`` if it does not exist."""
        if name not in self._seen:
            secret = self._kube.get("Secret", self.namespace, name)
            self._seen[name] = SeenSecret.of(secret) if secret is not None else None
        return self._seen[name]

    def saw(self, secret: Mapping[str, Any]) -> None:
        """Record a Secret this reconcile wrote (or read some other way), as the API answered with it."""
        self._seen[secret["metadata"]["name"]] = SeenSecret.of(secret)

    def versions(self) -> dict[str, str | None]:
        """Each Secret read so far -> its resourceVersion (``None``: it did not exist)."""
        return {name: seen.resource_version if seen else None for name, seen in list(self._seen.items())}

    @staticmethod
    def _wanted(config: AgentConfig | GatewayConfig, files: Sequence[SecretFile]) -> list[tuple[str, str, str]]:
        wanted = [(f"env {ref.env}", ref.secret, ref.key) for ref in secret_env(config)]
        return wanted + [(f.field, f.secret, f.key) for f in files]

    def problems(self, config: AgentConfig | GatewayConfig, files: Sequence[SecretFile] = ()) -> list[Problem]:
        """A Problem for every Secret (or Secret key) the runtime needs but that is absent: its environment's, and
        the ``files`` mounted for it."""
        problems = []
        for where, secret, key in self._wanted(config, files):
            found = self.get(secret)
            if found is None:
                problems.append(Problem(where, f"Secret {secret!r} not found in namespace {self.namespace!r}"))
            elif key not in found.keys:
                problems.append(Problem(where, f"Secret {secret!r} has no key {key!r}"))
        return problems

    def hash(self, config: AgentConfig | GatewayConfig, files: Sequence[SecretFile] = ()) -> str:
        """A digest over (Secret, key, resourceVersion) of every referenced key (environment and files): a rotated
        value gives its Secret a new resourceVersion, so the digest changes and the pods roll. No value is read into
        it. ``""`` when the runtime needs no Secret."""
        parts = []
        for _, secret, key in self._wanted(config, files):
            found = self.get(secret)
            parts.append(f"{secret}/{key}@{found.resource_version if found and key in found.keys else ''}")
        return hashlib.sha256("\n".join(parts).encode()).hexdigest() if parts else ""


def changed_secrets(kube: ChildrenApi, namespace: str, versions: Mapping[str, str | None]) -> list[str]:
    """The Secrets among ``versions`` (name -> resourceVersion, ``None`` for absent) whose version is no longer
    the one given: one GET each."""
    changed = []
    for name, version in versions.items():
        secret = kube.get("Secret", namespace, name)
        now = str((secret.get("metadata") or {}).get("resourceVersion") or "") if secret is not None else None
        if now != version:
            changed.append(name)
    return changed


def is_missing(problems: Iterable[Problem]) -> bool:
    """Whether any problem is an absent dependency (as opposed to an invalid spec)."""
    return any(" not found in namespace " in p.message or " has no key " in p.message for p in problems)
