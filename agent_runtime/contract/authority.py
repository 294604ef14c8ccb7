"""Who may decide a gated call, and when the votes cast on it decide it: the one authority function.

Every channel (A2A, REST, kubectl, later the web inbox) turns a person's approve or deny into a
:class:`Vote` and asks :func:`judge` about it, with the request's approvers (fixed when the call was
paused, see ``ApprovalRecord.approvers``), the principal who started the task, and the votes already
recorded. Pure: no I/O, no clock; the runtime records every vote it judged, counted or not
(``approvals/votes.py``).

The rules:

- No approvers block (``None``): the requester decides alone, on every channel (one vote; anyone else's vote is
  refused and recorded). Requests paused before this rule (stored with no approvers) follow it too.
- Otherwise a vote counts only from a principal named in ``users``, belonging to one of ``groups``, or, with
  ``any_authenticated``, any authenticated person; and never from the requester when ``allow_requester`` is false
  (separation of duties).
- A ServiceAccount (``system:serviceaccount:…``) never decides unless named: in ``users``, or through a listed
  ``system:serviceaccounts…`` group. Not as the requester, not through ``any_authenticated`` or another group.
- A principal counts once, whatever channel and alias it used (principals are canonical, see
  :mod:`agent_runtime.contract.principals`); a second vote by the same principal is refused.
- ``required`` distinct counted approvals approve; one counted deny denies at once, with its reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from agent_runtime.contract.agent_config import ApproversConfig
from agent_runtime.contract.principals import ANONYMOUS, INTERNAL, UNOWNED

SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
SERVICE_ACCOUNT_GROUP_PREFIX = "system:serviceaccounts"
# Names no person authenticates as: never "any authenticated" approver.
_NOBODY = frozenset({"", ANONYMOUS, INTERNAL, UNOWNED})

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
        return f"only the requester {requester}" if requester else "only the requester"
    names = [*approvers.users, *(f"a member of {g}" for g in approvers.groups)]
    if approvers.any_authenticated:
        names.append("any authenticated person")
    who = " or ".join(names) if names else "nobody (the approvers list is empty)"
    if not approvers.allow_requester and requester:
        who += f", not the requester {requester}"
    return f"{who}; {approvers.required} approval{'s' if approvers.required != 1 else ''} needed"


def is_service_account(principal: str) -> bool:
    return principal.startswith(SERVICE_ACCOUNT_PREFIX)


def _named(approvers: ApproversConfig, principal: str, groups: Iterable[str]) -> bool:
    """Whether the approvers let ``principal`` decide (the requester clause aside). A ServiceAccount only by name."""
    if principal in approvers.users:
        return True
    listed = set(approvers.groups) & set(groups)
    if is_service_account(principal):
        return any(g.startswith(SERVICE_ACCOUNT_GROUP_PREFIX) for g in listed)
    return bool(listed) or (approvers.any_authenticated and principal not in _NOBODY)


def refusal(approvers: ApproversConfig | None, requester: str, principal: str, groups: Iterable[str]) -> str:
    """Why ``principal`` may not vote on a request (empty when it may)."""
    if approvers is None:
        if principal == requester and requester and not is_service_account(principal):
            return ""
        if principal == requester and requester:
            return (f"{principal} is a ServiceAccount: a ServiceAccount decides only where approvers name it, and this "
                    "request has no approvers")
        return (f"{principal} may not decide this request: it has no approvers, so only its requester "
                f"{requester or '(unknown)'} decides it")
    if not approvers.allow_requester and principal == requester:
        return f"{principal} started this task and may not decide its calls (separation of duties); " \
               f"who may decide: {who_may_decide(approvers, requester)}"
    if _named(approvers, principal, groups):
        return ""
    return f"{principal} may not decide this request; who may decide: {who_may_decide(approvers, requester)}"


def may_see(approvers: ApproversConfig | None, requester: str, principal: str, groups: Iterable[str]) -> bool:
    """Whether ``principal`` may see a request on a channel that lists requests across tasks (REST, the inbox):
    the requester, and whoever the approvers let decide it (no approvers: the requester alone)."""
    if principal == requester and requester:
        return True
    return approvers is not None and _named(approvers, principal, groups)


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


__all__ = [
    "Ballot", "Judgement", "Outcome", "Tally", "Vote", "is_service_account", "judge", "may_see", "refusal", "tally",
    "who_may_decide",
]
