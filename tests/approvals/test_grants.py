"""What a session grant covers (agent_runtime/approvals/grants.py ``covers`` and ``terms_problem``): pure, so
checked with examples and with hypothesis over paths that try to climb out of the glob."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agent_runtime.approvals import args_hash
from agent_runtime.approvals.grants import Grant, GrantTerms, covers, terms_problem
from agent_runtime.contract.globs import normalise_path


def grant(args_hash: str | None = None, argument: str | None = None, glob: str | None = None) -> Grant:
    return Grant("g-1", "c1", "alice", "files", "delete_file", args_hash, argument, glob, "", "alice", "apr-1", 0.0, 60.0)


def test_an_exact_grant_covers_the_same_tool_and_arguments_only() -> None:
    args = {"path": "/srv/a", "force": True}
    exact = grant(args_hash("delete_file", args))
    assert covers(exact, "delete_file", args, args_hash("delete_file", args))
    assert covers(exact, "delete_file", dict(reversed(args.items())), args_hash("delete_file", dict(reversed(args.items()))))
    other = {"path": "/srv/a", "force": False}
    assert not covers(exact, "delete_file", other, args_hash("delete_file", other))
    assert not covers(exact, "write_file", args, args_hash("write_file", args))


def test_a_glob_grant_covers_matching_paths_of_its_argument() -> None:
    g = grant(argument="path", glob="/srv/reports/*")
    for path, covered in [("/srv/reports/q1", True), ("/srv/reports//q2", True), ("/srv/reports/a/b", False),
                          ("/srv/reports/../etc/passwd", False), ("/srv/other", False), ("", False)]:
        assert covers(g, "delete_file", {"path": path}, "") is covered, path
    assert not covers(g, "delete_file", {"file": "/srv/reports/q1"}, "")  # another argument
    assert not covers(g, "delete_file", {"path": ["/srv/reports/q1"]}, "")  # not a string


def test_a_glob_must_name_a_string_argument_and_cover_the_approved_call() -> None:
    args = {"path": "/srv/reports/q1", "n": 3}
    assert terms_problem(GrantTerms(), args) == ""
    assert terms_problem(GrantTerms("path", "/srv/reports/*"), args) == ""
    assert "does not cover the approved call's path='/srv/reports/q1'" in terms_problem(GrantTerms("path", "/tmp/*"), args)
    assert "no string argument 'n'" in terms_problem(GrantTerms("n", "*"), args)
    assert "needs both" in terms_problem(GrantTerms("path", None), args)


segments = st.lists(st.sampled_from(["srv", "reports", "..", ".", "", "etc", "q1"]), min_size=1, max_size=8)


@given(segments)
def test_a_covered_path_always_lies_under_the_glob_after_normalisation(parts: list[str]) -> None:
    path = "/" + "/".join(parts)
    if covers(grant(argument="path", glob="/srv/reports/**"), "delete_file", {"path": path}, ""):
        assert normalise_path(path).startswith("/srv/reports")
