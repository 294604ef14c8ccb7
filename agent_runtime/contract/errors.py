"""Field-pathed problems, shared by the translator, the manifest loader and the operator's status."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import ValidationError


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the input. ``path`` is a dotted field path such as ``spec.tools[0].mcpServer``."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class TranslationError(ValueError):
    """Every problem found, not just the first, so a user fixes a manifest in one round trip."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("; ".join(str(p) for p in problems))


def without_repeats(text: str) -> str:
    """An error message with a prefix repeated by nested wrappers said once: ``"Failed to create MCP session: Failed to
    create MCP session: All connection attempts failed"`` → ``"Failed to create MCP session: All connection attempts
    failed"`` (libraries that wrap an exception often put the wrapped one's message after their own, which is the same)."""
    parts = text.split(": ")
    kept: list[str] = []
    for part in parts:
        if not kept or part != kept[-1]:
            kept.append(part)
    return ": ".join(kept)


def format_loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def problems_from_validation(exc: ValidationError, prefix: str = "") -> list[Problem]:
    problems = []
    for err in exc.errors():
        path = format_loc(tuple(err["loc"]))
        # pydantic's messages start with "Value error, " for our own validators; drop the noise.
        message = err["msg"].removeprefix("Value error, ")
        problems.append(Problem(f"{prefix} {path}".strip(), message))
    return problems
