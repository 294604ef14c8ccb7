"""The ``ToolApproval`` custom resource (``crds/toolapproval.yaml``): one pending request, visible to kubectl."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from agent_runtime.resources.common import Resource, SpecModel
from agent_runtime.wire import HITL_TOOL_NAME

PLURAL = "toolapprovals"
LABEL_AGENT = "gatehouse.dev/agent"
LABEL_CONTEXT = "gatehouse.dev/context"
LABEL_KIND = "gatehouse.dev/kind"
"""Tells a tool approval (``KIND_APPROVAL``) from a mirrored ``hitl_request`` question (``KIND_HITL``)."""
KIND_APPROVAL = "tool_approval"
KIND_HITL = HITL_TOOL_NAME


class ApprovalDecision(SpecModel):
    action: Literal["Approve", "Deny"]
    reason: str = ""
    decided_by: str = ""


class ToolApprovalSpec(SpecModel):
    agent_ref: str = Field(min_length=1)
    context_id: str
    task_id: str
    request_id: str
    call_id: str = ""
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    hint: str = ""
    requested_at: str | None = None
    expires_at: str | None = None
    decision: ApprovalDecision | None = None


Phase = Literal["Pending", "Approved", "Denied", "Expired", "Canceled"]


class ToolApprovalStatus(SpecModel):
    phase: Phase = "Pending"
    decided_by: str | None = None
    decided_at: str | None = None
    reason: str | None = None
    source: Literal["a2a", "kubectl", "rest", "timeout"] | None = None


class ToolApproval(Resource):
    kind: Literal["ToolApproval"] = "ToolApproval"
    spec: ToolApprovalSpec
