"""What each Agent depends on, kept in memory by kopf indexes, so a change finds its Agents without a scan.

kopf fills every index from its watch streams before any handler runs and keeps it current, event by
event. Four of them are lookups and two are read-only caches the translator reads from (no API call)::

    agent_dependencies    (kind, namespace, name) of a ModelConfig/RemoteMCPServer, or of a Secret the Agent
                          names itself (spec.access: tokenSecretRef, jwt.jwksSecretRef) -> Agent names
    model_config_secrets  (namespace, Secret name) -> ModelConfig names (apiKeySecret)
    mcp_server_secrets    (namespace, Secret name) -> RemoteMCPServer names (headersFrom)
    secret_digests        (namespace, Secret name) -> {key: sha256(value)}   (never the values)
    model_config_cache    (namespace, name) -> the ModelConfig's apiVersion/kind/metadata/spec
    mcp_server_cache      (namespace, name) -> the RemoteMCPServer's apiVersion/kind/metadata/spec

The index functions are small and pure, so they are ``async``: kopf runs them inline in its event loop
instead of handing each watch event to a worker thread and back. kopf passes ``namespace=None`` only for
cluster-scoped objects; every kind indexed here is namespaced, so such an object would contribute nothing.

A Secret change follows Secret -> ModelConfig/RemoteMCPServer -> Agents, or Secret -> Agents for the access
Secrets an Agent names. (The token Secret the operator generates is one of its own children: its changes reach
the Agent through the child-event handler.) :class:`Dependencies` wraps the
indexes a handler receives as keyword arguments and answers the two questions the operator asks: "which
Agents use this object?" and "what does this Agent's translation need, and what is missing?".
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import kopf
from pydantic import ValidationError

from agent_runtime.agent_config import AgentConfig
from agent_runtime.errors import Problem, problems_from_validation
from agent_runtime.resources import GROUP, VERSION, Agent, ModelConfig, RemoteMCPServer
from agent_runtime.translator import SecretFile, secret_env

__all__ = ["Dependencies", "DependencyKind"]

DependencyKind = str  # "ModelConfig" | "RemoteMCPServer" | "Secret"


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
    access = spec.get("access") or {}
    keys.add(("Secret", namespace, (access.get("tokenSecretRef") or {}).get("name") or ""))
    keys.add(("Secret", namespace, ((access.get("jwt") or {}).get("jwksSecretRef") or {}).get("name") or ""))
    return {key: name for key in keys if key[2]}


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


@kopf.index(GROUP, VERSION, "modelconfigs")
async def model_config_secrets(namespace: str | None, name: str, spec: kopf.Spec, **_: Any) -> dict[tuple[str, str], str]:
    secret = spec.get("apiKeySecret")
    return {(namespace, secret): name} if secret and namespace is not None else {}


@kopf.index(GROUP, VERSION, "remotemcpservers")
async def mcp_server_secrets(namespace: str | None, name: str, spec: kopf.Spec, **_: Any) -> dict[tuple[str, str], str]:
    if namespace is None:
        return {}
    refs = [(h.get("secretKeyRef") or {}).get("name") for h in spec.get("headersFrom") or []]
    return {(namespace, ref): name for ref in refs if ref}


@kopf.index("v1", "secrets")
async def secret_digests(
    namespace: str | None, name: str, body: kopf.Body, **_: Any
) -> dict[tuple[str, str], dict[str, str]]:
    if namespace is None:
        return {}
    return {(namespace, name): digests(body.get("data") or {})}


def digests(data: Mapping[str, Any]) -> dict[str, str]:
    """A Secret's ``data`` as ``{key: sha256(value)}`` (what :func:`secret_digests` keeps; never the values)."""
    return {key: hashlib.sha256(str(value).encode()).hexdigest() for key, value in data.items()}


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
    model_config_secrets: kopf.Index[tuple[str, str], str]
    mcp_server_secrets: kopf.Index[tuple[str, str], str]
    secret_digests: kopf.Index[tuple[str, str], dict[str, str]]

    @classmethod
    def from_kwargs(cls, kwargs: Mapping[str, Any]) -> Dependencies:
        return cls(**{name: kwargs[name] for name in cls.__dataclass_fields__})

    def agents_using(self, kind: DependencyKind, namespace: str, name: str) -> set[str]:
        """Names of the Agents in ``namespace`` that (directly or through a ModelConfig/RemoteMCPServer) use it."""
        if kind != "Secret":
            return _all(self.agent_dependencies, (kind, namespace, name))
        agents: set[str] = _all(self.agent_dependencies, (kind, namespace, name))  # spec.access Secrets
        for model in _all(self.model_config_secrets, (namespace, name)):
            agents |= self.agents_using("ModelConfig", namespace, model)
        for server in _all(self.mcp_server_secrets, (namespace, name)):
            agents |= self.agents_using("RemoteMCPServer", namespace, server)
        return agents

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
            name = tool.mcp_server.name
            raw = _one(self.mcp_server_cache, (agent.namespace, name))
            if raw is not None:
                try:
                    servers[name] = RemoteMCPServer.model_validate(raw)
                except ValidationError as exc:
                    problems += problems_from_validation(exc, prefix=f"RemoteMCPServer {name!r}")
        return models, servers, problems

    def secret_digests_of(self, namespace: str, name: str) -> dict[str, str] | None:
        """The digests of one Secret's keys as the index has them; ``None`` if it holds no such Secret."""
        found: dict[str, str] | None = _one(self.secret_digests, (namespace, name))
        return found

    def _digests(self, namespace: str, name: str, live: Mapping[str, Mapping[str, str]]) -> Mapping[str, str] | None:
        return live[name] if name in live else _one(self.secret_digests, (namespace, name))

    def secret_problems(
        self,
        namespace: str,
        config: AgentConfig,
        files: Sequence[SecretFile] = (),
        live: Mapping[str, Mapping[str, str]] | None = None,
    ) -> list[Problem]:
        """A Problem for every Secret (or Secret key) the runtime needs but that is absent: its environment's, and
        the ``files`` mounted for it. ``live``: digests of Secrets just read or written (newer than the index)."""
        wanted = [(f"env {ref.env}", ref.secret, ref.key) for ref in secret_env(config)]
        wanted += [(f.field, f.secret, f.key) for f in files]
        problems = []
        for where, secret, key in wanted:
            found = self._digests(namespace, secret, live or {})
            if found is None:
                problems.append(Problem(where, f"Secret {secret!r} not found in namespace {namespace!r}"))
            elif key not in found:
                problems.append(Problem(where, f"Secret {secret!r} has no key {key!r}"))
        return problems

    def secrets_hash(
        self,
        namespace: str,
        config: AgentConfig,
        files: Sequence[SecretFile] = (),
        live: Mapping[str, Mapping[str, str]] | None = None,
    ) -> str:
        """A digest over the referenced Secret keys' values (environment and files): it changes when a referenced
        value rotates, and so rolls the pods."""
        refs = [(ref.secret, ref.key) for ref in secret_env(config)] + [(f.secret, f.key) for f in files]
        if not refs:
            return ""
        parts = []
        for secret, key in refs:
            found = self._digests(namespace, secret, live or {}) or {}
            parts.append(f"{secret}/{key}={found.get(key, '')}")
        return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def is_missing(problems: Iterable[Problem]) -> bool:
    """Whether any problem is an absent dependency (as opposed to an invalid spec)."""
    return any(" not found in namespace " in p.message or " has no key " in p.message for p in problems)
