"""The registry's routing rule (pauses/registry.py ``current``), pure: which kind a message on a paused task is for."""

from __future__ import annotations

from dataclasses import dataclass

from agent_runtime.pauses.kind import Internal
from agent_runtime.pauses.registry import current


class _Ask(Internal):
    pass


class _Relay(Internal):
    pass


@dataclass
class _Kind:
    name: str
    internal_type: type[Internal]


@dataclass
class _Row:
    created_at: float
    open: bool = False


@dataclass
class _Approval:
    created_at: float
    status: str = "approved"


RELAY, ASK = _Kind("delegation", _Relay), _Kind("question", _Ask)
KINDS = [RELAY, ASK]


def test_an_internal_verdict_goes_to_its_kind_and_approvals_own_to_approvals() -> None:
    assert current(KINDS, [[], []], [], _Ask()) is ASK  # type: ignore[arg-type]
    assert current(KINDS, [[], []], [], Internal()) is None  # type: ignore[arg-type]


def test_a_pending_approval_wins_then_an_open_pause() -> None:
    rows = [[_Row(5.0)], [_Row(1.0, open=True)]]
    assert current(KINDS, rows, [_Approval(9.0, "pending")], None) is None  # type: ignore[arg-type]
    assert current(KINDS, rows, [_Approval(9.0)], None) is ASK  # type: ignore[arg-type]


def test_nothing_open_the_last_pause_finishes_the_task_ties_to_the_kind_registered_first() -> None:
    assert current(KINDS, [[_Row(2.0)], [_Row(3.0)]], [_Approval(1.0)], None) is ASK  # type: ignore[arg-type]
    assert current(KINDS, [[_Row(2.0)], [_Row(1.0)]], [_Approval(4.0)], None) is None  # type: ignore[arg-type]
    assert current(KINDS, [[_Row(3.0)], [_Row(3.0)]], [_Approval(3.0)], None) is RELAY  # type: ignore[arg-type]
    assert current(KINDS, [[], [_Row(3.0)]], [_Approval(3.0)], None) is ASK  # type: ignore[arg-type]
    assert current(KINDS, [[], []], [], None) is None  # type: ignore[arg-type]
