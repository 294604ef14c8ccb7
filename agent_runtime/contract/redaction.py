"""What of a gated call's arguments others may see: argument paths and secret-shaped values become ``«redacted»``.

A pure function, :func:`redact`, used wherever an approval leaves the runtime's database for a broader audience
(the ToolApproval and its Events, REST, the event stream, webhooks); the task's owner gets the real arguments in
the A2A pause, and the approval stays bound to them by their hash. The rules are ``spec.approval.redact``
(``AgentConfig.approval.redact``, fixed on a request when its call pauses):

- ``paths``: argument names or simple JSON paths — ``token``, ``headers.authorization``, ``$.headers.authorization``,
  ``items[0].secret``, ``items[*].secret``, ``*.password``, ``$["x.y"]``. Keys match without regard to case. The
  whole value there (a string, a number, an object) is replaced.
- ``patterns``: regular expressions searched in every string value; each match is replaced (only the group
  named ``secret`` when the pattern has one), so ``write «redacted» to creds.txt`` keeps its context.
- ``builtins`` (on by default): :data:`BUILTIN_PATTERNS`, the shapes of common secrets.

:class:`Redacted` carries the arguments as shown and which paths were redacted (``$.content``); :func:`unredact`
is what an edit of shown arguments goes through: redacted fields cannot be edited, the real values come back.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

REDACTED = "«redacted»"

# name -> pattern; a group named ``secret`` is the part replaced (else the whole match). Each starts where no
# letter or digit precedes it, so ``task-…`` is not an ``sk-…`` key.
BUILTIN_PATTERNS: dict[str, str] = {
    "api key (sk-…)": r"(?<![A-Za-z0-9])sk-[A-Za-z0-9_-]{16,}",
    "Stripe key (sk_live_…)": r"(?<![A-Za-z0-9])(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}",
    "GitHub token": r"(?<![A-Za-z0-9])(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})",
    "Slack token": r"(?<![A-Za-z0-9])xox[baprs]-[A-Za-z0-9-]{10,}",
    "AWS access key id": r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![0-9A-Z])",
    "Google API key": r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_-]{35}",
    "bearer token": r"(?<![A-Za-z0-9])[Bb][Ee][Aa][Rr][Ee][Rr]\s+(?P<secret>(?=[A-Za-z0-9._~+/-]*[0-9])[A-Za-z0-9._~+/-]{12,}=*)",
    "JWT": r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]+\.eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*",
    "PEM private key": r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?:[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY-----|[\s\S]*)",
    "password in a URL": r"(?<=://)(?P<secret>[^/\s:@]+:[^/\s@]+)(?=@)",
}


class Rules(Protocol):
    """``AgentConfig.approval.redact`` (:class:`agent_runtime.contract.agent_config.RedactConfig`), or anything shaped like it."""

    @property
    def paths(self) -> Sequence[str]: ...

    @property
    def patterns(self) -> Sequence[str]: ...

    @property
    def builtins(self) -> bool: ...


class _Any:
    """The ``*`` of a path: any key of an object, any item of a list."""

    def __repr__(self) -> str:
        return "*"


ANY = _Any()
Step = str | int | _Any
Location = tuple[str | int, ...]  # a concrete place in the arguments: keys and list indexes

_TOKEN = re.compile(r"""\.?(?P<key>[^.\[\]'"]+)|\[(?P<index>[0-9]+|\*)\]|\[(?:'(?P<sq>[^']*)'|"(?P<dq>[^"]*)")\]""")
_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def parse_path(text: str) -> tuple[Step, ...]:
    """``$.headers.authorization`` → ``("headers", "authorization")``; raise ValueError saying what is wrong."""
    rest = text.strip()
    if rest.startswith("$"):
        rest = rest[1:]
        if rest and rest[0] not in ".[":
            raise ValueError(f"{text!r}: '$' must be followed by '.' or '['")
        rest = rest[1:] if rest.startswith(".") else rest
    if not rest:
        raise ValueError(f"{text!r} names no argument: give an argument name or a path like headers.authorization")
    steps: list[Step] = []
    at = 0
    while at < len(rest):
        found = _TOKEN.match(rest, at)
        if found is None or (found["key"] is not None and steps and not found.group(0).startswith(".")):
            raise ValueError(f"{text!r}: cannot read the path at {rest[at:]!r} (use name.name, [0], [*] or ['a.b'])")
        if found["key"] is not None:
            key = found["key"].strip()
            if not key:
                raise ValueError(f"{text!r}: an empty name at {rest[at:]!r}")
            steps.append(ANY if key == "*" else key)
        elif found["index"] is not None:
            steps.append(ANY if found["index"] == "*" else int(found["index"]))
        else:
            steps.append(found["sq"] if found["sq"] is not None else found["dq"])
        at = found.end()
    return tuple(steps)


def render_path(location: Location) -> str:
    """A concrete location as a path: ``$.headers.authorization``, ``$.items[0]``, ``$["x.y"]``."""
    out = "$"
    for step in location:
        if isinstance(step, int):
            out += f"[{step}]"
        elif _PLAIN_KEY.match(step):
            out += f".{step}"
        else:
            out += f"[{json.dumps(step, ensure_ascii=False)}]"
    return out


@dataclass(frozen=True)
class _Compiled:
    paths: tuple[tuple[Step, ...], ...]
    patterns: tuple[re.Pattern[str], ...]


@functools.lru_cache(maxsize=256)
def _compile(paths: tuple[str, ...], patterns: tuple[str, ...], builtins: bool) -> _Compiled:
    regexes = (*BUILTIN_PATTERNS.values(), *patterns) if builtins else patterns
    return _Compiled(tuple(parse_path(p) for p in paths), tuple(re.compile(r) for r in regexes))


def _rules(rules: Rules | None) -> _Compiled:
    if rules is None:
        return _compile((), (), True)
    return _compile(tuple(rules.paths), tuple(rules.patterns), rules.builtins)


def check(rules: Rules) -> None:
    """Raise ValueError (naming the entry) if a path cannot be read or a pattern does not compile."""
    for path in rules.paths:
        parse_path(path)
    for pattern in rules.patterns:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"invalid regex {pattern!r}: {exc}") from None


@dataclass(frozen=True)
class Redacted:
    """The arguments as shown, and where something was replaced (``paths``, rendered; ``locations``, concrete)."""

    args: dict[str, Any]
    locations: tuple[Location, ...] = ()

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(render_path(location) for location in self.locations)


def _locate(value: Any, steps: tuple[Step, ...], at: Location) -> Iterator[Location]:
    if not steps:
        yield at
        return
    step, rest = steps[0], steps[1:]
    if isinstance(value, Mapping) and not isinstance(step, int):
        for key in value:
            if step is ANY or (isinstance(step, str) and str(key).casefold() == step.casefold()):
                yield from _locate(value[key], rest, (*at, key))
    elif isinstance(value, list) and not isinstance(step, str):
        for index, item in enumerate(value):
            if step is ANY or step == index:
                yield from _locate(item, rest, (*at, index))


def _replace(match: re.Match[str]) -> str:
    whole = match.group(0)
    if not whole:
        return whole  # a pattern that matches nothing somewhere hides nothing
    if "secret" in match.re.groupindex and match.start("secret") >= 0:
        start, end = match.start("secret") - match.start(), match.end("secret") - match.start()
        return whole[:start] + REDACTED + whole[end:]
    return REDACTED


def redact_text(text: str, rules: Rules | None = None) -> str:
    """``text`` with every match of the rules' patterns (the built-in ones by default) replaced."""
    for pattern in _rules(rules).patterns:
        text = pattern.sub(_replace, text)
    return text


def redact(args: Mapping[str, Any], rules: Rules | None = None) -> Redacted:
    """The arguments with the rules' paths and pattern matches replaced by ``«redacted»``; ``rules`` None: the
    built-in patterns only. ``args`` is not changed."""
    compiled = _rules(rules)
    whole = {location for steps in compiled.paths for location in _locate(args, steps, ())}
    found: list[Location] = []

    def scrub(value: Any, at: Location) -> Any:
        if at in whole:
            found.append(at)
            return REDACTED
        if isinstance(value, Mapping):
            return {key: scrub(item, (*at, key)) for key, item in value.items()}
        if isinstance(value, list):
            return [scrub(item, (*at, index)) for index, item in enumerate(value)]
        if isinstance(value, str):
            shown = value
            for pattern in compiled.patterns:
                shown = pattern.sub(_replace, shown)
            if shown != value:
                found.append(at)
            return shown
        return value

    shown = {key: scrub(value, (key,)) for key, value in args.items()}
    return Redacted(shown, tuple(found))


class RedactedEdit(ValueError):
    """An edit of shown arguments changed or removed a redacted field; ``paths`` names them."""

    def __init__(self, paths: Sequence[str]) -> None:
        self.paths = tuple(paths)
        super().__init__(f"redacted fields cannot be edited: {', '.join(self.paths)}")


def _get(value: Any, location: Location) -> tuple[bool, Any]:
    for step in location:
        if isinstance(value, Mapping) and isinstance(step, str) and step in value:
            value = value[step]
        elif isinstance(value, list) and isinstance(step, int) and 0 <= step < len(value):
            value = value[step]
        else:
            return False, None
    return True, value


def _set(value: Any, location: Location, new: Any) -> None:
    for step in location[:-1]:
        value = value[step]
    value[location[-1]] = new


def unredact(edited: Mapping[str, Any], real: Mapping[str, Any], shown: Redacted) -> dict[str, Any]:
    """Arguments an approver edited from ``shown``, with the real values back where they were redacted. Raise
    :class:`RedactedEdit` when a redacted field was changed or removed: nobody edits what they cannot see."""
    changed = []
    out: dict[str, Any] = json.loads(json.dumps(edited, default=str))
    for location in shown.locations:
        present, value = _get(out, location)
        if not present or value != _get(shown.args, location)[1]:
            changed.append(render_path(location))
            continue
        _set(out, location, _get(real, location)[1])
    if changed:
        raise RedactedEdit(changed)
    return out


__all__ = [
    "ANY", "BUILTIN_PATTERNS", "REDACTED", "Redacted", "RedactedEdit", "Rules", "check", "parse_path", "redact",
    "redact_text", "render_path", "unredact",
]
