"""Who may decide a gated call, and when the votes cast on it decide it: the one authority function.

Every channel (A2A, REST, kubectl, later the web inbox) turns a person's approve or deny into a
:class:`Vote` and asks :func:`judge` about it, with the request's approvers (fixed when the call was
paused, see ``ApprovalRecord.approvers``), the principal who started the task, and the votes already
recorded. Pure: no I/O, no clock; the runtime records every vote it judged, counted or not
(``approvals/votes.py``).

The rules:

- No approvers block (``None``): whoever reached the request decides alone (one vote, anyone; the channel
  has already checked who may reach it: the task's owner on A2A, any allowed user on REST and kubectl).
- Otherwise a vote counts only from a principal named in ``users`` or belonging to one of ``groups``, and
  never from the requester when ``allow_requester`` is false (separation of duties).
- A principal counts once, whatever channel and alias it used (principals are canonical, see
  :mod:`agent_runtime.principals`); a second vote by the same principal is refused.
- ``required`` distinct counted approvals approve; one counted deny denies at once, with its reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from agent_runtime.agent_config import ApproversConfig

Ballot = Literal["approve", "deny"]
Outcome = Literal["pending", "approved", "denied"]


@dataclass(frozen=True)
class Vote:
    principal: str  # canonical
    groups: frozenset[str]
    ballot: Ballot
    reason: str = ""
    channel: str = ""  # a2a, rest, kubectl…
    seen_as: str = ""  # the name the channel authenticated (audit)


@dataclass(frozen=True)
class Tally:
    outcome: Outcome
    required: int
    approvals: tuple[str, ...]  # the distinct principals whose approval counted, in order
    denied_by: Vote | None = None

    @property
    def decided_by(self) -> str:
        """Who decided by their votes: the one who denied, else the approvers whose approvals counted."""
        return self.denied_by.principal if self.denied_by is not None else ", ".join(self.approvals)

    def progress(self) -> str:
        """``1 of 2 approvals``."""
        return f"{len(self.approvals)} of {self.required} approval{'s' if self.required != 1 else ''}"


@dataclass(frozen=True)
class Judgement:
    """What :func:`judge` said about one vote: whether it counts (``refused`` says why not) and the tally after it."""

    vote: Vote
    counted: bool
    refused: str
    tally: Tally


def who_may_decide(approvers: ApproversConfig | None, requester: str = "") -> str:
    """Who may decide, in words: ``alice or bob, or a member of sre (not the requester carol); 2 approvals``."""
    if approvers is None:
        return "whoever may reach the request"
    names = [*approvers.users, *(f"a member of {g}" for g in approvers.groups)]
    who = " or ".join(names) if names else "nobody (the approvers list is empty)"
    if not approvers.allow_requester and requester:
        who += f", not the requester {requester}"
    return f"{who}; {approvers.required} approval{'s' if approvers.required != 1 else ''} needed"


def refusal(approvers: ApproversConfig | None, requester: str, principal: str, groups: Iterable[str]) -> str:
    """Why ``principal`` may not vote on a request (empty when it may)."""
    if approvers is None:
        return ""
    if not approvers.allow_requester and principal == requester:
        return f"{principal} started this task and may not decide its calls (separation of duties); " \
               f"who may decide: {who_may_decide(approvers, requester)}"
    if principal in approvers.users or set(approvers.groups) & set(groups):
        return ""
    return f"{principal} may not decide this request; who may decide: {who_may_decide(approvers, requester)}"


def may_see(approvers: ApproversConfig | None, requester: str, principal: str, groups: Iterable[str]) -> bool:
    """Whether ``principal`` may see a request on a channel that lists requests across tasks (REST, the inbox):
    the requester, and whoever may decide it."""
    if principal == requester or approvers is None:
        return True
    return principal in approvers.users or bool(set(approvers.groups) & set(groups))


def tally(approvers: ApproversConfig | None, requester: str, votes: Sequence[Vote]) -> Tally:
    """The outcome of ``votes`` in order: only allowed votes count, each principal once (its first vote)."""
    required = approvers.required if approvers is not None else 1
    seen: set[str] = set()
    approvals: list[str] = []
    for vote in votes:
        if vote.principal in seen or refusal(approvers, requester, vote.principal, vote.groups):
            continue
        seen.add(vote.principal)
        if vote.ballot == "deny":
            return Tally("denied", required, tuple(approvals), vote)
        approvals.append(vote.principal)
        if len(approvals) >= required:
            return Tally("approved", required, tuple(approvals))
    return Tally("pending", required, tuple(approvals))


def judge(approvers: ApproversConfig | None, requester: str, earlier: Sequence[Vote], vote: Vote) -> Judgement:
    """Judge ``vote`` after the ``earlier`` counted votes of the same request."""
    before = tally(approvers, requester, earlier)
    if before.outcome != "pending":
        return Judgement(vote, False, f"the request is already {before.outcome}", before)
    why = refusal(approvers, requester, vote.principal, vote.groups)
    if not why and any(v.principal == vote.principal for v in earlier):
        why = (f"{vote.principal} has already voted on this request; a person counts once; "
               f"{before.progress()}; who may decide: {who_may_decide(approvers, requester)}")
    if why:
        return Judgement(vote, False, why, before)
    return Judgement(vote, True, "", tally(approvers, requester, [*earlier, vote]))


__all__ = ["Ballot", "Judgement", "Outcome", "Tally", "Vote", "judge", "may_see", "refusal", "tally", "who_may_decide"]
