"""The agent card the runtime publishes at ``/.well-known/agent-card.json``: from the AgentConfig, with the
authenticator's security schemes (any one of which is enough) and the one A2A extension it speaks, kagent's hitl/v1."""

from __future__ import annotations

from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)

from agent_runtime.contract import kagent_hitl
from agent_runtime.contract.agent_config import AgentConfig


def agent_card(config: AgentConfig, url: str, schemes: dict[str, dict[str, str]] | None = None) -> AgentCard:
    """The public card; ``schemes`` (the authenticator's) become ``securitySchemes``, any one of which is enough."""
    security = {
        name: SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(
            scheme=scheme.get("scheme", "Bearer"), bearer_format=scheme.get("bearerFormat", ""),
            description=scheme.get("description", ""),
        ))
        for name, scheme in (schemes or {}).items()
    }
    requirements = [SecurityRequirement(schemes={name: StringList()}) for name in security]
    return AgentCard(
        security_schemes=security,
        security_requirements=requirements,
        name=config.card.name,
        description=config.card.description or config.description,
        version=config.card.version,
        supported_interfaces=[AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")],
        # kagent's hitl/v1 is optional: a client that does not speak it still gets (and answers) our own payloads.
        capabilities=AgentCapabilities(streaming=True, extensions=[
            AgentExtension(uri=kagent_hitl.URI, description=kagent_hitl.DESCRIPTION, required=False),
        ]),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"],
        skills=[
            AgentSkill(id=s.id, name=s.name, description=s.description, tags=list(s.tags), examples=list(s.examples))
            for s in config.card.skills
        ],
    )


__all__ = ["agent_card"]
