"""Create or patch: make one child match its desired state, writing only when the fields we own differ.

"Owned" means the fields the builders render. The API server adds its own (defaults such as
``imagePullPolicy``, ``clusterIP``, probe timeouts; ``uid``, ``resourceVersion`` and ``status``), so the
comparison is a recursive subset test: every key we render must hold the value we render, lists must have
the same length with each item matching, and a rendered empty mapping must be empty (so a removed
``resources`` block is really removed). Anything else on the object is left alone.

A resync over unchanged inputs therefore reads each child once and writes nothing.

For an Agent that has never been applied, its children almost certainly do not exist yet: reading each one
first would cost a 404 per child. ``create_first`` sends the create straight away and falls back to the
read-compare-patch path only when the API answers 409 (the child is already there).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from gatehouse_operator.kube import ApiException, ChildrenApi

__all__ = ["Applied", "ensure", "owned_equal"]

Action = Literal["created", "patched", "unchanged", "replaced", "deleted"]


@dataclass(frozen=True)
class Applied:
    """What :func:`ensure` did to one child, and the object as the API server returned it."""

    kind: str
    name: str
    action: Action
    obj: dict[str, Any]

    def __str__(self) -> str:
        return f"{self.action} {self.kind}/{self.name}"


def owned_equal(desired: Any, actual: Any) -> bool:
    """Whether ``actual`` already holds every value ``desired`` renders (see the module docstring)."""
    if isinstance(desired, dict):
        if not isinstance(actual, dict):
            return not desired and actual is None
        if not desired:
            return not actual
        return all(owned_equal(value, actual.get(key)) for key, value in desired.items())
    if isinstance(desired, list):
        return (
            isinstance(actual, list)
            and len(desired) == len(actual)
            and all(owned_equal(d, a) for d, a in zip(desired, actual, strict=True))
        )
    return bool(desired == actual)


def ensure(kube: ChildrenApi, desired: dict[str, Any], *, create_first: bool = False) -> Applied:
    """Create ``desired`` when missing, merge-patch it when an owned field differs, else do nothing.

    With ``create_first`` the create is tried before any read (see the module docstring).
    """
    kind, meta = desired["kind"], desired["metadata"]
    if create_first:
        try:
            return Applied(kind, meta["name"], "created", kube.create(desired))
        except ApiException as exc:
            if exc.status != 409:
                raise
    actual = kube.get(kind, meta.get("namespace"), meta["name"])
    if actual is None:
        return Applied(kind, meta["name"], "created", kube.create(desired))
    if owned_equal(desired, actual):
        return Applied(kind, meta["name"], "unchanged", actual)
    return Applied(kind, meta["name"], "patched", kube.patch(desired))
