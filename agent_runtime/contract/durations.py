"""Kubernetes-style durations (``90s``, ``15m``, ``1h30m``, ``500ms``) to seconds."""

from __future__ import annotations

import re

_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_WHOLE = re.compile(r"^(?:\d+(?:\.\d+)?(?:ms|s|m|h|d))+$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}

DURATION_PATTERN = _WHOLE.pattern


def parse_duration(text: str) -> float:
    """Return the duration in seconds; raise ``ValueError`` with an example of a valid value."""
    value = text.strip()
    if not _WHOLE.match(value):
        raise ValueError(f"invalid duration {text!r}: use a number with a unit, e.g. 30s, 15m, 1h30m")
    seconds = sum(float(n) * _UNIT_SECONDS[u] for n, u in _PART.findall(value))
    if seconds <= 0:
        raise ValueError(f"invalid duration {text!r}: must be greater than zero")
    return seconds
