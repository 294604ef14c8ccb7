"""Redaction (agent_runtime/contract/redaction.py): paths, patterns, the built-in secret shapes, and edits of shown arguments.

Property tests: no built-in secret shape survives wherever it sits in the arguments, text without one is never
touched, and redacting twice changes nothing more.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from agent_runtime.contract import redaction
from agent_runtime.contract.agent_config import RedactConfig
from agent_runtime.contract.redaction import REDACTED, RedactedEdit, parse_path, redact, redact_text, unredact

SK = "sk-live-4eC39HqLyjWDarjtT1zdp7dc"


def rules(*paths: str, patterns: tuple[str, ...] = (), builtins: bool = True) -> RedactConfig:
    return RedactConfig(paths=list(paths), patterns=list(patterns), builtins=builtins)


# -- the built-in secret shapes -----------------------------------------------------------------------------------

EXAMPLES = {
    "api key (sk-…)": (f"write {SK} to creds.txt", f"write {REDACTED} to creds.txt"),
    "Stripe key (sk_live_…)": ("key=sk_live_51H8abcdefghijklmnopqrst", f"key={REDACTED}"),
    "GitHub token": ("ghp_0123456789abcdefghijABCDEFGHIJ012345 x", f"{REDACTED} x"),
    "Slack token": ("xoxb-1234567890-abcdefghij", REDACTED),
    "AWS access key id": ("aws AKIAIOSFODNN7EXAMPLE.", f"aws {REDACTED}."),
    "Google API key": ("AIzaSyA-0123456789abcdefghijklmnopqrstu", REDACTED),
    "bearer token": ("Authorization: Bearer abc123def456ghi789", f"Authorization: Bearer {REDACTED}"),
    "JWT": ("t=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk",
            f"t={REDACTED}"),
    "PEM private key": ("a\n-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nIBAAKC\n-----END RSA PRIVATE KEY-----\nb",
                        f"a\n{REDACTED}\nb"),
    "password in a URL": ("postgres://app:s3cr3t-pw@db:5432/x", f"postgres://{REDACTED}@db:5432/x"),
}


def test_every_built_in_shape_has_an_example() -> None:
    assert set(EXAMPLES) == set(redaction.BUILTIN_PATTERNS)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_a_built_in_shape_is_redacted_in_place(name: str) -> None:
    text, shown = EXAMPLES[name]
    assert redact_text(text) == shown
    out = redact({"content": text})
    assert out.args == {"content": shown} and out.paths == ("$.content",)


@pytest.mark.parametrize("text", [
    "task-0123456789abcdefghij",  # 'sk-' inside a word is no key
    "the bearer of good news",  # no digit, too short: words, not a token
    "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----",
    "https://example.com/path:with@colon",
    "AKIA0123",
])
def test_text_that_only_looks_a_little_like_a_secret_is_left_alone(text: str) -> None:
    assert redact_text(text) == text


def test_an_unterminated_private_key_is_redacted_to_the_end() -> None:
    assert redact_text("key: -----BEGIN PRIVATE KEY-----\nMIIEv...") == f"key: {REDACTED}"


def test_builtins_false_turns_the_built_in_shapes_off() -> None:
    assert redact({"k": SK}, rules(builtins=False)).args == {"k": SK}
    assert redact({"k": SK}, rules()).args == {"k": REDACTED}
    assert redact({"k": SK}).args == {"k": REDACTED}  # no rules: the built-in shapes


# -- paths --------------------------------------------------------------------------------------------------------


def test_paths_replace_the_whole_value_and_say_where() -> None:
    args: dict[str, Any] = {
        "url": "https://api", "token": 1234, "headers": {"Authorization": "Basic abc", "Accept": "json"},
        "items": [{"secret": {"a": 1}, "name": "x"}, {"secret": "s2"}], "x.y": "dotted", "nested": {"password": "p"},
    }
    before = json.dumps(args, sort_keys=True)
    out = redact(args, rules("TOKEN", "$.headers.authorization", "items[*].secret", "$['x.y']", "*.password", "nope.x"))
    assert out.args == {
        "url": "https://api", "token": REDACTED, "headers": {"Authorization": REDACTED, "Accept": "json"},
        "items": [{"secret": REDACTED, "name": "x"}, {"secret": REDACTED}], "x.y": REDACTED, "nested": {"password": REDACTED},
    }
    assert out.paths == ("$.token", "$.headers.Authorization", "$.items[0].secret", "$.items[1].secret", '$["x.y"]',
                         "$.nested.password")
    assert json.dumps(args, sort_keys=True) == before  # the real arguments are not touched


def test_an_index_selects_one_item_and_a_redacted_parent_hides_its_children() -> None:
    out = redact({"items": ["a", SK, "c"], "h": {"k": SK}}, rules("items[1]", "h"))
    assert out.args == {"items": ["a", REDACTED, "c"], "h": REDACTED}
    assert out.paths == ("$.items[1]", "$.h")


def test_patterns_replace_each_match_or_its_secret_group() -> None:
    out = redact({"note": "acct-12345678 pin=4321 ok", "n": 5}, rules(patterns=("acct-[0-9]{8}", "pin=(?P<secret>[0-9]{4})")))
    assert out.args == {"note": f"{REDACTED} pin={REDACTED} ok", "n": 5} and out.paths == ("$.note",)
    assert redact({"a": "xyz"}, rules(patterns=("q*",), builtins=False)).args == {"a": "xyz"}  # empty matches hide nothing


@pytest.mark.parametrize(("text", "steps"), [
    ("token", ("token",)),
    ("$.headers.authorization", ("headers", "authorization")),
    ("headers.authorization", ("headers", "authorization")),
    ("items[0].secret", ("items", 0, "secret")),
    ("$['x.y'][2]", ("x.y", 2)),
    ('$["a b"]', ("a b",)),
])
def test_paths_parse(text: str, steps: tuple[Any, ...]) -> None:
    assert parse_path(text) == steps


def test_wildcards_parse() -> None:
    assert parse_path("items[*].*") == ("items", redaction.ANY, redaction.ANY)


@pytest.mark.parametrize("text", ["", "$", "a..b", "a[", "a[x]", "$x", "a[0]b", "a.[0]"])
def test_a_path_that_cannot_be_read_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_path(text)


def test_the_config_refuses_what_redaction_could_not_apply() -> None:
    with pytest.raises(ValidationError, match="cannot read the path"):
        RedactConfig(paths=["a..b"])
    with pytest.raises(ValidationError, match="invalid regex"):
        RedactConfig(patterns=["("])


# -- an edit of shown arguments (edit-and-approve) ----------------------------------------------------------------


def test_an_edit_keeps_the_real_values_of_redacted_fields() -> None:
    real = {"path": "creds.txt", "content": f"write {SK} now", "headers": {"token": "t0k"}}
    shown = redact(real, rules("headers.token"))
    edited = {**shown.args, "path": "other.txt"}
    assert unredact(edited, real, shown) == {"path": "other.txt", "content": f"write {SK} now", "headers": {"token": "t0k"}}


@pytest.mark.parametrize("change", [
    lambda a: a.update(content="write sk-live-other0000000000000 now"),
    lambda a: a.update(headers={"token": "mine"}),
    lambda a: a.pop("content"),
])
def test_a_redacted_field_cannot_be_edited(change: Any) -> None:
    real = {"path": "creds.txt", "content": f"write {SK} now", "headers": {"token": "t0k"}}
    shown = redact(real, rules("headers.token"))
    edited = json.loads(json.dumps(shown.args))
    change(edited)
    with pytest.raises(RedactedEdit, match="redacted fields cannot be edited: ") as caught:
        unredact(edited, real, shown)
    assert set(caught.value.paths) <= {"$.content", "$.headers.token"} and caught.value.paths


# -- properties ---------------------------------------------------------------------------------------------------

WORD = st.from_regex(r"[a-z0-9]{1,11}", fullmatch=True)  # too short and too plain to be any built-in shape
SEP = st.sampled_from([" ", ", ", ": ", "\n", "; "])


@st.composite
def plain_text(draw: st.DrawFn) -> str:
    words = draw(st.lists(WORD, max_size=8))
    return "".join(w + draw(SEP) for w in words).strip()


TOKEN = r"[A-Za-z0-9]{8,20}[0-9][A-Za-z0-9]{3,20}"
SECRETS: dict[str, st.SearchStrategy[tuple[str, str]]] = {  # (the text, the part that must not survive)
    "api key (sk-…)": st.from_regex(r"sk-(live-|proj-)?[A-Za-z0-9_-]{16,40}", fullmatch=True).map(lambda s: (s, s)),
    "Stripe key (sk_live_…)": st.from_regex(r"(sk|rk)_(live|test)_[A-Za-z0-9]{16,40}", fullmatch=True).map(lambda s: (s, s)),
    "GitHub token": st.from_regex(r"gh[pousr]_[A-Za-z0-9]{36}|github_pat_[A-Za-z0-9_]{40,82}", fullmatch=True)
    .map(lambda s: (s, s)),
    "Slack token": st.from_regex(r"xox[baprs]-[0-9]{10,13}-[A-Za-z0-9-]{10,30}", fullmatch=True).map(lambda s: (s, s)),
    "AWS access key id": st.from_regex(r"(AKIA|ASIA)[0-9A-Z]{16}", fullmatch=True).map(lambda s: (s, s)),
    "Google API key": st.from_regex(r"AIza[0-9A-Za-z_-]{35}", fullmatch=True).map(lambda s: (s, s)),
    "bearer token": st.tuples(st.sampled_from(["Bearer", "bearer", "BEARER"]), st.from_regex(TOKEN, fullmatch=True))
    .map(lambda p: (f"{p[0]} {p[1]}", p[1])),
    "JWT": st.from_regex(r"eyJ[A-Za-z0-9_-]{10,40}\.eyJ[A-Za-z0-9_-]{10,80}\.[A-Za-z0-9_-]{20,43}", fullmatch=True)
    .map(lambda s: (s, s.split(".", 1)[1])),
    "PEM private key": st.tuples(st.sampled_from(["", "RSA ", "EC ", "OPENSSH ", "ENCRYPTED "]),
                                 st.lists(st.from_regex(r"[A-Za-z0-9+/]{16,64}", fullmatch=True), min_size=1, max_size=4))
    .map(lambda p: (f"-----BEGIN {p[0]}PRIVATE KEY-----\n" + "\n".join(p[1]) + f"\n-----END {p[0]}PRIVATE KEY-----",
                    "\n".join(p[1]))),
    "password in a URL": st.tuples(st.from_regex(r"[a-z]{12,20}", fullmatch=True),
                                   st.from_regex(r"[A-Za-z0-9!$%]{6,20}", fullmatch=True))
    .map(lambda p: (f"https://{p[0]}:{p[1]}@db.example:5432/x", f"{p[0]}:{p[1]}")),
}


def test_every_built_in_shape_has_a_generator() -> None:
    assert set(SECRETS) == set(redaction.BUILTIN_PATTERNS)


def _json(leaf: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.recursive(leaf, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(WORD, inner, max_size=3),
                        max_leaves=8)


PLAIN_JSON = st.dictionaries(WORD, _json(plain_text() | st.integers() | st.booleans() | st.none()), max_size=5)


@st.composite
def args_with_a_secret(draw: st.DrawFn) -> tuple[dict[str, Any], str]:
    """Plain arguments with one secret somewhere, inside plain text; returns the arguments and what must not survive."""
    text, hidden = draw(st.one_of(*SECRETS.values()))
    leaf = f"{draw(plain_text())}{draw(SEP)}{text}{draw(SEP)}{draw(plain_text())}"
    args = draw(PLAIN_JSON)
    where: Any = args
    key = draw(WORD)
    for _ in range(draw(st.integers(0, 3))):  # nest it a few levels down, in objects or lists
        child: Any = {} if draw(st.booleans()) else []
        if isinstance(where, dict):
            where[key] = child
        else:
            where.append(child)
        where, key = child, draw(WORD)
    if isinstance(where, dict):
        where[key] = leaf
    else:
        where.append(leaf)
    return args, hidden


@settings(max_examples=300, deadline=None)
@given(args_with_a_secret())
def test_no_built_in_secret_shape_survives_anywhere(case: tuple[dict[str, Any], str]) -> None:
    args, hidden = case
    out = redact(args)
    assert hidden not in json.dumps(out.args, ensure_ascii=False)
    assert out.paths and REDACTED in json.dumps(out.args, ensure_ascii=False)


@settings(max_examples=300, deadline=None)
@given(PLAIN_JSON)
def test_arguments_without_a_secret_are_untouched(args: dict[str, Any]) -> None:
    out = redact(args)
    assert out.args == args and out.paths == ()


@settings(max_examples=200, deadline=None)
@given(st.one_of(*SECRETS.values()), plain_text())
def test_plain_text_around_a_secret_is_kept(secret: tuple[str, str], text: str) -> None:
    shown = redact_text(f"{text} {secret[0]} {text}")
    assert shown.startswith(f"{text} ") and shown.endswith(f" {text}") and REDACTED in shown


@settings(max_examples=200, deadline=None)
@given(args_with_a_secret())
def test_redacting_twice_changes_nothing_more(case: tuple[dict[str, Any], str]) -> None:
    once = redact(case[0])
    assert redact(once.args).args == once.args
