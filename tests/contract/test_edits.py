"""Edit and approve: the pure policy checks (agent_runtime/contract/edits.py) and what the approvals table does with an edit."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_runtime.approvals import ApprovalRecord, ApprovalService, args_hash
from agent_runtime.contract import edits
from agent_runtime.contract.agent_config import AgentConfig, ApproversConfig
from agent_runtime.contract.authority import Vote
from agent_runtime.infra.database import Database, default_database_url

SRE = ApproversConfig(groups=["sre"], required=2)
CONFIG = AgentConfig.model_validate({
    "name": "a", "card": {"name": "a"}, "model": {"provider": "Scripted", "model": "s"},
    "mcp_servers": [{"name": "files", "url": "http://x/mcp", "tool_names": ["write_file", "delete_file", "read_file"],
                     "require_approval": ["delete_file", "read_file"]}],
    "approval": {
        "editable_tools": ["delete_file"],
        "rules": [
            {"tool": "write_file", "action": "deny", "arg": "path", "glob": "**/.env*"},
            {"tool": "write_file", "action": "require", "arg": "path", "glob": "prod/**",
             "approvers": SRE.model_dump()},
            {"tool": "write_file", "action": "allow", "arg": "path", "glob": "tmp/**"},
            {"tool": "write_file", "action": "require", "allow_edit": True},
        ],
    },
})


def plan(
    tool: str, before: dict[str, Any], after: dict[str, Any], approvers: ApproversConfig | None = None,
) -> edits.EditPlan | None:
    return edits.plan(CONFIG, server="files", tool=tool, requested_args=before, current_args=before,
                      current_approvers=approvers, new_args=after)


def test_what_the_policy_allows_an_approver_to_edit() -> None:
    assert edits.editable(CONFIG, "files", "write_file", {"path": "a.txt"})  # the allowEdit rule
    assert edits.editable(CONFIG, "files", "delete_file", {"path": "a.txt"})  # editableTools
    assert not edits.editable(CONFIG, "files", "read_file", {"path": "a.txt"})  # gated, not editable
    assert not edits.editable(CONFIG, "files", "write_file", {"path": "prod/a"})  # gated by a rule without allowEdit
    assert not edits.editable(CONFIG, "files", "write_file", {"path": "tmp/a"})  # not gated at all
    with pytest.raises(edits.EditRefused, match="does not let approvers change the arguments of read_file calls"):
        plan("read_file", {"path": "a"}, {"path": "b"})


def test_the_edited_call_is_checked_against_the_whole_policy_again() -> None:
    with pytest.raises(edits.EditRefused, match=r"would be refused by policy \(refused by policy: argument 'path'"):
        plan("write_file", {"path": "a.txt", "content": "x"}, {"path": "conf/.env", "content": "x"})
    to_prod = plan("write_file", {"path": "a.txt"}, {"path": "prod/a.txt"})
    assert to_prod is not None and to_prod.approvers == SRE and to_prod.changed == ("path",)  # other approvers: waits for them
    mine = ApproversConfig(users=["alice"])
    to_tmp = plan("write_file", {"path": "a.txt"}, {"path": "tmp/a.txt"}, approvers=mine)
    assert to_tmp is not None and to_tmp.approvers == mine  # an edit never needs fewer approvals than the request had
    assert to_tmp.hint.startswith("edited by an approver")
    assert plan("write_file", {"path": "a.txt"}, {"path": "a.txt"}) is None  # no change: a plain approval


def test_what_the_model_is_told() -> None:
    text = edits.describe(("content", "mode", "path"), "bob", {"path": "a", "content": "x", "mode": "w"},
                          {"path": "b", "content": "y"})
    assert text == ("An approver (bob) edited this call before approving it; it ran with: content changed from 'x' to 'y'; "
                    "mode removed (was 'w'); path changed from 'a' to 'b'.")
    assert "added ('z')" in edits.describe(("new",), "bob", {}, {"new": "z"})


@given(st.dictionaries(st.sampled_from("abcde"), st.integers(0, 3)), st.dictionaries(st.sampled_from("abcde"), st.integers(0, 3)))
def test_changed_fields_are_exactly_the_differing_names(before: dict[str, int], after: dict[str, int]) -> None:
    changed = edits.changed_fields(before, after)
    assert list(changed) == sorted(changed)
    for name in "abcde":
        assert (name in changed) == (before.get(name, -1) != after.get(name, -1))
    assert edits.changed_fields(after, after) == ()


# --- the approvals table ---------------------------------------------------------------------------------------------

@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[ApprovalService]:
    db = Database(default_database_url(tmp_path))
    svc = ApprovalService(db, clock=lambda: 130.0)
    await svc.create_tables()
    yield svc
    await db.dispose()


def pending(approvers: ApproversConfig | None) -> ApprovalRecord:
    args = {"path": "a.txt"}
    return ApprovalRecord(
        id="apr-1", task_id="t1", context_id="c1", confirmation_id="conf-1", call_id="call-1", tool="delete_file",
        server="files", args=args, args_hash=args_hash("delete_file", args), hint="gated", created_at=100.0,
        expires_at=200.0, requested_by="carol", approvers=approvers,
    )


def vote(who: str) -> Vote:
    return Vote(who, frozenset({"sre"}), "approve", "", "rest", who)


async def test_votes_cast_before_an_edit_stop_counting_and_the_edited_call_is_what_runs(service: ApprovalService) -> None:
    await service.add_pending([pending(SRE)])
    (first,) = await service.vote("t1", {"apr-1": vote("bob")})
    assert first.judgement.counted and first.judgement.tally.progress().startswith("1 of 2")
    new = {"path": "b.txt"}
    edit = edits.EditPlan(new, SRE, "gated", ("path",))
    (after_edit,) = await service.vote("t1", {"apr-1": vote("alice")}, edits={"apr-1": edit})
    # alice's approval counts on the edited call; bob's was for other arguments: still 1 of 2, not approved.
    assert after_edit.judgement.counted and not after_edit.decided
    assert after_edit.judgement.tally.progress().startswith("1 of 2")
    record = await service.get("apr-1")
    assert record is not None and record.args == new and record.original_args == {"path": "a.txt"}
    assert record.edited_by == "alice" and record.args_hash == args_hash("delete_file", new)
    cast = (await service.cast_votes(["apr-1"]))["apr-1"]
    assert [(c.vote.principal, c.counted) for c in cast] == [("bob", False), ("alice", True)]
    assert cast[0].note == "cast on the arguments before alice edited them"
    (final,) = await service.vote("t1", {"apr-1": vote("dave")})
    assert final.decided and final.record.status == "approved"
    # The claim matches the model's call (ADK resumes it with its own arguments); the approval is for the edited ones.
    claim = await service.claim_execution("call-1", "delete_file", args_hash("delete_file", {"path": "a.txt"}))
    assert claim.ok and claim.record is not None and claim.record.args == new
    again = await service.claim_execution("call-1", "delete_file", args_hash("delete_file", {"path": "a.txt"}))
    assert not again.ok and "not run again" in again.problem


async def test_only_someone_who_may_decide_may_edit(service: ApprovalService) -> None:
    await service.add_pending([pending(ApproversConfig(users=["bob"]))])
    edit = edits.EditPlan({"path": "b.txt"}, None, "gated", ("path",))
    (refused,) = await service.vote("t1", {"apr-1": vote("mallory")}, edits={"apr-1": edit})
    assert not refused.judgement.counted and refused.judgement.refused.startswith("the edit was not applied: ")
    record = await service.get("apr-1")
    assert record is not None and record.args == {"path": "a.txt"} and record.original_args is None and record.status == "pending"
