"""The ``ToolApproval`` custom resource (``crds/toolapproval.yaml``): one pending request, visible to kubectl."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from agent_runtime.contract.channels import Channel
from agent_runtime.contract.resources.common import Resource, SpecModel
from agent_runtime.contract.wire import HITL_TOOL_NAME

PLURAL = "toolapprovals"
LABEL_AGENT = "gatehouse.dev/agent"
LABEL_GATEWAY = "gatehouse.dev/gateway"  # on a held call of an MCPGateway (docs/gateway.md), instead of LABEL_AGENT
LABEL_CONTEXT = "gatehouse.dev/context"
LABEL_KIND = "gatehouse.dev/kind"
"""Tells a tool approval (``KIND_APPROVAL``) from a mirrored ``hitl_request`` question (``KIND_HITL``)."""
KIND_APPROVAL = "tool_approval"
KIND_HITL = HITL_TOOL_NAME


class ApprovalDecision(SpecModel):
    action: Literal["Approve", "Deny"]
    reason: str = ""
    decided_by: str = ""


class OnBehalfOf(SpecModel):
    """The human a delegator's vote is cast for (the Slack bridge: the Slack user's principal). Believed only when
    the vote's ``by`` is one of the Agent's ``spec.access.delegators``; then that human is the voter."""

    user: str = Field(min_length=1)
    groups: list[str] = Field(default_factory=list)


class ApprovalVote(SpecModel):
    """One person's vote, appended by that person (the admission policy checks ``by`` and ``groups`` against who
    sends the request); the runtime counts it with the one authority function (agent_runtime/contract/authority.py).
    ``onBehalfOf``: a trusted delegator (``by``) votes for a human; counted as that human, or not at all."""

    by: str = Field(min_length=1)
    groups: list[str] = Field(default_factory=list)
    action: Literal["Approve", "Deny"]
    reason: str = ""
    arguments: dict[str, Any] | None = None  # with Approve: the call's complete new arguments (edit and approve)
    on_behalf_of: OnBehalfOf | None = None


ONE_OWNER_MESSAGE = "a ToolApproval names exactly one of spec.agentRef (an Agent) or spec.gatewayRef (an MCPGateway)"


class ToolApprovalSpec(SpecModel):
    # Exactly one of the two (the CRD's CEL rule says the same): objects written before gateways carry agentRef only.
    agent_ref: str = ""
    gateway_ref: str = ""
    context_id: str
    task_id: str
    request_id: str
    call_id: str = ""
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)  # redacted (agent_runtime/contract/redaction.py)
    arguments_hash: str = ""  # sha256 of the tool and the real arguments, which an approval is bound to
    redacted: list[str] = Field(default_factory=list)  # the paths of arguments shown as «redacted»
    hint: str = ""
    requested_by: str = ""  # the principal whose task asked for the call (absent on objects from before the inbox)
    requested_at: str | None = None
    expires_at: str | None = None
    decision: ApprovalDecision | None = None  # one legacy decision: counted as the vote of decidedBy
    votes: list[ApprovalVote] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_owner(self) -> ToolApprovalSpec:
        if bool(self.agent_ref) == bool(self.gateway_ref):
            raise ValueError(ONE_OWNER_MESSAGE)
        return self

    @property
    def owner(self) -> str:
        """The Agent or MCPGateway whose runtime holds the call, as people read it: ``gateway/<name>`` for a gateway."""
        return self.agent_ref or f"gateway/{self.gateway_ref}"


Phase = Literal["Pending", "Approved", "Denied", "Expired", "Canceled", "Granted", "Orphaned", "Abandoned"]
"""``Orphaned``: the runtime has no record of the request (its state was lost, or another runtime made the object);
nothing will ever decide it (agent_runtime/kube/orphans.py). ``Abandoned``: a gateway's held call whose client no
longer waits for it (docs/gateway.md); an approval of it runs nothing."""


class CountedVote(SpecModel):
    """How the runtime judged one vote: ``counted``, or why not (``note``); ``by`` is the principal it counted as,
    ``seenAs`` the name the channel (``via``) authenticated (``kubectl gatehouse`` finds its own vote by it)."""

    by: str
    action: Literal["Approve", "Deny"]
    counted: bool
    note: str = ""
    via: str = ""
    seen_as: str = ""


class EditedStatus(SpecModel):
    """An approver changed the call's arguments (agent_runtime/contract/edits.py): what votes now approve, redacted like
    ``spec.arguments`` (which stays the call the model made: the request never changes)."""

    by: str
    arguments: dict[str, Any]
    arguments_hash: str
    redacted: list[str] = Field(default_factory=list)
    changed: list[str] = Field(default_factory=list)


class ToolApprovalStatus(SpecModel):
    phase: Phase = "Pending"
    summary: str | None = None  # the (redacted) arguments in one short line, for kubectl get's SUMMARY column
    decided_by: str | None = None
    decided_at: str | None = None
    reason: str | None = None
    source: Channel | None = None
    approvals: str | None = None  # "1/2": counted approvals of required
    required: int | None = None
    votes: list[CountedVote] = Field(default_factory=list)
    waiting_for: str | None = None  # while Pending with approvers: who may still decide, in words
    edited: EditedStatus | None = None


class ToolApproval(Resource):
    kind: Literal["ToolApproval"] = "ToolApproval"
    spec: ToolApprovalSpec
