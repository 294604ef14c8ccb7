"""Claude Code's hook shapes, as its hook reference documents them (../shared/FACTS.md): what a ``PreToolUse`` hook
receives (stdin for a ``command`` hook, the body for an ``http`` hook) and what it answers. Unknown input fields are
kept and ignored (Claude Code adds fields over time); the answer carries only documented fields."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

EVENT: Literal["PreToolUse"] = "PreToolUse"
ASK_USER_QUESTION = "AskUserQuestion"  # Claude Code's tool that asks the person at the terminal

PermissionDecision = Literal["allow", "deny", "ask"]


class PreToolUseInput(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    session_id: str = Field(min_length=1, max_length=256)
    transcript_path: str = ""
    cwd: str = Field(default="", max_length=4096)
    permission_mode: str = ""
    hook_event_name: Literal["PreToolUse"]
    tool_name: str = Field(min_length=1, max_length=256)
    tool_input: dict[str, Any]
    tool_use_id: str = ""


class QuestionOption(BaseModel):
    model_config = ConfigDict(extra="allow")

    label: str
    description: str = ""


class Question(BaseModel):
    """One of ``AskUserQuestion``'s ``questions``."""

    model_config = ConfigDict(extra="allow")

    question: str
    header: str = ""
    options: list[QuestionOption] = Field(default_factory=list)
    multiSelect: bool = False


class AskUserQuestionInput(BaseModel):
    model_config = ConfigDict(extra="allow")

    questions: list[Question] = Field(min_length=1)


class PreToolUseDecision(BaseModel):
    model_config = ConfigDict(extra="forbid")

    hookEventName: Literal["PreToolUse"] = EVENT
    permissionDecision: PermissionDecision
    permissionDecisionReason: str
    updatedInput: dict[str, Any] | None = None


class HookOutput(BaseModel):
    """The answer. ``hookSpecificOutput`` None: no decision, Claude Code's own permission rules apply."""

    model_config = ConfigDict(extra="forbid")

    hookSpecificOutput: PreToolUseDecision | None = None

    def to_json(self) -> str:
        return self.model_dump_json(exclude_none=True)


def answer(decision: PermissionDecision, reason: str, updated_input: dict[str, Any] | None = None) -> HookOutput:
    return HookOutput(hookSpecificOutput=PreToolUseDecision(
        permissionDecision=decision, permissionDecisionReason=reason, updatedInput=updated_input))


__all__ = ["ASK_USER_QUESTION", "EVENT", "AskUserQuestionInput", "HookOutput", "PermissionDecision", "PreToolUseDecision",
           "PreToolUseInput", "Question", "answer"]
