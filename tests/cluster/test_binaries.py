"""Where the control plane's binaries come from, and what a machine without Go is told (runs without them)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.cluster.conftest import require_binaries
from tests.support.cluster import ClusterUnavailable, binaries


@pytest.fixture
def no_go(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GATEHOUSE_GO", raising=False)
    monkeypatch.setattr(shutil, "which", lambda _: None)
    monkeypatch.setattr(binaries, "GO_PLACES", ())


@pytest.mark.usefixtures("no_go")
def test_without_go_the_tests_skip_and_say_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"no Go toolchain .* built from its Go modules"):
        require_binaries()


@pytest.mark.usefixtures("no_go")
def test_without_go_ci_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI must run the real control plane: no Go toolchain"):
        require_binaries()


@pytest.mark.usefixtures("no_go")
def test_make_cluster_bin_without_go_is_a_note_on_a_laptop_and_an_error_under_ci(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    from tests.support.cluster.__main__ import main

    monkeypatch.delenv("CI", raising=False)
    assert main(["build"]) == 0
    assert "NOTE: no real control plane here: no Go toolchain" in capsys.readouterr().err
    monkeypatch.setenv("CI", "true")
    assert main(["build"]) == 1


def test_the_stamp_changes_with_the_module(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Another go.sum is another build: binaries of other inputs are never taken for these."""
    try:
        go = binaries.go_binary()
    except ClusterUnavailable as exc:
        pytest.skip(str(exc))
    before = binaries._stamp(go)
    module = tmp_path / "cluster"
    module.mkdir()
    for name in ("go.mod", "go.sum", "tools.go"):
        (module / name).write_bytes((binaries.MODULE / name).read_bytes())
    monkeypatch.setattr(binaries, "MODULE", module)
    assert binaries._stamp(go) == before
    (module / "go.sum").write_text((module / "go.sum").read_text() + "\n")
    assert binaries._stamp(go) != before

