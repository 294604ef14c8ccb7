"""What a request looks like on the page: arguments rendered readably, filters, countdown text. Pure."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agent_runtime.ui.cards import (
    FOLD_AT,
    ONE_LINE_AT,
    Card,
    Filters,
    TaskGroup,
    by_task,
    fields,
    hidden_fields,
    last_user_text,
    remaining,
    span,
)
from agent_runtime.ui.pages import _environment


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


def test_redacted_paths_as_the_runtime_renders_them_mark_their_top_level_field() -> None:
    assert hidden_fields(["$.token", "$.headers.authorization", '$["x.y"]', "$.items[0].secret", "plain"]) == {
        "token", "headers", "x.y", "items", "plain"}
    rows = {f.name: f for f in fields({"token": "«redacted»", "headers": {"authorization": "«redacted»"}, "path": "a"},
                                      redacted=["$.token", "$.headers.authorization"])}
    assert rows["token"].redacted and rows["headers"].redacted and not rows["path"].redacted


def test_the_edit_form_reads_strings_as_typed_and_everything_else_as_json() -> None:
    rows = {f.name: f for f in fields({"path": "a.txt", "count": 3, "force": True, "tags": ["a"], "body": "x\ny",
                                       "long": "y" * (ONE_LINE_AT + 1)})}
    assert [(n, r.kind, r.multiline) for n, r in rows.items()] == [
        ("path", "string", False), ("count", "json", False), ("force", "json", False), ("tags", "json", True),
        ("body", "string", True), ("long", "string", True)]
    assert (rows["count"].text, rows["force"].text, rows["tags"].text) == ("3", "true", '[\n  "a"\n]')


def test_an_editable_card_renders_its_form_prefilled_and_a_redacted_field_read_only() -> None:
    macro = _environment().from_string('{% from "_card.html" import approval %}{{ approval(c, 0) }}')
    args = {"path": "a.txt", "body": "\nstarts with a newline", "token": "«redacted»", "n": {"k": 1}}
    html = macro.render(c=card(status="pending", args=args, redacted=["$.token"], editable=True, args_hash="h1"))
    assert 'class="edit-form" hidden data-args-hash="h1"' in html and 'data-action="edit"' in html
    assert 'data-arg="path" data-kind="string" value="a.txt"' in html
    assert 'data-arg="body" data-kind="string" rows="2" spellcheck="false">\n\nstarts with a newline</textarea>' in html
    assert 'data-arg="token" data-kind="string" value="«redacted»" readonly' in html
    assert 'data-arg="n" data-kind="json" rows="3" spellcheck="false">\n{\n  &#34;k&#34;: 1\n}</textarea>' in html
    plain = macro.render(c=card(status="pending", args=args))  # a card no policy lets anyone edit: no form
    assert "edit-form" not in plain and 'data-action="edit"' not in plain


def test_an_edited_card_shows_who_changed_what_and_the_value_as_asked_for() -> None:
    macro = _environment().from_string('{% from "_card.html" import approval %}{{ approval(c, 0, full=True) }}')
    html = macro.render(c=card(args={"path": "b.txt", "content": "x"}, edited_by="alice", changed=["path"],
                               original_args={"path": "a.txt", "content": "x"}))
    assert "Edited by</span> <b>alice</b>: changed path." in html
    edited = html[html.index('data-testid="edited"'):html.index("</div>", html.index('data-testid="edited"'))]
    assert '<code class="path">a.txt</code>' in edited and "content" not in edited


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


def test_the_calls_of_one_task_are_gathered_where_the_first_stands() -> None:
    a, b, c, d = (card(id=i, status="pending", task_id=t) for i, t in (("a", "t1"), ("b", "t2"), ("c", "t1"), ("d", "")))
    lone = card(id="e", status="pending", task_id="t3", task_waits=2)  # its sibling is someone else's to see
    grouped = by_task([a, b, c, d, lone])
    assert [g.cards if isinstance(g, TaskGroup) else g for g in grouped] == [(a, c), b, d, (lone,)]
    assert [g.waits for g in grouped if isinstance(g, TaskGroup)] == [2, 2]


def test_approve_for_this_session_says_its_scope_with_the_agents_grant_ttl() -> None:
    macro = _environment().from_string('{% from "_card.html" import approval %}{{ approval(c, 0) }}')
    html = macro.render(c=card(status="pending", session_allowed=True, session_ttl=1800.0))
    assert ("later calls of <code>delete_file</code> with these exact arguments in this conversation run "
            "without asking, for 30 min.") in html
    assert 'aria-describedby="scope-r1"' in html and 'id="scope-r1"' in html
    assert span(3600) == "1 h" and span(5400) == "1 h 30 min" and span(45) == "45 s" and span(0) == "0 s"


def test_the_history_shows_the_arguments_as_approvers_see_them() -> None:
    page = _environment().get_template("history.html")
    shown = card(args={"path": "/srv/a.txt", "token": "«redacted»", "body": "x" * 200}, redacted=["$.token"])
    html = page.render(cards=[shown], filters=Filters(), since="", source=type("S", (), {"title": "t", "agents": ()})(),
                       viewer=type("V", (), {"id": "alice"})(), csrf="", now=0, path="/ui/history")
    args = html[html.index('data-testid="history-args"'):html.index("</td>", html.index('data-testid="history-args"'))]
    assert "<code>/srv/a.txt</code>" in args
    assert 'token</span> <span class="tag">redacted</span> <code>«redacted»</code>' in args
    assert f"<code>{'x' * 80}…</code>" in args  # long values cut short: the detail page has them in full
