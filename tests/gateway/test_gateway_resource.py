"""The MCPGateway resource (crds/mcpgateway.yaml, agent_runtime/contract/resources/gateway.py) and its translation: the same
approval, access and audit blocks as the Agent, parsed by the same code; and ToolApprovals naming a gateway, with
those written before gateways existed still valid."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent_runtime.contract import policy
from agent_runtime.contract.agent_config import GatewayConfig
from agent_runtime.contract.errors import TranslationError
from agent_runtime.contract.resources import MCPGateway, RemoteMCPServer, ToolApproval
from agent_runtime.contract.translator import translate_gateway
from tests.support import crd_validation

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = yaml.safe_load((ROOT / "examples" / "gateway" / "gateway.yaml").read_text())
TOOLS = RemoteMCPServer.model_validate(yaml.safe_load((ROOT / "examples" / "file-manager" / "mcp-server.yaml").read_text()))
STORED_APPROVAL = json.loads((ROOT / "tests" / "testdata" / "toolapproval-v2" / "pending.json").read_text())


def _gateway(**spec: Any) -> dict[str, Any]:
    doc = copy.deepcopy(EXAMPLE)
    doc["spec"].update(spec)
    return doc


def _translate(doc: dict[str, Any]) -> Any:
    return translate_gateway(MCPGateway.model_validate(doc), {"file-tools": TOOLS}, in_cluster=True)


@pytest.mark.parametrize("block", ["approval", "access", "audit", "deployment", "state"])
def test_the_crd_blocks_are_the_agents(block: str) -> None:
    """Edit a block in crds/agent.yaml and the gateway's copy must follow (descriptions of the whole block aside)."""
    agent = crd_validation.schema_for("Agent")["properties"]["spec"]["properties"][block]
    gateway = crd_validation.schema_for("MCPGateway")["properties"]["spec"]["properties"][block]
    assert {k: v for k, v in gateway.items() if k != "description"} == {k: v for k, v in agent.items() if k != "description"}


def test_the_example_is_valid_and_translates_with_the_agents_policy() -> None:
    assert crd_validation.validate(EXAMPLE) == []
    config = _translate(EXAMPLE)
    assert config.upstream.url == TOOLS.spec.url and config.upstream.require_approval == ["delete_file", "write_file"]
    assert config.access.token_file is not None and config.access.kubernetes_tokens  # as an Agent in a cluster
    # The same policy code as an Agent's: requireApproval, a deny rule, approvers, editable tools.
    gated = policy.evaluate(config, "file-tools", "delete_file", {"path": "a.txt"})
    assert gated.verdict == "require" and gated.approvers is not None and gated.approvers.groups == ["sre"]
    assert policy.evaluate(config, "file-tools", "write_file", {"path": "a"}).allow_edit
    assert policy.evaluate(config, "file-tools", "read_file", {"path": "x/.env"}).verdict == "deny"
    assert policy.evaluate(config, "file-tools", "read_file", {"path": "notes.txt"}).verdict == "allow"


def test_no_approvers_means_the_requester_alone() -> None:
    doc = _gateway(approval={"timeout": "1m"})
    config = _translate(doc)
    assert policy.evaluate(config, "file-tools", "delete_file", {"path": "a"}).approvers is None
    assert policy.requester_only(config)  # reported as for an Agent


def test_field_pathed_problems() -> None:
    doc = _gateway(upstream={"name": "missing", "toolNames": ["read_file"]},
                   approval={"rules": [{"tool": "nope", "action": "require"}], "approvers": {"users": []}})
    with pytest.raises(TranslationError) as caught:
        _translate(doc)
    paths = {p.path for p in caught.value.problems}
    assert paths == {"spec.upstream.name", "spec.approval.rules[0].tool", "spec.approval.approvers"}


def test_without_a_tool_list_any_tool_may_be_named() -> None:
    doc = _gateway(upstream={"name": "file-tools", "requireApproval": ["delete_file"]},
                   approval={"rules": [{"tool": "anything", "action": "deny"}]})
    assert crd_validation.validate(doc) == []
    config = _translate(doc)
    assert config.upstream.tool_names == [] and policy.evaluate(config, "file-tools", "anything", {}).verdict == "deny"


def test_the_crd_refuses_a_gated_tool_outside_the_tool_list() -> None:
    doc = _gateway(upstream={"name": "file-tools", "toolNames": ["read_file"], "requireApproval": ["delete_file"]})
    assert any("requireApproval" in e for e in crd_validation.validate(doc))
    with pytest.raises(ValueError, match="requireApproval"):
        MCPGateway.model_validate(doc)


def test_more_than_one_replica_needs_postgres_as_for_an_agent() -> None:
    doc = _gateway(deployment={"replicas": 2})
    assert any("more than one replica needs spec.state.postgres" in e for e in crd_validation.validate(doc))


# -- ToolApprovals ------------------------------------------------------------------------------------------------


def _held() -> dict[str, Any]:
    doc = copy.deepcopy(STORED_APPROVAL)
    doc["spec"].pop("agentRef")
    doc["spec"]["gatewayRef"] = "files-gate"
    doc["metadata"]["labels"] = {"gatehouse.dev/gateway": "files-gate"}
    return doc


def test_a_stored_toolapproval_of_an_agent_is_still_valid() -> None:
    assert crd_validation.validate(STORED_APPROVAL) == []
    assert ToolApproval.model_validate(STORED_APPROVAL).spec.owner == STORED_APPROVAL["spec"]["agentRef"]


def test_a_gateways_toolapproval_names_the_gateway_and_may_be_abandoned() -> None:
    held = _held()
    assert crd_validation.validate(held) == []
    assert ToolApproval.model_validate(held).spec.owner == "gateway/files-gate"
    abandoned = {**held, "status": {**held["status"], "phase": "Abandoned"}}
    assert crd_validation.validate(abandoned, old=held) == []
    assert ToolApproval.model_validate(abandoned).status == {**held["status"], "phase": "Abandoned"}


@pytest.mark.parametrize("refs", [{}, {"agentRef": "file-manager", "gatewayRef": "files-gate"}])
def test_a_toolapproval_names_exactly_one_owner(refs: dict[str, str]) -> None:
    doc = _held()
    doc["spec"].pop("gatewayRef")
    doc["spec"].update(refs)
    assert any("exactly one of spec.agentRef" in e for e in crd_validation.validate(doc))
    with pytest.raises(ValueError, match=r"exactly one of spec\.agentRef"):
        ToolApproval.model_validate(doc)


# -- a gateway with no upstream (hooks only) ------------------------------------------------------------------------

HOOKS_ONLY = {"apiVersion": "gatehouse.dev/v1alpha1", "kind": "MCPGateway", "metadata": {"name": "laptops"},
              "spec": {"approval": {"rules": [{"tool": "Bash", "when": {"arg": "command", "regex": "rm\\s+-rf"},
                                               "action": "deny"}]}}}


def test_a_gateway_without_an_upstream_is_valid_and_its_policy_names_the_clis_tools() -> None:
    assert crd_validation.validate(HOOKS_ONLY) == []
    gateway = MCPGateway.model_validate(HOOKS_ONLY)
    assert gateway.spec.upstream is None
    config = translate_gateway(gateway, {}, in_cluster=True)  # no RemoteMCPServer needed
    assert config.upstream is None and config.mcp_servers == []
    assert policy.evaluate(config, "claude-code", "Bash", {"command": "rm -rf /"}).verdict == "deny"
    assert policy.evaluate(config, "claude-code", "Bash", {"command": "ls"}).verdict == "allow"


def test_a_named_upstream_that_is_missing_is_still_refused() -> None:
    with pytest.raises(TranslationError) as exc:
        translate_gateway(MCPGateway.model_validate(EXAMPLE), {}, in_cluster=True)
    assert {p.path for p in exc.value.problems} == {"spec.upstream.name"}


def test_what_the_last_release_wrote_still_opens() -> None:
    """The upgrade: spec.upstream was required, so every stored MCPGateway has one and stays valid; a GatewayConfig
    written by the last release (tests/testdata/gateway-config-v1, rendered by it from the example) loads unchanged."""
    assert crd_validation.validate(EXAMPLE) == []
    text = (ROOT / "tests" / "testdata" / "gateway-config-v1" / "files-gate.json").read_text()
    stored = GatewayConfig.from_json(text)
    assert stored.upstream is not None and stored.upstream.name == "file-tools"
    assert stored == _translate(EXAMPLE)  # today's translation of the same gateway is the same config
