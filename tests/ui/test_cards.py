"""What a request looks like on the page: arguments rendered readably, filters, countdown text. Pure."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agent_runtime.ui.cards import FOLD_AT, Card, Filters, fields, last_user_text, remaining


def card(**overrides: object) -> Card:
    base: dict[str, object] = dict(id="r1", agent="files", tool="delete_file", args={"path": "/a"}, hint="gated",
                                   status="approved", created_at=1000.0, expires_at=2000.0, decided_at=1500.0,
                                   decided_by="alice")
    return Card(**{**base, **overrides})  # type: ignore[arg-type]


def test_arguments_become_rows_paths_marked_long_values_folded_redactions_named() -> None:
    rows = {f.name: f for f in fields({
        "path": "/srv/data/old.txt", "content": "x" * (FOLD_AT + 1), "note": "hello world", "options": {"force": True},
        "target": "reports/2026/q3.csv", "token": "«redacted»",
    }, redacted=["token"])}
    assert rows["path"].path and rows["target"].path and not rows["note"].path
    assert rows["content"].folded and not rows["note"].folded
    assert rows["options"].text == '{\n  "force": true\n}'
    assert rows["token"].redacted and not rows["path"].redacted
    assert not fields({"path": "two\nlines"})[0].path


@given(st.dictionaries(st.text(min_size=1, max_size=10), st.text(max_size=400), max_size=5))
def test_every_argument_is_shown_in_full_whatever_it_is(args: dict[str, str]) -> None:
    rows = fields(args)
    assert [r.name for r in rows] == list(args)
    assert all(r.text == args[r.name] for r in rows)  # folded is a presentation choice; nothing is cut
    assert all(r.folded == (len(r.text) > FOLD_AT or r.text.count("\n") > 3) for r in rows)


def test_history_filters() -> None:
    now = 10_000.0
    assert Filters().admits(card(), now)
    assert not Filters().admits(card(status="pending"), now)  # the history shows decided requests only
    assert Filters(outcome="approved").admits(card(), now) and not Filters(outcome="denied").admits(card(), now)
    assert Filters(decided_by="ALI").admits(card(), now) and not Filters(decided_by="bob").admits(card(), now)
    assert Filters(agent="files").admits(card(), now) and not Filters(agent="db").admits(card(), now)
    assert Filters(since_hours=3).admits(card(decided_at=now - 3600), now)
    assert not Filters(since_hours=1).admits(card(decided_at=now - 7200), now)


def test_countdown_text_and_progress() -> None:
    assert remaining(100.0, 100.0) == "expired" and remaining(100.0, 101.0) == "expired"
    assert remaining(145.0, 100.0) == "45s" and remaining(100.0 + 252, 100.0) == "4m 12s"
    assert remaining(100.0 + 7300, 100.0) == "2h 1m"
    assert card(required=2, approvals=1).progress == "1 of 2" and card().progress == ""
    assert card(name="ta-1", namespace="team").key == "team/ta-1" and card().key == "r1"


def test_the_context_is_the_last_thing_a_person_wrote() -> None:
    assert last_user_text([("user", "delete old.txt"), ("agent", "ok?"), ("user", ""), ("agent", "paused")]) == "delete old.txt"
    assert last_user_text([("agent", "hi")]) == ""
