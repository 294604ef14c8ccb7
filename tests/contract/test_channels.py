"""One list of channels (agent_runtime/contract/channels.py): the CRDs, the ToolApproval model and the mirror agree with it,
and every channel a decision can come through shows on the ToolApproval."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, get_args

import pytest
import yaml

from agent_runtime.approvals import ApprovalRecord
from agent_runtime.contract.channels import CHANNELS, BridgeChannel
from agent_runtime.contract.resources.agent import DelegatorSpec
from agent_runtime.contract.resources.tool_approval import ToolApprovalStatus
from agent_runtime.kube import objects

ROOT = Path(__file__).resolve().parents[2]
CRD_COPIES = [ROOT / "crds", ROOT / "charts" / "gatehouse" / "crds"]


def _schema(path: Path) -> dict[str, Any]:
    doc = yaml.safe_load(path.read_text())
    schema: dict[str, Any] = doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


@pytest.mark.parametrize("crds", CRD_COPIES, ids=["crds", "chart"])
def test_the_toolapproval_crds_source_enum_is_the_channel_list(crds: Path) -> None:
    source = _schema(crds / "toolapproval.yaml")["properties"]["status"]["properties"]["source"]
    assert tuple(source["enum"]) == CHANNELS


@pytest.mark.parametrize("crds", CRD_COPIES, ids=["crds", "chart"])
def test_a_delegators_channel_enum_is_the_bridge_channels(crds: Path) -> None:
    access = _schema(crds / "agent.yaml")["properties"]["spec"]["properties"]["access"]
    channel = access["properties"]["delegators"]["items"]["properties"]["channel"]
    assert tuple(channel["enum"]) == get_args(BridgeChannel)
    assert DelegatorSpec.model_fields["channel"].annotation == BridgeChannel | None


def test_the_model_and_the_mirror_know_every_channel() -> None:
    assert get_args(get_args(ToolApprovalStatus.model_fields["source"].annotation)[0]) == CHANNELS
    assert objects.SOURCES == frozenset(CHANNELS)


@pytest.mark.parametrize("channel", ["inbox", "slack", "rest", "kubectl"])
def test_a_decision_shows_the_channel_it_came_through_on_the_toolapproval(channel: str) -> None:
    record = ApprovalRecord(id="apr-1", task_id="t", context_id="c", confirmation_id="k", call_id="c1", tool="delete_file",
                            server="files", args={"path": "x"}, args_hash="h", hint="", created_at=0.5, expires_at=2.0,
                            status="approved", source=channel, decided_at=1.0)
    assert objects.status(record, decided_by="alice")["source"] == channel


@pytest.mark.parametrize("field", ["channel", "via", "source"])
def test_a_channel_the_voter_writes_never_decides_over_rest_or_a2a(field: str) -> None:
    """REST and A2A name their own channel (``rest``, ``a2a``); a decision that tries to name one is refused whole, so
    nothing is decided from it. (A ballot on a ToolApproval: tests/bridges/test_port_e2e.py.)"""
    from agent_runtime.contract import wire
    from agent_runtime.rest.models import BodyError, DecisionBody

    with pytest.raises(BodyError, match=field):
        DecisionBody.parse(json.dumps({"decision": "approve", field: "slack"}).encode())
    with pytest.raises(wire.DecisionError, match=field):
        wire.parse_payload([{"decision_type": "approve", field: "slack"}], "")
