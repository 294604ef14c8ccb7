"""What one request looks like in the inbox: pure data and formatting, no I/O.

A :class:`Card` is a tool approval as a person deciding it needs to see it (the arguments as approvers see them,
redacted; why it is gated; who asked; when it expires; the votes so far; the conversation's last user message).
A :class:`Question` is the model's own ``hitl_request``. :func:`fields` turns arguments into readable rows (long
values folded, paths marked) and into the inputs of the "Edit and approve" form (strings as text, anything else as
JSON). Both sources (the runtime's table, the cluster's ToolApprovals) build these.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from agent_runtime.approvals import execution
from agent_runtime.contract import redaction

FOLD_AT = 160  # characters: longer values are folded (shown on demand)
_PATH_KEYS = re.compile(r"(^|_)(path|file|filename|dir|directory|dest|destination|src|source|target)s?$", re.I)
_PATH_VALUE = re.compile(r"^(~|\.{1,2})?/[^\s]*$|^[\w.-]+(/[\w.-]+)+/?$")
ONE_LINE_AT = 100  # characters: a longer string is edited in a text area

Status = Literal["pending", "approved", "denied", "expired", "orphaned", "abandoned"]


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
    task_waits: int = 0  # pending calls of this card's task, this one included (0: not counted by the source)
    session_ttl: float = 0.0  # seconds a session grant lasts (the Agent's grantTTL): what "Approve for this session" says
    args_hash: str = ""
    name: str = ""  # the ToolApproval object, where there is one
    editable: bool = False  # pending, and the policy lets approvers approve it with changed arguments (edit and approve)
    edited_by: str = ""  # an approver changed the arguments: who (last)
    original_args: Mapping[str, Any] | None = None  # ...and the model's arguments, redacted as ``args`` are
    original_redacted: Sequence[str] = ()  # ...where those were redacted
    changed: Sequence[str] = ()  # ...and which of them differ from the model's
    execution: execution.Outcome | None = None  # approved and let run: what became of the call (approvals/execution.py)
    execution_error: str = ""  # ...the error it reported, redacted
    # A held AskUserQuestion of an agent CLI (agent_runtime/hooks/questions.py): (question, its option labels, the
    # deny reason each option sends), shown as buttons; answering denies the call with the answer as the reason.
    asks: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()

    @property
    def execution_label(self) -> str:
        """``not sent``: the outcome alone (the history's column; the error is on the request's page)."""
        return execution.WORDS[self.execution] if self.execution is not None else ""

    @property
    def execution_words(self) -> str:
        """``not sent: the MCP server could not be reached (…)``; empty before the call ran."""
        return execution.describe(self.execution, self.execution_error) if self.execution is not None else ""

    @property
    def pending(self) -> bool:
        return self.status == "pending"

    @property
    def progress(self) -> str:
        """``1 of 2`` when more than one approval is needed, else empty."""
        return f"{self.approvals} of {self.required}" if self.required > 1 else ""

    @property
    def edited(self) -> bool:
        return self.original_args is not None

    @property
    def key(self) -> str:
        """What the page's forms name the request by: ``namespace/name`` for a ToolApproval, else the request id."""
        return f"{self.namespace}/{self.name}" if self.name else self.id


@dataclass(frozen=True)
class TaskGroup:
    """The pending calls of one task, shown together: the task resumes only once each of them is decided."""

    task_id: str
    cards: Sequence[Card]

    @property
    def waits(self) -> int:
        """How many calls of the task still wait (the source's count, which may include calls the viewer cannot see)."""
        return max([len(self.cards), *(c.task_waits for c in self.cards)])


def by_task(cards: Sequence[Card]) -> list[Card | TaskGroup]:
    """``cards`` in their order, the calls of one task gathered into one :class:`TaskGroup` where the first of them
    stands, when the task waits on more than one call; any other card stays on its own."""
    members: dict[str, list[Card]] = {}
    for c in cards:
        if c.task_id:
            members.setdefault(c.task_id, []).append(c)
    out: list[Card | TaskGroup] = []
    for c in cards:
        together = members.get(c.task_id, []) if c.task_id else []
        if len(together) < 2 and c.task_waits < 2:
            out.append(c)
        elif together[0] is c:
            out.append(TaskGroup(c.task_id, tuple(together)))
    return out


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
    status: Literal["decided", "counted", "edited", "refused", "already", "unknown", "invalid", "sent"]
    message: str


@dataclass(frozen=True)
class Field:
    name: str
    text: str
    folded: bool = False  # long: shown on demand
    path: bool = False  # looks like a file path
    redacted: bool = False  # the value, or something in it, is hidden (an edit keeps it as it is)
    kind: Literal["string", "json"] = "string"  # how the edit form reads the text back: as it is, or as JSON
    multiline: bool = False  # edited in a text area rather than a one-line input


def hidden_fields(redacted: Sequence[str]) -> frozenset[str]:
    """The argument names that hold a redacted value somewhere: ``redacted`` names paths as the runtime renders them
    (``$.token``, ``$.headers.authorization``, ``$["x.y"]``) or, from older objects, plain names (``token``)."""
    names: set[str] = set()
    for path in redacted:
        try:
            steps = redaction.parse_path(path)
        except ValueError:
            names.add(path)
            continue
        names.add(steps[0] if isinstance(steps[0], str) else "*")  # "*": a wildcard (not rendered by the runtime)
    return frozenset(names)


def fields(args: Mapping[str, Any], redacted: Sequence[str] = ()) -> list[Field]:
    """Arguments as rows: strings as they are, anything else as indented JSON; long values folded; paths marked;
    fields holding a redacted value marked."""
    rows = []
    hidden = hidden_fields(redacted)
    for name, value in args.items():
        is_text = isinstance(value, str)
        text = value if is_text else json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)
        is_path = is_text and bool(_PATH_KEYS.search(name) or _PATH_VALUE.match(value)) and "\n" not in value
        multiline = len(text) > ONE_LINE_AT or "\n" in text or "\r" in text
        rows.append(Field(name, text, len(text) > FOLD_AT or text.count("\n") > 3, is_path,
                          name in hidden or "*" in hidden, "string" if is_text else "json", multiline))
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


def span(seconds: float) -> str:
    """A duration for a person: ``1 h``, ``1 h 30 min``, ``45 min``, ``30 s``."""
    whole = max(0, round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{hours} h" if hours else "", f"{minutes} min" if minutes else "", f"{secs} s" if secs and not hours else ""]
    return " ".join(p for p in parts if p) or "0 s"


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
    "FOLD_AT", "ONE_LINE_AT", "Card", "Field", "Filters", "Outcome", "Question", "Status", "TaskGroup", "VoteLine",
    "by_task", "fields", "hidden_fields", "iso", "last_user_text", "newest_first", "remaining", "span", "when",
]
