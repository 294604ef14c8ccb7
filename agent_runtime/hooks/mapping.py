"""Pure translation between an agent CLI's tool call and Gatehouse: the call onto the gateway's policy (the same
:func:`agent_runtime.contract.policy.evaluate` as an Agent's calls), and a decided request onto the CLI's answer.

The policy names the CLI's own tools, as they arrive in ``tool_name``: ``Bash`` (rules on ``command``), ``Edit`` and
``Write`` (globs on ``file_path``), ``mcp__<server>__<tool>``. So a rule reads as Claude Code's own matchers do::

    rules:
      - {tool: Bash, when: {arg: command, regex: 'git\\s+push\\s+.*(--force|-f)\\b'}, action: require}
      - {tool: Write, when: {arg: file_path, glob: '**/.env*'}, action: deny}
"""

from __future__ import annotations

from typing import Literal

from pydantic import ValidationError

from agent_runtime.approvals import ApprovalRecord
from agent_runtime.contract import policy
from agent_runtime.hooks.shapes import ASK_USER_QUESTION, AskUserQuestionInput, HookOutput, PreToolUseInput, answer
from agent_runtime.ui import held_questions

MCP_PREFIX = "mcp__"
OnTimeout = Literal["deny", "approve", "ask"]


def mcp_server(tool_name: str) -> str | None:
    """``mcp__<server>__<tool>`` → ``<server>``; a built-in tool (Bash, Edit, …) → None."""
    if not tool_name.startswith(MCP_PREFIX):
        return None
    server, sep, tool = tool_name[len(MCP_PREFIX):].partition("__")
    return server if sep and server and tool else None


def evaluate(config: policy.PolicySource, call: PreToolUseInput) -> policy.Decision:
    """The policy's verdict on the call, with the tool named as the CLI names it."""
    return policy.evaluate(config, mcp_server(call.tool_name), call.tool_name, dict(call.tool_input))


def card_hint(decision: policy.Decision, call: PreToolUseInput) -> str:
    """What the card (ToolApproval, REST, inbox) says besides the arguments: why it waits, and where it was asked —
    the CLI's session and working directory, so an approver knows which terminal and repository it is."""
    where = f"Claude Code session {call.session_id}, cwd {call.cwd or '(not given)'}"
    if call.tool_name == ASK_USER_QUESTION and (asked := _questions(call)):
        return f"{asked} — answer by denying with the answer as the reason; approve to let the terminal ask — {where}"
    return f"{decision.hint} — {where}"


def _questions(call: PreToolUseInput) -> str:
    """``AskUserQuestion``'s questions and options, as the card shows them ("" when the input is not that shape)."""
    try:
        asked = AskUserQuestionInput.model_validate(call.tool_input)
    except ValidationError:
        return ""
    return "; ".join(f"{q.question} [{' | '.join(o.label for o in q.options)}{' (several)' if q.multiSelect else ''}]"
                     for q in asked.questions)


def unheld(decision: policy.Decision, tool: str) -> HookOutput:
    """The answer to a call that is not held: refused by a rule, allowed by a rule, or not gated at all (no decision:
    the CLI's own permission rules apply, as without the hook)."""
    if decision.verdict == "deny":
        return answer("deny", f"Gatehouse refused {tool}: {decision.hint}.")
    if decision.verdict == "allow" and decision.rule:
        return answer("allow", f"Gatehouse allowed {tool}: {decision.hint}.")
    return HookOutput()


def decided(record: ApprovalRecord, on_timeout: OnTimeout) -> HookOutput:
    """The answer to a held call once decided: approved → allow (with ``updatedInput`` when an approver edited the
    arguments); denied → deny with who and why (Claude reads it); timed out → ``onTimeout`` (``ask`` hands the
    decision to the person at the terminal). An ``AskUserQuestion`` answered in Gatehouse is a deny carrying the
    answer, so Claude reads it instead of asking at the terminal."""
    if record.status == "approved":
        by = "onTimeout: approve" if record.source == "timeout" else f"approved ({record.source or 'an approver'})"
        if record.original_args is not None:
            return answer("allow", f"Gatehouse: {by}, with arguments edited by {record.edited_by or 'an approver'}.",
                          dict(record.args))
        return answer("allow", f"Gatehouse: {by}.")
    if record.status == "expired" or record.source == "timeout":
        if on_timeout == "ask":
            return answer("ask", f"Gatehouse: nobody decided request {record.id} within the approval timeout; "
                                 "decide here.")
        return answer("deny", f"Gatehouse: nobody decided request {record.id} for {record.tool} within the approval "
                              "timeout, so it was denied. It was not run.")
    by = record.source or "an approver"
    if record.tool == ASK_USER_QUESTION and record.reason:
        # The question was answered in Gatehouse: Claude reads the answer as the deny's reason instead of asking. An
        # option picked in the inbox or Slack already says how it was given; a reason typed over REST is introduced.
        said = record.reason if held_questions.is_answer(record.reason) else \
            f"The user answered this question through Gatehouse: {record.reason}"
        return answer("deny", f"{said.rstrip('.')} ({by}). Continue with that answer; do not ask it again.")
    return answer("deny", f"Gatehouse: {record.tool} was denied ({by}): {record.reason or 'no reason given'}. "
                          "It was not run.")


__all__ = ["MCP_PREFIX", "OnTimeout", "card_hint", "decided", "evaluate", "mcp_server", "unheld"]
