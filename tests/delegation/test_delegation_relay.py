"""The pure part of sub-agents (agent_runtime/delegation/relay.py): who may act for whom, the pause relayed."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_runtime.contract.agent_config import IdentityConfig
from agent_runtime.contract.principals import Identities, Principal
from agent_runtime.delegation import relay

SA = "system:serviceaccount:team:orchestrator"
PARENT = Principal(SA, frozenset(), "kubernetes", SA)
IDENTITIES = Identities.of([IdentityConfig(principal="alice@example.com", aliases=["alice"])])


def _read(
    metadata: dict[str, Any] | None, caller: Principal = PARENT, delegators: tuple[str, ...] = (SA,),
) -> relay.Delegation:
    return relay.read(metadata, caller, delegators, IDENTITIES)


def test_no_claim_is_the_callers_own_message() -> None:
    assert _read(None) == relay.Delegation(None, 0)
    assert _read({"other": 1}) == relay.Delegation(None, 0)


def test_a_delegators_claim_is_the_human_resolved_with_this_agents_identities() -> None:
    got = _read(relay.on_behalf_metadata(Principal("alice", frozenset({"sre"})), 2))
    assert got.depth == 2 and got.human is not None
    assert (got.human.id, got.human.groups, got.human.via) == ("alice@example.com", frozenset({"sre"}), relay.DELEGATED_VIA)
    assert got.human.seen_as == f"alice via {PARENT.id}"  # the audit keeps both


def test_a_claim_from_anyone_else_is_refused() -> None:
    other = Principal("mallory")
    with pytest.raises(relay.DelegationRefused, match="not a trusted delegator"):
        _read(relay.on_behalf_metadata(Principal("alice")), caller=other)
    with pytest.raises(relay.DelegationRefused, match="not a trusted delegator"):
        _read(relay.on_behalf_metadata(Principal("alice")), delegators=())


@pytest.mark.parametrize("claim", ["alice", {"principal": ""}, {"principal": 7}, {"groups": ["x"]},
                                   {"principal": "alice", "groups": "sre"}, {"principal": "alice", "groups": [1]}])
def test_a_malformed_claim_is_refused_even_from_a_delegator(claim: Any) -> None:
    with pytest.raises(relay.DelegationRefused):
        _read({relay.ON_BEHALF_OF: claim})


@pytest.mark.parametrize("depth", [-1, "2", True, 1.5])
def test_a_malformed_depth_is_refused(depth: Any) -> None:
    with pytest.raises(relay.DelegationRefused, match="non-negative integer"):
        _read({relay.DEPTH: depth})


def test_depth_arrives_as_a_float_through_protobuf_and_is_capped() -> None:
    assert _read({relay.DEPTH: 3.0}).depth == 3
    assert relay.depth_problem(3, 3) == ""
    assert "came through 4 agents; this agent accepts at most 3" in relay.depth_problem(4, 3)


def test_a_relayed_pause_marks_each_request_and_keeps_a_deeper_origin() -> None:
    child = {"interrupt_type": "tool_approval", "action_requests": [
        {"id": "apr-1", "name": "read_file", "expires_at": "2026-11-26T03:00:00Z"},
        {"id": "apr-2", "name": "delete_file", "expires_at": "2026-11-26T02:00:00+00:00",
         "agent": {"name": "files", "task_id": "t-files", "path": ["files"]}},
    ]}
    nested = relay.nest(child, "team", "t-team")
    assert nested["action_requests"][0]["agent"] == {"name": "team", "task_id": "t-team", "path": ["team"]}
    assert nested["action_requests"][1]["agent"] == {"name": "files", "task_id": "t-files", "path": ["team", "files"]}
    assert "agent" not in child["action_requests"][0]  # the sub-agent's pause as stored is left as it was
    assert relay.request_ids([nested]) == ["apr-1", "apr-2"]
    assert relay.earliest_expiry([nested]) == relay.earliest_expiry([{"requests": [{"expires_at": "2026-11-26T02:00:00Z"}]}])
    assert relay.earliest_expiry([{"action_requests": [{"expires_at": "soon"}]}]) is None


def test_what_the_model_is_told_when_the_sub_agent_ends() -> None:
    assert relay.result_for_model("default/files", "completed", "done") == {"result": "done"}
    assert relay.result_for_model("default/files", "failed", "boom") == {"error": "the sub-agent default/files failed: boom"}
    assert "was canceled" in relay.result_for_model("x", "canceled", "")["error"]


@given(st.lists(st.sampled_from(["a", "b", "c"]), max_size=4), st.sampled_from(["a", "b", "c", "p"]))
def test_a_relayed_request_s_path_ends_with_its_origin_and_starts_with_this_agents_tool(path: list[str], tool: str) -> None:
    item: dict[str, Any] = {"id": "apr-1"}
    for name in reversed(path):  # relayed up the chain: the innermost agent first
        item = relay.nest({"action_requests": [item]}, name, f"t-{name}")["action_requests"][0]
    top = relay.nest({"action_requests": [item]}, tool, f"t-{tool}")["action_requests"][0]["agent"]
    assert top["path"] == [tool, *path]
    assert top["name"] == (path[-1] if path else tool)
