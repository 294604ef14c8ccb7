"""The Dockerfile, read without a Docker engine: base, install, non-root user, port, both entrypoints, and a
.dockerignore that lets through everything `pip install .` builds from."""

from __future__ import annotations

import json
import shlex
import tomllib

import pytest

from tests.support.helm import REPO

DOCKERFILE = REPO / "Dockerfile"
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with comments dropped and backslash continuations joined."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        keyword, _, args = line.partition(" ")
        out.append((keyword.upper(), args.strip()))
    assert not pending, "Dockerfile ends inside a continuation"
    return out


def _all(keyword: str) -> list[str]:
    return [args for kw, args in _instructions() if kw == keyword]


def test_single_stage_on_python_311_slim_by_default() -> None:
    assert _instructions()[0] == ("ARG", "BASE=python:3.11-slim")
    assert _all("FROM") == ["${BASE}"]


def test_installs_into_a_virtual_environment_first_on_path() -> None:
    # A Debian base's system Python refuses `pip install` (PEP 668, externally managed): the venv works on both.
    (run,) = [run for run in _all("RUN") if "pip install" in run]
    # --upgrade-deps: bookworm's pip 23.0 backtracked for minutes through versions of attrs on this project
    assert shlex.split(run)[:5] == ["python3", "-m", "venv", "--upgrade-deps", "/opt/gatehouse"]
    env = dict(pair.split("=", 1) for pair in shlex.split(" ".join(_all("ENV"))))
    assert env["PATH"].split(":")[0] == "/opt/gatehouse/bin"


def _installed_extras() -> set[str]:
    """The extras of the one ``pip install .[…]`` line."""
    runs = [shlex.split(run) for run in _all("RUN")]
    (spec,) = [words[i + 2] for words in runs for i in range(len(words)) if words[i:i + 2] == ["pip", "install"]]
    assert spec.startswith(".[") and spec.endswith("]"), spec
    return set(spec[2:-1].split(","))


def test_installs_the_project_with_pip() -> None:
    # with the postgres extra: an Agent whose spec.state is postgres runs this image with a postgresql+asyncpg URL;
    # with the otel extra: approval spans wherever OTEL_EXPORTER_OTLP_ENDPOINT is set
    assert {"postgres", "otel"} <= _installed_extras()
    assert _all("COPY") == [". ."]


def test_installs_the_litellm_extra_so_the_image_serves_real_models() -> None:
    # without it every ModelConfig but Gemini and Scripted fails at start-up with "install the 'litellm' extra"
    assert "litellm" in _installed_extras()
    assert "litellm" in PYPROJECT["project"]["optional-dependencies"], "the extra the Dockerfile names must exist"


def test_runs_as_a_numeric_non_root_user() -> None:
    user = _all("USER")[-1]
    uid = user.split(":")[0]
    assert uid.isdigit() and int(uid) != 0, f"USER {user}: use a numeric non-root uid so runAsNonRoot can be verified"
    assert [kw for kw, _ in _instructions()].index("USER") > max(
        i for i, (kw, _) in enumerate(_instructions()) if kw == "RUN"
    ), "every RUN before USER"


def test_exposes_8080() -> None:
    assert "8080" in " ".join(_all("EXPOSE")).split()


def test_default_entrypoint_is_the_runtime_and_kopf_is_installed() -> None:
    assert json.loads(_all("ENTRYPOINT")[-1]) == ["gatehouse-runtime"]
    assert json.loads(_all("CMD")[-1])[0] == "serve"
    assert "gatehouse-runtime" in PYPROJECT["project"]["scripts"]
    assert any(dep.startswith("kopf") for dep in PYPROJECT["project"]["dependencies"]), "the operator entrypoint is kopf"
    header = DOCKERFILE.read_text()
    assert "kopf run -m gatehouse_operator" in header and "--entrypoint kopf" in header, "document both entrypoints"


_FIND = PYPROJECT["tool"]["setuptools"]["packages"]["find"]
BUILD_INPUTS = [
    "pyproject.toml",
    PYPROJECT["project"]["readme"],
    *(f"{where}/" for where in _FIND["where"] if where != "."),  # package roots such as operator/
    *(f"{name}/" for name in (p.rstrip("*") for p in _FIND["include"]) if (REPO / name).is_dir()),  # top-level packages
]


@pytest.mark.parametrize("needed", BUILD_INPUTS)
def test_dockerignore_lets_the_build_inputs_through(needed: str) -> None:
    lines = [ln.strip() for ln in (REPO / ".dockerignore").read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    assert lines[0] == "*", "allow-list .dockerignore"
    assert f"!{needed}" in lines

