"""The authority function (agent_runtime/contract/authority.py): who may decide a gated call, and when votes decide it.

Pure and fast: unit tests of each rule, then property tests (hypothesis) of the guarantees every channel relies on.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_runtime.contract.agent_config import ApproversConfig
from agent_runtime.contract.authority import Judgement, Vote, judge, may_see, refusal, tally, who_may_decide

SRE_TWO = ApproversConfig(groups=["sre"], required=2, allow_requester=False)


def vote(principal: str, ballot: str = "approve", groups: Sequence[str] = (), reason: str = "", channel: str = "rest") -> Vote:
    return Vote(principal, frozenset(groups), ballot, reason, channel, principal)  # type: ignore[arg-type]


def run(approvers: ApproversConfig | None, requester: str, votes: Sequence[Vote]) -> list[Judgement]:
    """Judge ``votes`` one after the other as the approvals service does: ``earlier`` is the counted votes so far."""
    counted: list[Vote] = []
    judgements = []
    for v in votes:
        j = judge(approvers, requester, counted, v)
        if j.counted:
            counted.append(v)
        judgements.append(j)
    return judgements


# --- who_may_decide ---------------------------------------------------------------------------------------------


def test_who_may_decide_in_words() -> None:
    assert who_may_decide(None) == "only the requester"
    assert who_may_decide(None, "carol") == "only the requester carol"
    anyone = ApproversConfig(any_authenticated=True, allow_requester=False)
    assert who_may_decide(anyone, "carol") == "any authenticated person, not the requester carol; 1 approval needed"
    assert who_may_decide(ApproversConfig(groups=["sre"], any_authenticated=True)) == \
        "a member of sre or any authenticated person; 1 approval needed"
    both = ApproversConfig(users=["alice", "bob"], groups=["sre"], required=2, allow_requester=False)
    assert who_may_decide(both, "carol") == "alice or bob or a member of sre, not the requester carol; 2 approvals needed"
    # No requester known (or the requester may decide): no separation-of-duties clause; one approval, singular.
    assert who_may_decide(both) == "alice or bob or a member of sre; 2 approvals needed"
    assert who_may_decide(ApproversConfig(users=["alice"]), "carol") == "alice; 1 approval needed"
    assert who_may_decide(ApproversConfig(), "carol") == "nobody (the approvers list is empty); 1 approval needed"


# --- refusal ----------------------------------------------------------------------------------------------------


def test_no_approvers_block_lets_the_requester_alone_decide() -> None:
    assert refusal(None, "carol", "carol", ()) == ""
    why = refusal(None, "carol", "mallory", {"sre", "system:authenticated"})
    assert why == "mallory may not decide this request: it has no approvers, so only its requester carol decides it"
    # A request with no known requester (none recorded) is decided by nobody but its timeout.
    assert refusal(None, "", "", ()) and refusal(None, "", "mallory", ())


SA = "system:serviceaccount:other:builder"
SA_GROUPS = {"system:serviceaccounts", "system:serviceaccounts:other", "system:authenticated"}


def test_a_service_account_decides_only_where_named() -> None:
    # Not as the requester of a request with no approvers (a parent agent's account: the human it names decides) …
    assert "is a ServiceAccount" in refusal(None, SA, SA, SA_GROUPS)
    # … not through anyAuthenticated, nor through a group that is not a ServiceAccount group …
    assert refusal(ApproversConfig(any_authenticated=True), "carol", SA, SA_GROUPS)
    assert refusal(ApproversConfig(groups=["system:authenticated"]), "carol", SA, SA_GROUPS)
    # … but by name, or through a ServiceAccount group the approvers list.
    assert refusal(ApproversConfig(users=[SA]), "carol", SA, SA_GROUPS) == ""
    assert refusal(ApproversConfig(groups=["system:serviceaccounts:other"]), "carol", SA, SA_GROUPS) == ""


def test_any_authenticated_admits_every_person_but_never_nobody() -> None:
    anyone = ApproversConfig(any_authenticated=True)
    assert refusal(anyone, "carol", "mallory", ()) == ""
    assert refusal(anyone, "carol", "carol", ()) == ""
    for nobody in ("", "gatehouse:internal", "gatehouse:unowned", "anonymous"):
        assert refusal(anyone, "carol", nobody, ()), nobody
    assert "separation of duties" in refusal(anyone.model_copy(update={"allow_requester": False}), "carol", "carol", ())


def test_listed_users_and_group_members_may_vote_others_may_not() -> None:
    approvers = ApproversConfig(users=["alice"], groups=["sre", "oncall"])
    assert refusal(approvers, "carol", "alice", ()) == ""
    assert refusal(approvers, "carol", "bob", {"oncall"}) == ""
    assert refusal(approvers, "carol", "bob", {"dev", "sre"}) == ""
    why = refusal(approvers, "carol", "dave", {"dev"})
    assert why.startswith("dave may not decide this request") and "who may decide: alice or a member of sre" in why


def test_separation_of_duties_refuses_the_requester_even_when_listed() -> None:
    approvers = ApproversConfig(users=["alice"], groups=["sre"], allow_requester=False)
    for groups in ((), {"sre"}):
        why = refusal(approvers, "alice", "alice", groups)
        assert "alice started this task and may not decide its calls (separation of duties)" in why
        assert "who may decide: alice or a member of sre, not the requester alice" in why
    # With allow_requester the requester is an approver like any other (if listed) …
    allowed = approvers.model_copy(update={"allow_requester": True})
    assert refusal(allowed, "alice", "alice", ()) == ""
    # … and still only if listed.
    assert "carol may not decide" in refusal(allowed, "carol", "carol", ())


def test_group_names_are_matched_exactly() -> None:
    approvers = ApproversConfig(groups=["sre"])
    assert refusal(approvers, "", "bob", {"SRE", "sre-team", "sr"}) != ""


# --- may_see ----------------------------------------------------------------------------------------------------


def test_may_see_the_requester_and_whoever_may_decide() -> None:
    assert may_see(None, "carol", "carol", ())  # no approvers: the requester alone
    assert not may_see(None, "carol", "mallory", {"sre"})
    assert not may_see(None, "", "", ())
    assert may_see(ApproversConfig(any_authenticated=True), "carol", "mallory", ())
    assert not may_see(ApproversConfig(any_authenticated=True), "carol", SA, SA_GROUPS)
    assert may_see(SRE_TWO, "carol", "carol", ())  # the requester sees her request …
    assert may_see(SRE_TWO, "alice", "alice", {"sre"})  # … even when she may not decide it
    assert may_see(SRE_TWO, "carol", "bob", {"sre"})
    assert may_see(ApproversConfig(users=["dave"]), "carol", "dave", ())
    assert not may_see(SRE_TWO, "carol", "mallory", {"dev"})
    assert not may_see(SRE_TWO, "carol", "mallory", ())


# --- tally ------------------------------------------------------------------------------------------------------


def test_tally_without_approvers_the_requesters_vote_decides() -> None:
    assert tally(None, "carol", []).outcome == "pending"
    first = tally(None, "carol", [vote("carol"), vote("mallory", "deny")])
    assert (first.outcome, first.approvals, first.required) == ("approved", ("carol",), 1)
    denied = tally(None, "carol", [vote("mallory", "approve"), vote("carol", "deny", reason="no")])
    assert denied.outcome == "denied" and denied.denied_by is not None and denied.denied_by.reason == "no"
    assert tally(None, "carol", [vote("mallory"), vote("bob", "deny")]).outcome == "pending"


def test_tally_counts_distinct_allowed_approvals_up_to_required() -> None:
    votes = [vote("bob", groups={"sre"}), vote("carol"), vote("bob", groups={"sre"}), vote("alice", groups={"sre"})]
    # carol is not in sre, bob counts once, alice is the requester: 1 of 2.
    pending = tally(SRE_TWO, "alice", votes)
    assert (pending.outcome, pending.approvals, pending.progress()) == ("pending", ("bob",), "1 of 2 approvals")
    done = tally(SRE_TWO, "alice", [*votes, vote("dave", groups={"sre"}), vote("erin", "deny", groups={"sre"})])
    assert (done.outcome, done.approvals) == ("approved", ("bob", "dave"))  # votes after the outcome change nothing
    assert tally(ApproversConfig(), "", []).progress() == "0 of 1 approval"


def test_tally_one_allowed_deny_denies_at_once_and_a_disallowed_one_does_not() -> None:
    votes = [vote("carol", "deny", reason="carol says no"), vote("bob", groups={"sre"}),
             vote("alice", "deny", groups={"sre"}, reason="alice may not"),
             vote("dave", "deny", groups={"sre"}, reason="too risky"), vote("erin", groups={"sre"})]
    result = tally(SRE_TWO, "alice", votes)
    assert result.outcome == "denied" and result.approvals == ("bob",)
    assert result.denied_by is not None and (result.denied_by.principal, result.denied_by.reason) == ("dave", "too risky")


def test_tally_a_principal_counts_with_its_first_vote_only() -> None:
    approve_then_deny = tally(SRE_TWO, "", [vote("bob", groups={"sre"}), vote("bob", "deny", groups={"sre"})])
    assert (approve_then_deny.outcome, approve_then_deny.approvals) == ("pending", ("bob",))
    deny_then_approve = tally(SRE_TWO, "", [vote("bob", "deny", groups={"sre"}), vote("bob", groups={"sre"})])
    assert deny_then_approve.outcome == "denied"


def test_tally_a_refused_vote_does_not_use_up_the_principal() -> None:
    # bob's first vote came without his groups (not counted); his next one, with them, counts.
    result = tally(SRE_TWO, "", [vote("bob"), vote("bob", groups={"sre"}), vote("dave", groups={"sre"})])
    assert (result.outcome, result.approvals) == ("approved", ("bob", "dave"))


# --- judge ------------------------------------------------------------------------------------------------------


def test_judge_counts_an_allowed_vote_and_reports_the_tally_after_it() -> None:
    j = judge(SRE_TWO, "alice", [], vote("bob", groups={"sre"}))
    assert (j.counted, j.refused, j.tally.outcome, j.tally.progress()) == (True, "", "pending", "1 of 2 approvals")
    j2 = judge(SRE_TWO, "alice", [vote("bob", groups={"sre"})], vote("dave", groups={"sre"}))
    assert (j2.counted, j2.tally.outcome, j2.tally.approvals) == (True, "approved", ("bob", "dave"))


def test_judge_refuses_with_the_reason_and_keeps_the_tally() -> None:
    earlier = [vote("bob", groups={"sre"})]
    requester = judge(SRE_TWO, "alice", earlier, vote("alice", groups={"sre"}))
    assert not requester.counted and "separation of duties" in requester.refused
    assert requester.tally.progress() == "1 of 2 approvals"
    outsider = judge(SRE_TWO, "alice", earlier, vote("carol"))
    assert not outsider.counted and "carol may not decide this request; who may decide: a member of sre" in outsider.refused
    again = judge(SRE_TWO, "alice", earlier, vote("bob", groups={"sre"}, channel="a2a"))
    assert not again.counted and again.refused == (
        "bob has already voted on this request; a person counts once; 1 of 2 approvals; "
        "who may decide: a member of sre, not the requester alice; 2 approvals needed"
    )
    assert again.tally.approvals == ("bob",)


def test_judge_refuses_votes_once_the_request_is_decided() -> None:
    denied = judge(SRE_TWO, "", [vote("bob", "deny", groups={"sre"})], vote("dave", groups={"sre"}))
    assert not denied.counted and denied.refused == "the request is already denied" and denied.tally.outcome == "denied"
    approved = judge(None, "carol", [vote("carol")], vote("carol", "deny"))
    assert not approved.counted and approved.refused == "the request is already approved"


def test_judge_without_approvers_refuses_anyone_but_the_requester() -> None:
    j = judge(None, "carol", [], vote("mallory", "deny", reason="nope"))
    assert not j.counted and j.tally.outcome == "pending" and "only its requester carol" in j.refused
    j = judge(None, "carol", [], vote("carol", "deny", reason="nope"))
    assert j.counted and j.tally.outcome == "denied" and j.tally.denied_by == j.vote


# --- properties -------------------------------------------------------------------------------------------------

PEOPLE = ["alice", "bob", "carol", "dave", "erin", "frank"]
GROUPS = ["sre", "oncall", "dev"]
groups_of = st.frozensets(st.sampled_from(GROUPS))
ballots = st.sampled_from(["approve", "deny"])
approvers_blocks = st.builds(
    ApproversConfig,
    users=st.lists(st.sampled_from(PEOPLE), max_size=3, unique=True),
    groups=st.lists(st.sampled_from(GROUPS), max_size=2, unique=True),
    required=st.integers(1, 4),
    allow_requester=st.booleans(),
)


def votes_by(principals: st.SearchStrategy[str], groups: st.SearchStrategy[frozenset[str]] = groups_of,
             ballot: st.SearchStrategy[str] = ballots) -> st.SearchStrategy[Vote]:
    return st.builds(Vote, principals, groups, ballot, st.sampled_from(["", "why"]), st.sampled_from(["a2a", "rest", "kubectl"]))


def allowed(approvers: ApproversConfig, requester: str, v: Vote) -> bool:
    """The rule, restated independently of the code under test."""
    if not approvers.allow_requester and v.principal == requester:
        return False
    return v.principal in approvers.users or bool(set(approvers.groups) & v.groups)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), approvers=approvers_blocks.filter(lambda a: a.required >= 2), requester=st.sampled_from(PEOPLE))
def test_property_outsiders_and_one_repeated_approver_never_approve(
    data: st.DataObject, approvers: ApproversConfig, requester: str
) -> None:
    """(a) Votes from principals outside users and groups, plus any number of votes by ONE allowed principal
    (under any channel or group set that keeps it allowed), never approve when two or more approvals are required."""
    outsiders = [p for p in PEOPLE if p not in approvers.users]
    other_groups = [g for g in GROUPS if g not in approvers.groups]
    outsider_votes = votes_by(st.sampled_from(outsiders), st.frozensets(st.sampled_from(other_groups)))
    the_one = data.draw(st.sampled_from(PEOPLE), label="the allowed principal")
    one_groups = st.just(frozenset(approvers.groups)) if the_one not in approvers.users else groups_of
    one_votes = votes_by(st.just(the_one), one_groups)
    votes = data.draw(st.lists(st.one_of(outsider_votes, one_votes), max_size=12), label="votes")
    for n in range(len(votes) + 1):
        assert tally(approvers, requester, votes[:n]).outcome != "approved", votes[:n]
    judgements = run(approvers, requester, votes)
    assert all(j.tally.outcome != "approved" for j in judgements)
    assert sum(j.counted for j in judgements) <= 1


@settings(max_examples=200, deadline=None)
@given(
    approvers=approvers_blocks.map(lambda a: a.model_copy(update={"allow_requester": False})),
    requester=st.sampled_from(PEOPLE), data=st.data(),
)
def test_property_the_requester_alone_never_approves_under_separation_of_duties(
    approvers: ApproversConfig, requester: str, data: st.DataObject
) -> None:
    """(b) With allow_requester false, the requester's votes (any channel, any groups, even when listed by name or
    group) never count: alone, they never approve (nor deny)."""
    listed = approvers.model_copy(update={"users": [*approvers.users, requester], "groups": [*approvers.groups, "sre"]})
    for block in (approvers, listed):
        votes = data.draw(st.lists(votes_by(st.just(requester), groups_of | st.just(frozenset({"sre"}))), max_size=8))
        assert tally(block, requester, votes).outcome == "pending"
        judgements = run(block, requester, votes)
        assert not any(j.counted for j in judgements)
        assert all("separation of duties" in j.refused for j in judgements)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), approvers=approvers_blocks, requester=st.sampled_from(PEOPLE))
def test_property_tally_counts_distinct_allowed_approvals_whatever_the_order(
    data: st.DataObject, approvers: ApproversConfig, requester: str
) -> None:
    """(c) Before any allowed deny, the count is the number of distinct allowed approvers (capped at required) in
    every order: approvals from anyone (repeated, refused or not) and denies nobody is allowed to cast."""
    any_vote = votes_by(st.sampled_from(PEOPLE), ballot=st.just("approve"))
    deny = votes_by(st.sampled_from(PEOPLE), ballot=st.just("deny"))
    refused_deny = deny.filter(lambda v: not allowed(approvers, requester, v))
    votes = data.draw(st.lists(any_vote | refused_deny, max_size=12), label="votes")
    shuffled = data.draw(st.permutations(votes), label="shuffled")
    distinct = {v.principal for v in votes if v.ballot == "approve" and allowed(approvers, requester, v)}
    expected = min(len(distinct), approvers.required)
    for order in (votes, shuffled):
        result = tally(approvers, requester, order)
        assert len(result.approvals) == expected, order
        assert len(set(result.approvals)) == len(result.approvals)
        assert set(result.approvals) <= distinct
        assert result.outcome == ("approved" if len(distinct) >= approvers.required else "pending")
        assert result.denied_by is None


@settings(max_examples=200, deadline=None)
@given(
    approvers=approvers_blocks.map(lambda a: a.model_copy(update={"required": a.required + 1})),
    requester=st.sampled_from(PEOPLE), votes=st.lists(votes_by(st.sampled_from(PEOPLE[:3])), max_size=12),
)
def test_property_judge_never_counts_a_second_vote_by_the_same_principal(
    approvers: ApproversConfig, requester: str, votes: list[Vote]
) -> None:
    """(d) Judged one after the other (as every channel's votes are), no principal is ever counted twice, and the
    judgements end where a tally of all the votes ends."""
    judgements = run(approvers, requester, votes)
    counted = [j.vote.principal for j in judgements if j.counted]
    assert len(counted) == len(set(counted)), counted
    for j in judgements:
        if not j.counted:
            assert j.refused
    final = judgements[-1].tally if judgements else tally(approvers, requester, [])
    whole = tally(approvers, requester, votes)
    assert (final.outcome, final.approvals) == (whole.outcome, whole.approvals)


@settings(max_examples=200, deadline=None)
@given(requester=st.sampled_from(PEOPLE), votes=st.lists(votes_by(st.sampled_from(PEOPLE)), min_size=1, max_size=8))
def test_property_without_approvers_the_requesters_first_vote_decides(requester: str, votes: list[Vote]) -> None:
    """(e) No approvers block: only the requester's vote counts, and its first decides; nobody else's vote ever counts,
    before it or after it."""
    judgements = run(None, requester, votes)
    mine = next((i for i, v in enumerate(votes) if v.principal == requester), None)
    for i, j in enumerate(judgements):
        assert j.counted == (i == mine), (i, j)
        if mine is None or i < mine:
            assert j.tally.outcome == "pending" and "only its requester" in j.refused
    if mine is not None:
        outcome = "approved" if votes[mine].ballot == "approve" else "denied"
        assert judgements[-1].tally.outcome == outcome == tally(None, requester, votes).outcome
    else:
        assert tally(None, requester, votes).outcome == "pending"


@pytest.mark.parametrize("required", [1, 2, 3])
def test_required_distinct_approvers_exactly_approve(required: int) -> None:
    approvers = ApproversConfig(groups=["sre"], required=required, allow_requester=False)
    people = [f"p{i}" for i in range(required)]
    judgements = run(approvers, "alice", [vote(p, groups={"sre"}) for p in people])
    assert [j.tally.outcome for j in judgements] == ["pending"] * (required - 1) + ["approved"]
    assert judgements[-1].tally.approvals == tuple(people)
