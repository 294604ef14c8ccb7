"""Pydantic models of the five Gatehouse custom resources, one module per CRD in ``crds/``."""

from agent_runtime.contract.resources.agent import Agent, AgentSpec
from agent_runtime.contract.resources.common import API_VERSION, GROUP, VERSION, ObjectMeta, SecretKeyRef
from agent_runtime.contract.resources.gateway import MCPGateway, MCPGatewaySpec
from agent_runtime.contract.resources.mcp_server import RemoteMCPServer, RemoteMCPServerSpec
from agent_runtime.contract.resources.model_config import ModelConfig, ModelConfigSpec
from agent_runtime.contract.resources.tool_approval import ToolApproval, ToolApprovalSpec, ToolApprovalStatus

__all__ = [
    "API_VERSION",
    "GROUP",
    "VERSION",
    "Agent",
    "AgentSpec",
    "MCPGateway",
    "MCPGatewaySpec",
    "ModelConfig",
    "ModelConfigSpec",
    "ObjectMeta",
    "RemoteMCPServer",
    "RemoteMCPServerSpec",
    "SecretKeyRef",
    "ToolApproval",
    "ToolApprovalSpec",
    "ToolApprovalStatus",
]
