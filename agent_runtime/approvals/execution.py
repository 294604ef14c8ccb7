"""What became of an approved call once it was let run: the one classification every outlet shows.

An approved call is claimed, then its tool is called (approvals/service.py). Its result says one of:

- ``ran``: the tool returned a result that is not an error;
- ``failed``: the tool (or the way to it) reported an error, and ``error`` says which;
- ``unknown``: the connection failed after the request was sent, so it may have reached the server and taken effect;
- ``not_sent``: the request provably never left (the MCP server could not be reached).

The last two are told apart by the texts the MCP transport writes into its error (server/toolsets.py ``_failed``,
which builds them from the constants here): one wording, defined once. :func:`classify` is pure; the service redacts
the error (``spec.approval.redact``) before anything stores or shows it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

Outcome = Literal["ran", "failed", "unknown", "not_sent"]
OUTCOMES: tuple[Outcome, ...] = ("ran", "failed", "unknown", "not_sent")

# The transport's words (server/toolsets.py): a request that never left, and one whose effect is not known.
NOT_SENT = "the request was not sent"
MAY_HAVE_REACHED = "whether the server acted on it is unknown, so it was not sent again"

MAX_ERROR = 1000  # characters of an error kept: enough to say what failed, small enough for a status and an Event

# The ToolApproval's ``status.execution.outcome`` (Kubernetes spells enumerations like ``phase``: CamelCase).
KUBE_NAMES: dict[Outcome, str] = {"ran": "Ran", "failed": "Failed", "unknown": "Unknown", "not_sent": "NotSent"}
# In words, for people (Events, the inbox, Slack).
WORDS: dict[Outcome, str] = {
    "ran": "ran", "failed": "failed", "unknown": "outcome unknown (it may have reached the server)", "not_sent": "not sent",
}
# The ``executed`` audit events of releases before these outcomes said only ok or error.
LEGACY: dict[str, Outcome] = {"ok": "ran", "error": "failed"}


@dataclass(frozen=True)
class Execution:
    outcome: Outcome
    error: str = ""  # failed, unknown, not_sent: what the tool or the transport said (cut to MAX_ERROR)


def classify(result: Any) -> Execution:
    """The execution a tool result reports: an MCP ``isError`` result or an ``{"error": …}`` (ADK's form of a failed
    MCP call) is failed, unless its text says the request was not sent or may have reached the server."""
    error = _error_text(result)
    if error is None:
        return Execution("ran")
    error = error[:MAX_ERROR]
    if NOT_SENT in error:
        return Execution("not_sent", error)
    if MAY_HAVE_REACHED in error:
        return Execution("unknown", error)
    return Execution("failed", error)


def _error_text(result: Any) -> str | None:
    """The error a result reports, or None when it reports none."""
    if not isinstance(result, Mapping):
        return None
    if "error" in result:
        return str(result["error"]) or "error"
    if result.get("isError") or result.get("is_error"):
        texts = [str(c.get("text")) for c in result.get("content") or [] if isinstance(c, Mapping) and c.get("text")]
        return "; ".join(texts) or "the tool reported an error"
    return None


def of_kube(name: str) -> Outcome | None:
    """The outcome a ToolApproval's ``status.execution.outcome`` names (None: none, or one this release does not know)."""
    return next((o for o, n in KUBE_NAMES.items() if n == name), None)


def describe(outcome: Outcome, error: str = "") -> str:
    """``not sent: the MCP server could not be reached (…)``: the outcome in words, with the error when there is one."""
    return f"{WORDS[outcome]}: {error}" if error else WORDS[outcome]


__all__ = [
    "KUBE_NAMES", "LEGACY", "MAX_ERROR", "MAY_HAVE_REACHED", "NOT_SENT", "OUTCOMES", "WORDS", "Execution", "Outcome",
    "classify", "describe", "of_kube",
]
