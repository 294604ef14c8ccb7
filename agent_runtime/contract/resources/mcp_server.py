"""The ``RemoteMCPServer`` custom resource (``crds/remotemcpserver.yaml``): where an MCP tool server lives."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from agent_runtime.contract.resources.common import Resource, SecretKeyRef, SpecModel


class HeaderFromSecret(SpecModel):
    name: str = Field(min_length=1, description="HTTP header name, e.g. Authorization.")
    secret_key_ref: SecretKeyRef


class RemoteMCPServerSpec(SpecModel):
    url: str = Field(min_length=1)
    protocol: Literal["STREAMABLE_HTTP", "SSE"] = "STREAMABLE_HTTP"
    headers_from: list[HeaderFromSecret] = Field(default_factory=list)
    timeout: str = "30s"


class RemoteMCPServer(Resource):
    kind: Literal["RemoteMCPServer"] = "RemoteMCPServer"
    spec: RemoteMCPServerSpec
