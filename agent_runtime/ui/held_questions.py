"""Claude Code's question tool (``AskUserQuestion``) as an inbox question (issue 39 item 5). Pure.

A held ``AskUserQuestion`` call carries the questions in its input (``{"questions": [{"question", "header",
"options": [{"label", "description"}], "multiSelect"}]}``, as Claude Code's tool documents it). The inbox shows each
question with its options as buttons; choosing one and confirming denies the held call with :func:`answer_reason` as
the reason, which the hook hands to Claude as the ``deny`` reason: Claude reads the answer instead of asking at the
terminal. An input that is not that shape shows as a plain held call (approve lets the terminal ask)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

TOOL = "AskUserQuestion"


class Option(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    label: str = Field(min_length=1, max_length=500)
    description: str = ""


class Asked(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)

    question: str = Field(min_length=1, max_length=2000)
    header: str = ""
    options: tuple[Option, ...] = Field(min_length=1, max_length=20)
    multi_select: bool = Field(default=False, alias="multiSelect")


class _Input(BaseModel):
    model_config = ConfigDict(extra="ignore")

    questions: tuple[Asked, ...] = Field(min_length=1, max_length=10)


def asked(tool: str, tool_input: Mapping[str, Any]) -> tuple[Asked, ...]:
    """The questions of a held ``AskUserQuestion`` call; empty for any other call or another shape."""
    if tool != TOOL:
        return ()
    try:
        return _Input.model_validate(dict(tool_input)).questions
    except ValidationError:
        return ()


ANSWERED = "The user answered in Gatehouse instead of at the terminal."


def answer_reason(question: str, label: str) -> str:
    """The deny reason that carries the answer (what Claude reads)."""
    return f"{ANSWERED} To “{question}” they answered: {label}"


def is_answer(reason: str) -> bool:
    """``reason`` is an option picked in the inbox or Slack (:func:`answer_reason`): it already says how it was given."""
    return reason.startswith(ANSWERED)


__all__ = ["ANSWERED", "TOOL", "Asked", "Option", "answer_reason", "asked", "is_answer"]
