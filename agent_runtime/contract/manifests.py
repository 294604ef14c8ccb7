"""Reading Gatehouse manifests (multi-document YAML) into typed resources, with clear errors."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from agent_runtime.contract.agent_config import AgentConfig, GatewayConfig
from agent_runtime.contract.errors import Problem, TranslationError, problems_from_validation
from agent_runtime.contract.resources import API_VERSION, Agent, MCPGateway, ModelConfig, RemoteMCPServer, ToolApproval
from agent_runtime.contract.resources.common import Resource
from agent_runtime.contract.translator import translate, translate_gateway

KINDS: dict[str, type[Resource]] = {
    "Agent": Agent,
    "MCPGateway": MCPGateway,
    "ModelConfig": ModelConfig,
    "RemoteMCPServer": RemoteMCPServer,
    "ToolApproval": ToolApproval,
}


@dataclass
class ManifestSet:
    """Resources found in a set of manifests, by kind and name."""

    agents: dict[str, Agent] = field(default_factory=dict)
    model_configs: dict[str, ModelConfig] = field(default_factory=dict)
    mcp_servers: dict[str, RemoteMCPServer] = field(default_factory=dict)
    gateways: dict[str, MCPGateway] = field(default_factory=dict)


def parse_resource(doc: dict[str, Any], where: str = "") -> Resource:
    """Validate one manifest document into its resource model; raise TranslationError on any problem."""
    prefix = f"{where}: " if where else ""
    kind = doc.get("kind")
    if doc.get("apiVersion") != API_VERSION:
        raise TranslationError([Problem("apiVersion", f"{prefix}expected {API_VERSION!r}, got {doc.get('apiVersion')!r}")])
    if kind not in KINDS:
        raise TranslationError([Problem("kind", f"{prefix}unknown kind {kind!r}; expected one of {sorted(KINDS)}")])
    try:
        return KINDS[kind].model_validate(doc)
    except ValidationError as exc:
        raise TranslationError(problems_from_validation(exc, prefix=f"{prefix}{kind}")) from None


def load_manifests(paths: Iterable[str | Path]) -> ManifestSet:
    result = ManifestSet()
    for path in paths:
        text = Path(path).read_text()
        for index, doc in enumerate(yaml.safe_load_all(text)):
            if doc is None:
                continue
            if not isinstance(doc, dict):
                raise TranslationError([Problem("", f"{path} document {index}: not a mapping")])
            resource = parse_resource(doc, where=f"{path}#{index}")
            if isinstance(resource, Agent):
                result.agents[resource.name] = resource
            elif isinstance(resource, ModelConfig):
                result.model_configs[resource.name] = resource
            elif isinstance(resource, RemoteMCPServer):
                result.mcp_servers[resource.name] = resource
            elif isinstance(resource, MCPGateway):
                result.gateways[resource.name] = resource
    return result


def select_agent_config(paths: Iterable[str | Path], agent_name: str | None = None) -> AgentConfig:
    """Load manifests and translate the one Agent in them (or the one named ``agent_name``)."""
    manifests = load_manifests(paths)
    if agent_name is not None:
        if agent_name not in manifests.agents:
            raise TranslationError([Problem("", f"no Agent named {agent_name!r} in the manifests")])
        agent = manifests.agents[agent_name]
    elif len(manifests.agents) == 1:
        (agent,) = manifests.agents.values()
    else:
        found = sorted(manifests.agents) or "none"
        raise TranslationError([Problem("", f"expected exactly one Agent in the manifests (found {found}); pass --agent")])
    # The other Agents of the files are the namespace the cycle and depth checks see (one Agent alone: unknown).
    agents = manifests.agents if len(manifests.agents) > 1 else None
    return translate(agent, manifests.model_configs, manifests.mcp_servers, agents=agents)


def select_gateway_config(paths: Iterable[str | Path], gateway_name: str | None = None) -> GatewayConfig:
    """Load manifests and translate the one MCPGateway in them (or the one named ``gateway_name``)."""
    manifests = load_manifests(paths)
    if gateway_name is not None:
        if gateway_name not in manifests.gateways:
            raise TranslationError([Problem("", f"no MCPGateway named {gateway_name!r} in the manifests")])
        gateway = manifests.gateways[gateway_name]
    elif len(manifests.gateways) == 1:
        (gateway,) = manifests.gateways.values()
    else:
        found = sorted(manifests.gateways) or "none"
        raise TranslationError([Problem("", f"expected exactly one MCPGateway in the manifests (found {found}); pass --gateway")])
    return translate_gateway(gateway, manifests.mcp_servers)
