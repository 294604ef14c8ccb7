"""What the Slack bridge shows: a ToolApproval as a Slack message (Block Kit), and the short answers it gives one
person (ephemeral). Pure: no I/O, a function of the object alone, so the bridge can render it again at any time and
tell from a hash whether the message in Slack is still the truth (:func:`fingerprint`).

A held ``AskUserQuestion`` of an agent CLI (docs/gateway.md "Claude Code") also shows each question with its options
as buttons (:data:`ANSWER`, each asking Slack's confirmation first, as the inbox's "Send this answer" does): a click
denies the call with the inbox's own answer text (:func:`agent_runtime.ui.held_questions.answer_reason`, through
:func:`answer_reason`), which the hook hands to Claude as the deny's reason.

A Pending request shows the agent (or the MCPGateway, for a gateway's held call: ``spec.gatewayRef``), the tool,
its arguments (``spec.arguments``: already redacted by the runtime), why it
is gated (the rule), who asked, when it expires and the votes so far ("1 of 2"), with Approve and Deny buttons. Once
decided, anywhere, the buttons go and the outcome, who decided and when take their place; once an approved call ran,
what became of it (``status.execution``: ran, failed with its error, outcome unknown, not sent).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from agent_runtime.approvals import execution
from agent_runtime.bridges.requests import Ref, already_decided, owner_name, phase, ref_of
from agent_runtime.ui import held_questions

APPROVE = "gatehouse_approve"  # action_id of the Approve button
DENY = "gatehouse_deny"  # action_id of the Deny button: opens the reason dialog
ANSWER = "gatehouse_answer"  # action_id of a held AskUserQuestion's option buttons: answers it (a deny with the answer)
DENY_VIEW = "gatehouse_deny_reason"  # callback_id of the dialog (modal) that asks why
REASON_BLOCK, REASON_INPUT = "reason", "reason_input"
MAX_LABEL = 75  # characters of a button's text (Slack's limit)
MAX_ARGUMENTS = 2500  # characters of arguments shown (Slack: 3000 per text block)

_OUTCOME = {"Approved": ":white_check_mark: Approved", "Denied": ":no_entry: Denied", "Expired": ":hourglass: Expired",
            "Canceled": ":heavy_multiplication_x: Canceled", "Granted": ":white_check_mark: Granted",
            "Orphaned": ":warning: Orphaned"}


def votes_line(status: dict[str, Any]) -> str:
    """``1 of 2 approvals``, with who voted; empty before the runtime counted anything."""
    got, _, required = str(status.get("approvals") or "").partition("/")
    if not required:
        return ""
    counted = [v.get("by", "?") + (" (deny)" if v.get("action") == "Deny" else "")
               for v in status.get("votes") or [] if v.get("counted")]
    who = f" ({', '.join(counted)})" if counted else ""
    return f"{got} of {required} approval{'s' if required != '1' else ''}{who}"


def _arguments(spec: dict[str, Any]) -> str:
    text = json.dumps(spec.get("arguments") or {}, indent=1, sort_keys=True, ensure_ascii=False)
    if len(text) > MAX_ARGUMENTS:
        text = text[:MAX_ARGUMENTS] + "\n… (cut; the whole call: kubectl gatehouse describe)"
    return text.replace("```", "` ` `")


def _mrkdwn(text: str) -> str:
    """Slack's three control characters escaped, so an argument or a reason cannot mention @channel or link."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def summary(obj: dict[str, Any]) -> str:
    """The notification text (and what screen readers and old clients show)."""
    spec = obj.get("spec") or {}
    state = "waits for approval" if phase(obj) == "Pending" else phase(obj).lower()
    return _mrkdwn(f"{_owner(spec)}: {spec.get('tool', '?')} {state}")


def _owner(spec: dict[str, Any]) -> str:
    """``file-manager`` for an Agent's request, ``gateway files-gate`` for a gateway's held call."""
    kind, name = owner_name(spec)
    return name if kind == "Agent" else f"gateway {name}"


def blocks(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The message for one ToolApproval, as it stands."""
    spec, status, ref = obj.get("spec") or {}, obj.get("status") or {}, ref_of(obj)
    fields = [
        f"*{owner_name(spec)[0]}*\n{_mrkdwn(owner_name(spec)[1])} ({_mrkdwn(ref.namespace)})",
        f"*Tool*\n`{_mrkdwn(spec.get('tool', '?'))}`",
        f"*Asked by*\n{_mrkdwn(spec.get('requestedBy') or 'unknown')}",
        f"*Expires*\n{_mrkdwn(spec.get('expiresAt') or 'never')}",
    ]
    out: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": f"*{_mrkdwn(_owner(spec))}* wants to run "
                                                                   f"`{_mrkdwn(spec.get('tool', '?'))}`"}},
        {"type": "section", "fields": [{"type": "mrkdwn", "text": f} for f in fields]},
        {"type": "section", "text": {"type": "mrkdwn", "text": f"*Arguments*\n```{_mrkdwn(_arguments(spec))}```"}},
    ]
    redacted = spec.get("redacted") or []
    why = [f"*Why*: {_mrkdwn(spec.get('hint') or 'gated by the agent policy')}"]
    if redacted:
        why.append(f"*Redacted*: {_mrkdwn(', '.join(redacted))}")
    votes = votes_line(status)
    if votes:
        why.append(f"*Votes*: {_mrkdwn(votes)}")
    if phase(obj) == "Pending" and status.get("waitingFor"):
        why.append(f"*Waiting for*: {_mrkdwn(status['waitingFor'])}")
    out.append({"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(why)}})
    if phase(obj) == "Pending":
        out.extend(_question_blocks(obj, ref))
        out.append({"type": "actions", "block_id": "decide", "elements": [
            {"type": "button", "action_id": APPROVE, "style": "primary", "value": ref.value(),
             "text": {"type": "plain_text", "text": "Approve"}},
            {"type": "button", "action_id": DENY, "style": "danger", "value": ref.value(),
             "text": {"type": "plain_text", "text": "Deny"}},
        ]})
    else:
        out.append({"type": "section", "text": {"type": "mrkdwn", "text": outcome(obj)}})
        ran = execution_line(status)
        if ran:
            out.append({"type": "section", "text": {"type": "mrkdwn", "text": ran}})
    out.append({"type": "context", "elements": [{"type": "mrkdwn", "text": _mrkdwn(
        f"toolapproval {ref.namespace}/{ref.name} · request {ref.request_id}")}]})
    return out


def _asked(obj: dict[str, Any]) -> tuple[held_questions.Asked, ...]:
    """The questions of a held ``AskUserQuestion`` (empty for any other request): read as the inbox reads them."""
    spec = obj.get("spec") or {}
    arguments = spec.get("arguments")
    return held_questions.asked(str(spec.get("tool") or ""), arguments if isinstance(arguments, dict) else {})


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _question_blocks(obj: dict[str, Any], ref: Ref) -> list[dict[str, Any]]:
    """Each question of a held ``AskUserQuestion``, its options as buttons. A button carries only which question and
    option it is (:func:`answer_value`); the answer's text is made from the ToolApproval when clicked
    (:func:`answer_reason`), so a click can only ever choose one of the options the request shows."""
    out: list[dict[str, Any]] = []
    for q, asked in enumerate(_asked(obj)):
        head = f"*{_mrkdwn(asked.header)}*: " if asked.header else ""
        several = " _(several allowed: each click sends one)_" if asked.multi_select else ""
        lines = [f"{head}{_mrkdwn(asked.question)}{several}"]
        lines += [f"• *{_mrkdwn(o.label)}*{(' — ' + _mrkdwn(o.description)) if o.description else ''}"
                  for o in asked.options]
        out.append({"type": "section", "text": {"type": "mrkdwn", "text": _cut("\n".join(lines), 2900)}})
        out.append({"type": "actions", "block_id": f"answer-{q}", "elements": [
            {"type": "button", "action_id": f"{ANSWER}-{q}-{o}", "value": answer_value(ref, q, o),
             "text": {"type": "plain_text", "text": _cut(option.label, MAX_LABEL)},
             "confirm": {"title": {"type": "plain_text", "text": "Send this answer?"},
                         "text": {"type": "plain_text", "text": _cut(f"Answer “{asked.question}” with: {option.label}. "
                                                                     "The call is denied with this answer, which "
                                                                     "the agent reads instead of asking.", 300)},
                         "confirm": {"type": "plain_text", "text": "Send this answer"},
                         "deny": {"type": "plain_text", "text": "Cancel"}}}
            for o, option in enumerate(asked.options)]})
    return out


def answer_value(ref: Ref, question: int, option: int) -> str:
    """An option button's ``value``: the request (as :meth:`Ref.value`) and which question and option."""
    return json.dumps({"ref": ref.value(), "q": question, "o": option}, separators=(",", ":"))


def _json_object(text: str) -> dict[str, Any] | None:
    """``text`` read as a JSON object, or None: what a button's value or a dialog's metadata holds, as Slack sent it."""
    try:
        data = json.loads(text)
    except (TypeError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def parse_answer(text: str) -> tuple[Ref, int, int] | None:
    data = _json_object(text)
    if data is None:
        return None
    ref = Ref.parse(data.get("ref", ""))
    q, o = data.get("q"), data.get("o")
    if ref is None or type(q) is not int or type(o) is not int or q < 0 or o < 0:
        return None
    return ref, q, o


def answer_reason(obj: dict[str, Any], question: int, option: int) -> str | None:
    """The deny reason that answers ``question`` with ``option`` of the held ``AskUserQuestion`` ``obj``: the inbox's
    own text (:func:`agent_runtime.ui.held_questions.answer_reason`); None when ``obj`` asks no such question."""
    asked = _asked(obj)
    if question >= len(asked) or option >= len(asked[question].options):
        return None
    return held_questions.answer_reason(asked[question].question, asked[question].options[option].label)


def outcome(obj: dict[str, Any]) -> str:
    """``Denied by bob@example.com at 2026-…: not during the freeze (kubectl)``."""
    status = obj.get("status") or {}
    text = _OUTCOME.get(phase(obj), phase(obj))
    if status.get("decidedBy"):
        text += f" by {_mrkdwn(status['decidedBy'])}"
    if status.get("decidedAt"):
        text += f" at {_mrkdwn(status['decidedAt'])}"
    if status.get("source"):
        text += f" ({_mrkdwn(status['source'])})"
    if status.get("reason"):
        text += f": {_mrkdwn(status['reason'])}"
    return text


def execution_line(status: dict[str, Any]) -> str:
    """``:warning: Then the call was not sent: the MCP server could not be reached (…)``; empty before it ran."""
    found = status.get("execution")
    ran: dict[str, Any] = found if isinstance(found, dict) else {}
    said = execution.of_kube(str(ran.get("outcome") or ""))
    if said is None:
        return ""
    mark = ":white_check_mark:" if said == "ran" else ":warning:"
    return f"{mark} Then the call {_mrkdwn(execution.describe(said, str(ran.get('error') or '')))}"


def fingerprint(obj: dict[str, Any]) -> str:
    """A short hash of the message as it should look now: kept on the ToolApproval with the message's place, so that
    after a restart the bridge knows which messages are behind."""
    rendered = json.dumps([summary(obj), blocks(obj)], sort_keys=True)
    return hashlib.sha256(rendered.encode()).hexdigest()[:16]


def dialog_metadata(ref: Ref, channel: str, ts: str) -> str:
    """The dialog's ``private_metadata``: the request, and the message whose Deny button opened it."""
    return json.dumps({"ref": ref.value(), "channel": channel, "ts": ts}, separators=(",", ":"))


def parse_dialog_metadata(text: str) -> tuple[Ref, str, str] | None:
    data = _json_object(text)
    if data is None:
        return None
    ref = Ref.parse(data.get("ref", ""))
    if ref is None or not isinstance(data.get("channel"), str) or not isinstance(data.get("ts"), str):
        return None
    return ref, data["channel"], data["ts"]


def deny_dialog(ref: Ref, obj: dict[str, Any], channel: str, ts: str) -> dict[str, Any]:
    """The modal Deny opens: the reason is required (the model is told it)."""
    spec = obj.get("spec") or {}
    return {
        "type": "modal", "callback_id": DENY_VIEW, "private_metadata": dialog_metadata(ref, channel, ts),
        "title": {"type": "plain_text", "text": "Deny the call"},
        "submit": {"type": "plain_text", "text": "Deny"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": f"Deny `{_mrkdwn(spec.get('tool', '?'))}` for "
                                                                       f"*{_mrkdwn(_owner(spec))}*?"}},
            {"type": "input", "block_id": REASON_BLOCK, "optional": False,
             "label": {"type": "plain_text", "text": "Reason (the agent's model is told)"},
             "element": {"type": "plain_text_input", "action_id": REASON_INPUT, "multiline": True, "min_length": 1,
                         "max_length": 1000}},
        ],
    }


__all__ = [
    "ANSWER", "APPROVE", "DENY", "DENY_VIEW", "REASON_BLOCK", "REASON_INPUT", "Ref", "already_decided", "answer_reason",
    "answer_value", "blocks", "deny_dialog", "dialog_metadata", "execution_line", "fingerprint", "outcome",
    "parse_answer", "parse_dialog_metadata", "phase", "ref_of", "summary", "votes_line",
]
