"""A ToolApproval written by the release before issue 14 (tests/testdata/toolapproval-v2, see its README), read by
today's code: the new CRD admits it as stored, today's model parses it, and the runtime still finds in it the request
it wrote and the vote a user cast — so an upgrade in the middle of a pending approval loses nothing."""

from __future__ import annotations

import json
from pathlib import Path

from agent_runtime.approvals import ApprovalRecord, args_hash
from agent_runtime.contract.agent_config import ApproversConfig
from agent_runtime.contract.resources.tool_approval import ToolApproval, ToolApprovalStatus
from agent_runtime.kube import objects
from tests.support import crd_validation

STORED = json.loads((Path(__file__).parents[1] / "testdata" / "toolapproval-v2" / "pending.json").read_text())


def _record() -> ApprovalRecord:
    args = {"path": "old.txt"}
    return ApprovalRecord(
        id="apr-0123456789abcdef", task_id="task-1", context_id="ctx-1", confirmation_id="conf-1", call_id="call-1",
        tool="delete_file", server="file-tools", args=args, args_hash=args_hash("delete_file", args),
        hint="delete_file on file-tools requires approval (requireApproval)", created_at=1_795_000_000.0,
        expires_at=1_795_000_900.0, requested_by="carol",
        approvers=ApproversConfig(groups=["sre"], required=2, allow_requester=False),
    )


def test_the_new_crd_and_model_accept_a_stored_toolapproval() -> None:
    assert crd_validation.validate(STORED) == []
    parsed = ToolApproval.model_validate(STORED)
    assert parsed.spec.request_id == "apr-0123456789abcdef" and len(parsed.spec.votes) == 1
    assert ToolApprovalStatus.model_validate(STORED["status"]).phase == "Pending"


def test_the_runtime_finds_its_request_and_the_vote_in_it() -> None:
    spec = STORED["spec"]
    assert objects.same_request(spec, _record())
    (ballot,) = objects.ballots(spec)
    assert (ballot.by, ballot.ballot, ballot.reason) == ("alice@example.com", "approve", "fine")
    assert "sre" in ballot.groups
    # Today's status of the same request renders over the stored one as an update the CRD admits.
    updated = {**STORED, "status": objects.status(_record())}
    assert crd_validation.validate(updated, old=STORED) == []
    assert updated["status"]["approvals"] == "0/2" and updated["status"]["phase"] == "Pending"


def test_the_inbox_shows_a_stored_toolapproval_and_todays_objects_name_who_asked() -> None:
    from agent_runtime.clients.kubectl_inbox import card_of

    card = card_of(STORED)  # written before ToolApprovals said who asked: the page shows "unknown"
    assert (card.tool, card.status, card.requested_by, card.required) == ("delete_file", "pending", "", 2)
    assert [v.by for v in card.votes] == ["alice@example.com"]
    today = objects.tool_approval(_record(), "file-manager", "team-a", None)
    assert today["spec"]["requestedBy"] == "carol"
    assert card_of({**today, "status": objects.status(_record())}).requested_by == "carol"
    assert crd_validation.validate(today) == []


def test_an_edit_of_a_stored_request_is_an_update_the_crd_admits() -> None:
    """Edit and approve (state version 4) on an object stored before it: a vote with arguments appended, and the
    status showing the edit; the request in its spec stays what the runtime wrote, so its votes still count."""
    from dataclasses import replace

    edited = replace(_record(), args={"path": "other.txt"}, args_hash=args_hash("delete_file", {"path": "other.txt"}),
                     original_args={"path": "old.txt"}, edited_by="alice")
    assert objects.same_request(STORED["spec"], edited)
    votes = [*STORED["spec"]["votes"], {"by": "bob@example.com", "groups": ["sre"], "action": "Approve",
                                        "arguments": {"path": "other.txt"}}]
    updated = {**STORED, "spec": {**STORED["spec"], "votes": votes}, "status": objects.status(edited)}
    assert crd_validation.validate(updated, old=STORED) == []
    assert updated["status"]["edited"] == {"by": "alice", "arguments": {"path": "other.txt"},
                                           "argumentsHash": edited.args_hash, "redacted": [], "changed": ["path"]}
    assert objects.ballots(updated["spec"])[-1].arguments == {"path": "other.txt"}
