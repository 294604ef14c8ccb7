"""Image → executable: the one explicit translation the kubelet stand-in makes.

There is no container runtime here, so an image is not pulled: its *configuration* (what ``docker inspect``
shows: entrypoint, cmd, working directory, environment, user) is known to the stand-in, and its executables
are the project's virtualenv::

    image ref                         configuration read from            executables (PATH head)
    .../gatehouse[:tag|@digest]       the repository's Dockerfile         <venv>/bin  (gatehouse, gatehouse-runtime,
                                      (ENTRYPOINT, CMD, WORKDIR, ENV,                  kubectl-gatehouse, kopf, python)
                                      USER, useradd --home-dir)
    python[:tag]                      python:3.11-slim's defaults        <venv>/bin  (python, python3)
                                      (CMD ["python3"], WORKDIR /)

``<venv>/bin`` is the directory of ``sys.executable``: ``pip install .`` in the Dockerfile puts the console scripts in
the image's ``/usr/local/bin``, the venv's ``pip install -e .`` puts the same scripts in ``<venv>/bin``. So the pod
spec's ``command``/``args`` run exactly as written (``gatehouse-runtime serve ...`` is found on ``PATH``); only PATH
says where. :func:`argv` applies Kubernetes' rules for ``command``/``args`` over the image's ENTRYPOINT/CMD. Tests
may register more images (``Kubelet(images={"registry/name": Image(...)})``); an unknown image leaves the pod's
container waiting with reason ``ErrImagePull``.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["DOCKERFILE", "Image", "UnknownImage", "argv", "builtin_images", "from_dockerfile", "path_env", "resolve"]

DOCKERFILE = Path(__file__).resolve().parents[3] / "Dockerfile"
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class UnknownImage(LookupError):
    """No configuration is known for an image reference."""


@dataclass(frozen=True)
class Image:
    """An image's runtime configuration (the parts a pod sees)."""

    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    workdir: str = "/"
    env: Mapping[str, str] = field(default_factory=dict)
    user: str = "0"  # recorded only: every container runs as root here (see docs/testing-pods.md)
    home: str = "/root"


def path_env(bin_dir: Path | None = None) -> str:
    """PATH inside a pod: the venv's bin directory (standing in for the image's ``/usr/local/bin``) first."""
    return f"{bin_dir or Path(sys.executable).parent}:{SYSTEM_PATH}"


def _instructions(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        keyword, _, args = (pending + line).partition(" ")
        pending = ""
        out.append((keyword.upper(), args.strip()))
    return out


def _exec_form(args: str) -> tuple[str, ...]:
    """``["a", "b"]`` (exec form) or ``a b`` (shell form: run by ``/bin/sh -c``, as Docker does)."""
    if args.startswith("["):
        return tuple(str(a) for a in json.loads(args))
    return ("/bin/sh", "-c", args)


def _env_pairs(args: str) -> dict[str, str]:
    words = shlex.split(args)
    if len(words) >= 2 and "=" not in words[0]:  # legacy ``ENV key value``
        return {words[0]: " ".join(words[1:])}
    return dict(w.split("=", 1) for w in words if "=" in w)


def from_dockerfile(path: Path = DOCKERFILE) -> Image:
    """The final stage's configuration: ENTRYPOINT, CMD, the last WORKDIR, ENV, USER and the user's home."""
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    workdir, user, home = "/", "0", "/root"
    env: dict[str, str] = {}
    build_args: dict[str, str] = {}
    for keyword, args in _instructions(path.read_text()):
        if keyword == "ARG" and "=" in args:  # the default of a build argument (FROM ${BASE})
            name, _, default = args.partition("=")
            build_args[name.strip()] = default.strip()
        elif keyword == "FROM":  # a new stage: the base image's settings, where the stand-in knows them
            ref = re.sub(r"\$\{?(\w+)\}?", lambda m: build_args.get(m.group(1), ""), args.split()[0])
            base = BASES.get(repository(ref), Image())
            entrypoint, cmd, workdir, user, env = base.entrypoint, base.cmd, base.workdir, base.user, dict(base.env)
        elif keyword == "ENTRYPOINT":
            entrypoint, cmd = _exec_form(args), ()  # Docker: a new ENTRYPOINT resets an inherited CMD
        elif keyword == "CMD":
            cmd = _exec_form(args)
        elif keyword == "WORKDIR":
            workdir = args if args.startswith("/") else f"{workdir.rstrip('/')}/{args}"
        elif keyword == "ENV":
            # PATH is the stand-in's own (path_env: the venv's bin stands in for the image's /opt/gatehouse/bin).
            env.update({k: v for k, v in _env_pairs(args).items() if k != "PATH"})
        elif keyword == "USER":
            user = args
        elif keyword == "RUN" and (m := re.search(r"--home-dir\s+(\S+)", args)):
            home = m.group(1)
    return Image(entrypoint, cmd, workdir, env, user, home if user not in ("0", "root") else "/root")


PYTHON = Image(cmd=("python3",), env={"LANG": "C.UTF-8"})  # python:3.11-slim (its PATH is replaced, see path_env)
BASES = {"python": PYTHON}


def own_files() -> list[Path]:
    """Where the gatehouse image's files really are: this checkout and the venv its executables come from."""
    repo, venv = DOCKERFILE.parent, Path(sys.prefix)
    return [repo] if venv == repo or repo in venv.parents else [repo, venv]


def builtin_images() -> dict[str, Image]:
    """Repository name (the image ref without registry, tag or digest) → configuration."""
    return {"gatehouse": from_dockerfile(), "python": PYTHON}


def repository(ref: str) -> str:
    """``ghcr.io/gatehouse-dev/gatehouse:0.1.0`` → ``gatehouse``; ``python:3.11-slim`` → ``python``."""
    name = ref.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    return last.split(":", 1)[0]


def resolve(ref: str, images: Mapping[str, Image]) -> Image:
    """The configuration of image ``ref``: an exact key of ``images`` (tests' own), else its repository name."""
    if ref in images:
        return images[ref]
    if repository(ref) in images:
        return images[repository(ref)]
    raise UnknownImage(f'no image configuration known for "{ref}" (the stand-in knows {sorted(images)})')


def argv(container: Mapping[str, Any], image: Image) -> list[str]:
    """Kubernetes' rule: ``command`` replaces ENTRYPOINT (and drops CMD), ``args`` replaces CMD."""
    command, args = container.get("command"), container.get("args")
    if command:
        return [*command, *(args or [])]
    return [*image.entrypoint, *(args if args is not None else image.cmd)]
