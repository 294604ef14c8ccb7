"""The ``MCPGateway`` custom resource (``crds/mcpgateway.yaml``): an MCP server in front of a RemoteMCPServer that
gates the calls of agents Gatehouse does not run (docs/gateway.md).

Its approval, access, audit, deployment and state blocks are the Agent's own models (:mod:`agent_runtime.contract.resources.
agent`), so a field means the same on both and is parsed by the same code (``translator.translate_gateway``); the
CRD's copies of those blocks are kept equal to the Agent's by ``tests/gateway/test_gateway_resource.py``. Only the upstream is
its own: the Agent names a tool server per ``spec.tools[]``, a gateway names at most one (none: it serves only
agent-CLI hooks, and has no ``/mcp``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from agent_runtime.contract.resources.agent import AccessSpec, ApprovalSpec, AuditSpec, DeploymentSpec, StateSpec
from agent_runtime.contract.resources.common import Resource, SpecModel

PLURAL = "mcpgateways"
# The same words as the CRD's CEL rule on spec.upstream.
REQUIRE_IN_TOOL_NAMES_MESSAGE = "every requireApproval entry must also be listed in toolNames when toolNames is given"


class GatewayUpstream(SpecModel):
    name: str = Field(min_length=1, description="Name of a RemoteMCPServer in the gateway's namespace.")
    kind: Literal["RemoteMCPServer"] = Field(
        default="RemoteMCPServer", description="Kind of the upstream; only RemoteMCPServer."
    )
    tool_names: list[str] = Field(
        default_factory=list,
        description="Upstream tools the gateway offers (tools/list) and lets clients call; empty: every upstream tool.",
    )
    require_approval: list[str] = Field(
        default_factory=list, description="Upstream tools whose calls wait for a human's approval."
    )

    @model_validator(mode="after")
    def _gated_are_offered(self) -> GatewayUpstream:
        if self.tool_names and any(t not in self.tool_names for t in self.require_approval):
            raise ValueError(REQUIRE_IN_TOOL_NAMES_MESSAGE)
        return self


class MCPGatewaySpec(SpecModel):
    description: str = Field(default="", description="What the gateway is for (its MCP server instructions).")
    upstream: GatewayUpstream | None = Field(
        default=None,
        description="The MCP server the gateway forwards calls to; none: the gateway serves only hooks (/hooks/...).",
    )
    approval: ApprovalSpec = Field(
        default_factory=ApprovalSpec, description="Which tool calls wait for a human, and who decides."
    )
    deployment: DeploymentSpec = Field(default_factory=DeploymentSpec, description="How the operator runs the gateway.")
    state: StateSpec = Field(
        default_factory=StateSpec,
        description="Where the gateway keeps pending approvals; default: sqlite on a PersistentVolumeClaim.",
    )
    access: AccessSpec = Field(default_factory=AccessSpec, description="Who may call the gateway at all, and who is who.")
    audit: AuditSpec = Field(
        default_factory=AuditSpec, description="The audit log of approvals: who may read it, and how long it is kept."
    )


class MCPGateway(Resource):
    kind: Literal["MCPGateway"] = "MCPGateway"
    spec: MCPGatewaySpec
