"""What one request looks like in the inbox: pure data and formatting, no I/O.

A :class:`Card` is a tool approval as a person deciding it needs to see it (the arguments as approvers see them,
redacted; why it is gated; who asked; when it expires; the votes so far; the conversation's last user message).
A :class:`Question` is the model's own ``hitl_request``. :func:`fields` turns arguments into readable rows (long
values folded, paths marked). Both sources (the runtime's table, the cluster's ToolApprovals) build these.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

FOLD_AT = 160  # characters: longer values are folded (shown on demand)
_PATH_KEYS = re.compile(r"(^|_)(path|file|filename|dir|directory|dest|destination|src|source|target)s?$", re.I)
_PATH_VALUE = re.compile(r"^(~|\.{1,2})?/[^\s]*$|^[\w.-]+(/[\w.-]+)+/?$")

Status = Literal["pending", "approved", "denied", "expired", "orphaned"]


@dataclass(frozen=True)
class VoteLine:
    by: str
    vote: str  # approve | deny
    via: str = ""
    counted: bool = True
    note: str = ""


@dataclass(frozen=True)
class Card:
    """One tool approval, pending or decided."""

    id: str
    agent: str
    tool: str
    args: Mapping[str, Any]
    hint: str
    status: Status
    created_at: float
    expires_at: float
    namespace: str = ""
    server: str = ""
    redacted: Sequence[str] = ()
    requested_by: str = ""
    context: str = ""  # the conversation's last user message
    task_id: str = ""
    context_id: str = ""
    decided_by: str = ""
    decided_at: float | None = None
    reason: str = ""
    source: str = ""  # the channel that decided: a2a, rest, kubectl, inbox, timeout…
    required: int = 1
    approvals: int = 0
    waiting_for: str = ""
    votes: Sequence[VoteLine] = ()
    session_allowed: bool = False
    args_hash: str = ""
    name: str = ""  # the ToolApproval object, where there is one

    @property
    def pending(self) -> bool:
        return self.status == "pending"

    @property
    def progress(self) -> str:
        """``1 of 2`` when more than one approval is needed, else empty."""
        return f"{self.approvals} of {self.required}" if self.required > 1 else ""

    @property
    def key(self) -> str:
        """What the page's forms name the request by: ``namespace/name`` for a ToolApproval, else the request id."""
        return f"{self.namespace}/{self.name}" if self.name else self.id


@dataclass(frozen=True)
class Question:
    """A ``hitl_request`` from the model, answered by the task's owner over A2A."""

    id: str
    agent: str
    question: str
    options: Sequence[str]
    stage: Literal["answer", "confirm"]
    created_at: float
    expires_at: float
    task_id: str
    context_id: str
    selected: str | None = None
    confirmation: str = ""
    default: str | None = None
    context: str = ""


@dataclass(frozen=True)
class Filters:
    """The history view's filters; empty means any."""

    outcome: str = ""  # approved | denied | expired
    decided_by: str = ""  # a substring of who decided
    agent: str = ""
    since_hours: float = 0.0  # 0: all time

    def admits(self, card: Card, now: float) -> bool:
        if card.pending or (self.outcome and card.status != self.outcome):
            return False
        if self.decided_by and self.decided_by.lower() not in card.decided_by.lower():
            return False
        if self.agent and card.agent != self.agent:
            return False
        when = card.decided_at or card.created_at
        return not self.since_hours or when >= now - self.since_hours * 3600


@dataclass(frozen=True)
class Outcome:
    """What became of one decision from the page, in words for the person who made it."""

    id: str
    ok: bool
    status: Literal["decided", "counted", "refused", "already", "unknown", "invalid", "sent"]
    message: str


@dataclass(frozen=True)
class Field:
    name: str
    text: str
    folded: bool = False  # long: shown on demand
    path: bool = False  # looks like a file path
    redacted: bool = False


def fields(args: Mapping[str, Any], redacted: Sequence[str] = ()) -> list[Field]:
    """Arguments as rows: strings as they are, anything else as indented JSON; long values folded; paths marked."""
    rows = []
    hidden = set(redacted)
    for name, value in args.items():
        text = value if isinstance(value, str) else json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)
        is_path = isinstance(value, str) and bool(_PATH_KEYS.search(name) or _PATH_VALUE.match(value)) and "\n" not in value
        rows.append(Field(name, text, len(text) > FOLD_AT or text.count("\n") > 3, is_path, name in hidden))
    return rows


def iso(ts: float | None) -> str:
    """UTC ISO-8601 for a machine (the page's countdown reads it)."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if ts else ""


def when(ts: float | None) -> str:
    """UTC time for a person."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if ts else ""


def remaining(expires_at: float, now: float) -> str:
    """``4m 12s`` left, ``expired`` after: what the page shows before its script takes over the countdown."""
    left = int(expires_at - now)
    if left <= 0:
        return "expired"
    hours, rest = divmod(left, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours}h {minutes}m" if hours else f"{minutes}m {seconds}s" if minutes else f"{seconds}s"


def newest_first(cards: Sequence[Card]) -> list[Card]:
    return sorted(cards, key=lambda c: (c.created_at, c.id), reverse=True)


def last_user_text(messages: Sequence[tuple[str, str]]) -> str:
    """The last message a person wrote (``(role, text)`` pairs, oldest first): the context for a decision. Decisions
    and answers sent as data parts have no text and are skipped by the caller."""
    for role, text in reversed(messages):
        if role == "user" and text.strip():
            return text.strip()
    return ""


__all__ = [
    "FOLD_AT", "Card", "Field", "Filters", "Outcome", "Question", "Status", "VoteLine", "fields", "iso", "last_user_text",
    "newest_first", "remaining", "when",
]
