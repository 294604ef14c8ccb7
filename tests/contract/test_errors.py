"""``without_repeats``: a wrapped error's message said once (condition and /readyz texts)."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from agent_runtime.contract.errors import without_repeats


def test_a_prefix_repeated_by_nested_wrappers_is_said_once() -> None:
    said = "Failed to create MCP session"
    text = f"MCP server t: ConnectionError: {said}: {said}: All connection attempts failed"
    assert without_repeats(text) == f"MCP server t: ConnectionError: {said}: All connection attempts failed"
    assert without_repeats("a: b: a: b") == "a: b: a: b"  # only neighbours repeat
    assert without_repeats("plain") == "plain" and without_repeats("") == ""


segments = st.lists(st.sampled_from(["x", "Failed to create MCP session", "y: z", ""]), max_size=8)


@given(segments)
def test_it_is_idempotent_and_never_leaves_a_segment_twice_in_a_row(parts: list[str]) -> None:
    once = without_repeats(": ".join(parts))
    assert without_repeats(once) == once
    split = once.split(": ")
    assert all(a != b for a, b in itertools.pairwise(split))
