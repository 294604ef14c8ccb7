"""The ``Agent`` custom resource (``crds/agent.yaml``): what to run and which tools need a human.

Follow one field end to end: ``spec.tools[].mcpServer.requireApproval`` is declared in
``crds/agent.yaml``, modelled here as :class:`McpServerTool.require_approval`, turned into
``AgentConfig.mcp_servers[].require_approval`` by :mod:`agent_runtime.translator`, and enforced by
:mod:`agent_runtime.policy` at call time.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from agent_runtime.resources.common import Resource, SpecModel


class McpServerTool(SpecModel):
    name: str = Field(min_length=1, description="Name of a RemoteMCPServer in the Agent's namespace.")
    kind: Literal["RemoteMCPServer"] = "RemoteMCPServer"
    tool_names: list[str] = Field(min_length=1, description="Tools of that server offered to the model.")
    require_approval: list[str] = Field(
        default_factory=list, description="Tools of that server that pause for a human's approval."
    )


class ToolSpec(SpecModel):
    type: Literal["McpServer"] = "McpServer"
    mcp_server: McpServerTool


class RuleCondition(SpecModel):
    arg: str = Field(min_length=1, description="Name of the tool argument to test.")
    glob: str | None = None
    regex: str | None = None

    @model_validator(mode="after")
    def _exactly_one_matcher(self) -> RuleCondition:
        if (self.glob is None) == (self.regex is None):
            raise ValueError("set exactly one of 'glob' or 'regex'")
        return self


class ApprovalRule(SpecModel):
    tool: str = Field(min_length=1)
    when: RuleCondition | None = None
    action: Literal["require", "allow", "deny"] = "require"


class ApprovalSpec(SpecModel):
    require_for_all_tools: bool = False
    exempt: list[str] = Field(default_factory=list)
    rules: list[ApprovalRule] = Field(default_factory=list)
    timeout: str = "15m"
    on_timeout: Literal["deny", "approve"] = "deny"
    allow_session_grants: bool = False


class HumanToolsSpec(SpecModel):
    hitl_request: bool = False


class A2ASkill(SpecModel):
    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    description: str = ""
    tags: list[str] = Field(default_factory=list)
    examples: list[str] = Field(default_factory=list)


class A2AConfigSpec(SpecModel):
    skills: list[A2ASkill] = Field(default_factory=list)


class DeploymentSpec(SpecModel):
    replicas: int = Field(default=1, ge=0)
    image: str | None = None
    resources: dict[str, Any] | None = None
    env: list[dict[str, Any]] = Field(default_factory=list)
    service_account_name: str | None = None


class AgentSpec(SpecModel):
    description: str = ""
    system_message: str = ""
    model_config_ref: str = Field(alias="modelConfig", min_length=1)
    tools: list[ToolSpec] = Field(default_factory=list)
    approval: ApprovalSpec = Field(default_factory=ApprovalSpec)
    human_tools: HumanToolsSpec = Field(default_factory=HumanToolsSpec)
    a2a_config: A2AConfigSpec = Field(default_factory=A2AConfigSpec, alias="a2aConfig")
    deployment: DeploymentSpec = Field(default_factory=DeploymentSpec)


class Agent(Resource):
    kind: Literal["Agent"] = "Agent"
    spec: AgentSpec
