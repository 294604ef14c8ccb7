"""A real node of the real control plane: the kubelet built in ``hack/cluster/`` with Debian's containerd, runc (or
crun) and CNI plugins, all run as local processes (as root), with nothing pulled from a registry.

``prepare()`` checks the Debian packages and makes the node's images as OCI tarballs with umoci: the sandbox
("pause") image from ``hack/pause/`` (the node's own program) and a busybox image from Debian's busybox-static.
``RealNode(cluster).start()`` runs containerd with its own root, state and socket and the CRI plugin, imports the
images, runs the kubelet with a ``system:node:<name>`` client certificate of the cluster's CA and waits for the Node
to be Ready; ``RealNode(cluster, containerd=containerd_v2()[0])`` does so with containerd v2 and the CNI plugins
built from ``hack/node/`` instead of Debian's; ``reboot()`` does to the pods what a reboot does and starts both
again; ``stop()`` stops the pods' containers, containerd and the kubelet, and unmounts and removes what they
left. State lives under ``/tmp/gh-node-<id>/`` (short: containerd's sockets have a 108-byte limit), not under the
cluster's directory, whose removal must never descend into a pod's mounts.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from tests.support.cluster import binaries as bins
from tests.support.cluster import launcher, rest
from tests.support.cluster.binaries import ClusterUnavailable
from tests.support.cluster.launcher import Cluster, ClusterFailed
from tests.support.processes import free_port

__all__ = ["BUSYBOX_IMAGE", "GATEHOUSE_IMAGE", "GATEWAY", "PAUSE_IMAGE", "ClusterDns", "Firewall", "RealNode",
           "ServiceProxy", "busybox_client", "coredns", "gatehouse_image", "kube_proxy", "kube_router", "prepare"]

CACHE = bins.REPO / ".cache" / "node"
PAUSE_IMAGE = "gatehouse.local/pause:3.10"
BUSYBOX_IMAGE = "gatehouse.local/busybox:1"
GATEHOUSE_IMAGE = "gatehouse.local/gatehouse:dev"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
POD_SUBNET = "10.88.0.0/16"
GATEWAY = "10.88.0.1"  # the bridge's address in POD_SUBNET: the host, as the pods reach it
KUBERNETES_SERVICE_IP = "10.96.0.1"  # the first address of the launcher's service CIDR
CNI_BIN = Path("/usr/lib/cni")
# Debian packages the node needs (`make e2e-node` installs them): the tool each provides.
PACKAGES = {"containerd": "containerd", "runc": "runc", "crun": "crun", "umoci": "umoci",
            "containernetworking-plugins": str(CNI_BIN / "bridge"), "busybox-static": "/bin/busybox",
            "iptables": "iptables"}
BUSYBOX_APPLETS = ("sh", "id", "cat", "echo", "touch", "ls", "sleep", "mount", "grep", "rm", "mkdir", "stat")


def busybox_client(name: str, namespace: str, node: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A busybox pod on ``node`` that sleeps, for ``kubectl exec`` probes: as ``restricted`` admits it."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
            "spec": {"nodeName": node, "automountServiceAccountToken": False, "terminationGracePeriodSeconds": 0,
                     "securityContext": {"runAsNonRoot": True, "runAsUser": 10001, "runAsGroup": 10001,
                                         "seccompProfile": {"type": "RuntimeDefault"}},
                     "containers": [{"name": "client", "image": BUSYBOX_IMAGE, "imagePullPolicy": "Never",
                                     "command": ["/bin/busybox", "sleep", "3600"],
                                     "securityContext": {"allowPrivilegeEscalation": False,
                                                         "readOnlyRootFilesystem": True,
                                                         "capabilities": {"drop": ["ALL"]}}}]}}


def _which(tool: str) -> str | None:
    return tool if Path(tool).is_absolute() and Path(tool).exists() else shutil.which(tool)


def _run(*args: str, cwd: Path | None = None) -> str:
    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise ClusterFailed(f"`{' '.join(args)}` failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
    return proc.stdout


def prepare() -> dict[str, Path]:
    """The node's images as OCI tarballs (made once into ``.cache/node/``): ``{image reference: tarball}``. Raises
    :class:`ClusterUnavailable` when not root or a Debian package is missing."""
    if os.geteuid() != 0:
        raise ClusterUnavailable("the real node runs containerd and the kubelet as root")
    missing = [package for package, tool in PACKAGES.items() if not _which(tool)]
    if missing:
        raise ClusterUnavailable(f"Debian packages missing: {' '.join(missing)} (`make e2e-node` installs them)")
    CACHE.mkdir(parents=True, exist_ok=True)
    pause = CACHE / "pause"
    if not pause.exists():
        _run(str(bins.go_binary()), "build", "-ldflags=-s -w", "-o", str(pause), ".", cwd=bins.REPO / "hack" / "pause")
    images = {PAUSE_IMAGE: CACHE / "pause.tar", BUSYBOX_IMAGE: CACHE / "busybox.tar"}
    if not images[PAUSE_IMAGE].exists():
        _image(images[PAUSE_IMAGE], PAUSE_IMAGE, lambda root: shutil.copy2(pause, root / "pause"),
               ["--config.entrypoint", "/pause", "--config.user", "65535:65535"])
    if not images[BUSYBOX_IMAGE].exists():
        _image(images[BUSYBOX_IMAGE], BUSYBOX_IMAGE, _busybox, ["--config.entrypoint", "/bin/sh", "--config.env",
                                                                "PATH=/bin"])
    return images


def _inputs_stamp() -> str:
    """A hash of what the image is built from: the Dockerfile and what .dockerignore lets through."""
    digest = hashlib.sha256()
    paths = [bins.REPO / "Dockerfile", bins.REPO / "pyproject.toml", bins.REPO / "README.md", bins.REPO / "LICENSE"]
    for top in ("agent_runtime", "operator"):
        paths += sorted(p for p in (bins.REPO / top).rglob("*") if p.is_file() and "__pycache__" not in p.parts
                        and ".egg-info" not in str(p) and p.suffix != ".pyc")
    for path in paths:
        if path.is_file():
            digest.update(path.relative_to(bins.REPO).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def gatehouse_image() -> tuple[Path, dict[str, float]]:
    """The project's image, built from its Dockerfile by buildah on a Debian bookworm base made by debootstrap
    (``--build-arg BASE``), as an OCI archive tagged :data:`GATEHOUSE_IMAGE` in ``.cache/node/``; made once per
    input stamp. Returns the archive and the seconds each step took (empty when it was there)."""
    prepare()
    for tool in ("debootstrap", "buildah"):
        if not shutil.which(tool):
            raise ClusterUnavailable(f"Debian package {tool} missing (`make e2e-node` installs it)")
    archive = CACHE / f"gatehouse-{_inputs_stamp()}.tar"
    if archive.exists():
        return archive, {}
    times: dict[str, float] = {}
    rootfs = CACHE / "bookworm-rootfs"
    storage = ["--root", str(CACHE / "buildah" / "storage"), "--runroot", str(CACHE / "buildah" / "run")]
    if not (rootfs / "usr" / "bin" / "python3").exists():
        started = time.monotonic()
        shutil.rmtree(rootfs, ignore_errors=True)
        _run("debootstrap", "--variant=minbase", "--include=python3,python3-venv,ca-certificates", "bookworm",
             str(rootfs), DEBIAN_MIRROR)
        for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for leftover in (rootfs / cache).glob("*"):
                if leftover.is_file():
                    leftover.unlink()
        times["debootstrap"] = time.monotonic() - started
        started = time.monotonic()
        container = _run("buildah", *storage, "from", "scratch").strip()
        _run("buildah", *storage, "copy", container, str(rootfs), "/")
        _run("buildah", *storage, "config", "--env", "LANG=C.UTF-8", container)
        _run("buildah", *storage, "commit", "-q", container, "localhost/gatehouse-base:bookworm")
        _run("buildah", *storage, "rm", container)
        times["base image"] = time.monotonic() - started
    started = time.monotonic()
    # The machine's CA bundle (it may trust an egress proxy's CA) over the base's during RUN only: pip reaches PyPI,
    # and the image keeps Debian's bundle (a RUN's volume is not part of its layer).
    ca = os.environ.get("SSL_CERT_FILE") or "/etc/ssl/certs/ca-certificates.crt"
    _run("buildah", *storage, "bud", "--isolation", "chroot", "--layers",
         "--volume", f"{ca}:/etc/ssl/certs/ca-certificates.crt:ro", "--build-arg",
         "BASE=localhost/gatehouse-base:bookworm", "-t", "localhost/gatehouse:dev", str(bins.REPO))
    times["buildah bud"] = time.monotonic() - started
    partial = archive.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    _run("buildah", *storage, "push", "-q", "localhost/gatehouse:dev", f"oci-archive:{partial}:{GATEHOUSE_IMAGE}")
    partial.rename(archive)
    return archive, times


def _busybox(root: Path) -> None:
    for sub in ("bin", "tmp", "etc"):
        (root / sub).mkdir(exist_ok=True)
    shutil.copy2("/bin/busybox", root / "bin" / "busybox")
    for applet in BUSYBOX_APPLETS:
        (root / "bin" / applet).symlink_to("busybox")
    (root / "etc" / "passwd").write_text("root:x:0:0::/:/bin/sh\n")


def _image(tarball: Path, reference: str, fill: object, config: list[str]) -> None:
    """An OCI layout with one image, tagged with ``reference``'s tag, made by umoci from a rootfs and tarred."""
    tag = reference.rsplit(":", 1)[1]
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        layout, bundle = Path(tmp) / "layout", Path(tmp) / "bundle"
        _run("umoci", "init", "--layout", str(layout))
        _run("umoci", "new", "--image", f"{layout}:{tag}")
        _run("umoci", "unpack", "--image", f"{layout}:{tag}", str(bundle))
        fill(bundle / "rootfs")  # type: ignore[operator]
        _run("umoci", "repack", "--image", f"{layout}:{tag}", str(bundle))
        _run("umoci", "config", "--image", f"{layout}:{tag}", *config)
        _run("umoci", "gc", "--layout", str(layout))
        partial = tarball.with_suffix(".partial")
        _run("tar", "-C", str(layout), "-cf", str(partial), ".")
        partial.rename(tarball)


def crun_limit() -> str | None:
    """Why crun cannot run a pod here, or None. crun 1.8 refuses a hybrid cgroup layout whose v2 hierarchy has
    controllers (here ``hugetlb`` is on cgroup v2 while the others are on v1)."""
    unified = Path("/sys/fs/cgroup/unified/cgroup.controllers")
    controllers = unified.read_text().split() if unified.exists() else []
    if controllers:
        return (f"crun: hybrid cgroups with controllers on v2 ({' '.join(controllers)}): \"OCI runtime create failed: "
                "cgroups in hybrid mode not supported, drop all controllers from cgroupv2\"")
    return None


# containerd v2 and the CNI plugins built from their modules (hack/node/): the packages, and what each binary is.
NODE_MODULE = bins.REPO / "hack" / "node"
CONTAINERD_V2 = "v2.4.2"  # what hack/node/go.mod requires github.com/containerd/containerd/v2 at
_NODE_PACKAGES = ("github.com/containerd/containerd/v2/cmd/containerd",
                  "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2",
                  "github.com/containerd/containerd/v2/cmd/ctr",
                  "github.com/containernetworking/plugins/plugins/ipam/host-local",
                  "github.com/containernetworking/plugins/plugins/main/bridge",
                  "github.com/containernetworking/plugins/plugins/main/loopback",
                  "github.com/containernetworking/plugins/plugins/meta/portmap")
_NODE_BINARIES = ("containerd", "containerd-shim-runc-v2", "ctr", "host-local", "bridge", "loopback", "portmap")


def containerd_v2() -> tuple[Path, float]:
    """containerd v2 (with its runc shim and ctr) and the CNI plugins v1.10, built with ``go build`` from
    ``hack/node/`` into ``.cache/node/bin-<stamp of the module>/``, once; the directory and the seconds the build
    took (0 when it was there). Without cgo: the btrfs, devmapper and zfs snapshotters are left out (overlayfs is
    the node's)."""
    go = bins.go_binary()
    digest = hashlib.sha256()
    for path in sorted(NODE_MODULE.glob("*")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    out = CACHE / f"bin-{digest.hexdigest()[:16]}"
    if all((out / name).is_file() for name in _NODE_BINARIES):
        return out, 0.0
    started = time.monotonic()
    with tempfile.TemporaryDirectory(dir=CACHE.parent if not CACHE.exists() else CACHE) as tmp:
        built = Path(tmp) / "bin"
        proc = subprocess.run([str(go), "build", "-p", "2", "-tags", "no_btrfs no_devmapper no_zfs",
                               f"-ldflags=-s -w -X github.com/containerd/containerd/v2/version.Version={CONTAINERD_V2}",
                               "-o", f"{built}/", *_NODE_PACKAGES], cwd=NODE_MODULE,
                              env={**os.environ, "CGO_ENABLED": "0"}, capture_output=True, text=True)
        if proc.returncode != 0:
            raise ClusterUnavailable(f"building hack/node/ failed:\n{proc.stderr[-3000:]}")
        built.rename(out)
    return out, time.monotonic() - started


# kube-router's NetworkPolicy controller, built from hack/kuberouter/: iptables and ipset, which this kernel has (the
# nftables queue kube-network-policies needs, it has not: docs/cluster.md).
KUBE_ROUTER_MODULE = bins.REPO / "hack" / "kuberouter"
KUBE_ROUTER = "v2.1.0"  # what hack/kuberouter/go.mod requires github.com/cloudnativelabs/kube-router/v2 at


def kube_router() -> tuple[Path, float]:
    """kube-router built from ``hack/kuberouter/``."""
    return _module_build(KUBE_ROUTER_MODULE, "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router", "kube-router")


# What kube-router's firewall reads, as its own manifests grant it (read only).
_FIREWALL_READS = ["namespaces", "pods", "nodes", "services", "endpoints"]
# The filter table's chains and the ipsets kube-router's firewall makes: removed when it stops (its own
# `--cleanup-config` panics in v2.1.0 on the service proxy's cleanup and leaves the chains in place).
_FIREWALL_CHAINS = re.compile(r"^-N (KUBE-ROUTER-|KUBE-NWPLCY-|KUBE-POD-FW-)(\S*)$")
_FIREWALL_SETS = re.compile(r"^(KUBE-SRC-|KUBE-DST-|kube-router-)")


class Firewall:
    """kube-router's NetworkPolicy firewall alone (``--run-firewall``, no router, no service proxy, no CNI) for
    ``node``, as its ServiceAccount ``kube-system/kube-router`` with read rights only; its iptables chains in the
    filter table, jumped to from INPUT, FORWARD and OUTPUT, and its ipsets are the machine's: :meth:`stop` removes
    them."""

    def __init__(self, node: RealNode) -> None:
        self.node = node

    def start(self, timeout: float = 60.0) -> float:
        """Start it and wait until it has programmed its chains; the seconds that took."""
        if not _which("ipset"):
            raise ClusterUnavailable("Debian package ipset missing (`make e2e-node` installs it)")
        binary, _ = kube_router()
        kubeconfig = _grant(self.node.cluster, "kube-router", [
            {"apiGroups": [""], "resources": _FIREWALL_READS, "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["get", "list", "watch"]}])
        started = time.monotonic()
        self.node._spawn("kube-router", [
            str(binary), f"--kubeconfig={kubeconfig}", f"--hostname-override={self.node.name}",
            "--run-firewall=true", "--run-router=false", "--run-service-proxy=false", "--enable-cni=false",
            "--enable-pod-egress=false", "--health-port=0", "--metrics-port=0", "--v=2"])
        while "sync iptables took" not in self.node.log("kube-router").read_text(errors="replace"):
            self.node._check_alive("kube-router")
            if time.monotonic() - started > timeout:
                raise ClusterFailed(f"kube-router programmed nothing in {timeout:.0f} s:\n"
                                    f"{self.node._tail('kube-router', 40)}")
            time.sleep(0.2)
        return time.monotonic() - started

    def stop(self) -> None:
        self.node._kill("kube-router")
        rules = _run("iptables", "-S").splitlines()
        for rule in rules:
            jump = re.match(r"^-A (INPUT|FORWARD|OUTPUT) (.* -j KUBE-ROUTER-\S+.*)$", rule)
            if jump:
                subprocess.run(["iptables", "-D", jump.group(1), *shlex.split(jump.group(2))], capture_output=True)
        chains = [m.group(1) + m.group(2) for rule in rules if (m := _FIREWALL_CHAINS.match(rule))]
        for verb in ("-F", "-X"):  # every chain emptied before any is deleted: they jump to each other
            for chain in chains:
                subprocess.run(["iptables", verb, chain], capture_output=True)
        for name in _run("ipset", "list", "-n").split():
            if _FIREWALL_SETS.match(name):
                subprocess.run(["ipset", "destroy", name], capture_output=True)


def _module_build(module: Path, package: str, name: str, ldflags: str = "-s -w", *,
                  trimpath: bool = True) -> tuple[Path, float]:
    """``package`` built with ``go build -p 1`` from the Go module ``module`` into ``.cache/node/<name>-<stamp of the
    module>``, once; the binary and the seconds the build took (0 when it was there)."""
    go = bins.go_binary()
    digest = hashlib.sha256(f"{ldflags} {trimpath}".encode())
    for path in sorted(module.glob("*")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    out = CACHE / f"{name}-{digest.hexdigest()[:16]}"
    if out.is_file():
        return out, 0.0
    CACHE.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    partial = out.with_suffix(".partial")
    flags = ["-trimpath"] if trimpath else []
    proc = subprocess.run([str(go), "build", "-p", "1", *flags, f"-ldflags={ldflags}", "-o", str(partial), package],
                          cwd=module, env={**os.environ, "CGO_ENABLED": "0"}, capture_output=True, text=True)
    if proc.returncode != 0:
        raise ClusterUnavailable(f"building {module.relative_to(bins.REPO)}/ failed:\n{proc.stderr[-3000:]}")
    partial.rename(out)
    return out, time.monotonic() - started


def kube_proxy() -> tuple[Path, float]:
    """kube-proxy of the control plane's Kubernetes, from ``hack/kubeproxy/`` (the version stamped in as
    hack/cluster stamps its binaries). Built with hack/cluster's flags (no ``-trimpath``), so Go's build cache of the
    kubelet serves most of it: 22 s instead of 9 minutes."""
    return _module_build(bins.REPO / "hack" / "kubeproxy", "k8s.io/kubernetes/cmd/kube-proxy", "kube-proxy",
                         bins._ldflags(), trimpath=False)


def coredns() -> tuple[Path, float]:
    """CoreDNS from ``hack/coredns/``."""
    return _module_build(bins.REPO / "hack" / "coredns", "github.com/coredns/coredns", "coredns")


def _grant(cluster: Cluster, name: str, rules: list[dict[str, object]]) -> Path:
    """A ClusterRole ``name`` of ``rules`` bound to the ServiceAccount ``kube-system/<name>``; its kubeconfig."""
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name},
            "rules": rules}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
               "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": "kube-system"}]}
    made = cluster.kubectl("apply", "-f", "-", stdin=json.dumps(role) + "\n---\n" + json.dumps(binding))
    if made.returncode != 0:
        raise ClusterFailed(f"{name}'s RBAC was refused: {made.stderr}")
    return cluster.service_account("kube-system", name)


def _await_log(node: RealNode, component: str, line: str, timeout: float) -> float:
    started = time.monotonic()
    while line not in node.log(component).read_text(errors="replace"):
        node._check_alive(component)
        if time.monotonic() - started > timeout:
            raise ClusterFailed(f"{component}: no {line!r} in {timeout:.0f} s:\n{node._tail(component, 40)}")
        time.sleep(0.2)
    return time.monotonic() - started


class ServiceProxy:
    """kube-proxy in iptables mode for ``node`` (``--config``: no health or metrics listener, conntrack limits left
    as they are, no NodePorts on localhost), as the user ``system:kube-proxy`` -- the API server's own binding gives
    it ``system:node-proxier``. Services' cluster IPs then route to their endpoints. One exception: the ``kubernetes``
    Service's endpoint is this machine's address, where the API server (on 127.0.0.1) does not listen, so the node's
    own DNAT of it (:meth:`RealNode._service_nat`) is moved ahead of kube-proxy's jump."""

    def __init__(self, node: RealNode) -> None:
        self.node = node

    def start(self, timeout: float = 60.0) -> float:
        binary, _ = kube_proxy()
        config = {"apiVersion": "kubeproxy.config.k8s.io/v1alpha1", "kind": "KubeProxyConfiguration",
                  "clientConnection": {"kubeconfig": str(self.node.cluster.user("system:kube-proxy"))},
                  "mode": "iptables", "hostnameOverride": self.node.name, "clusterCIDR": POD_SUBNET,
                  "bindAddress": "127.0.0.1", "healthzBindAddress": "", "metricsBindAddress": "",
                  "conntrack": {"maxPerCore": 0}, "iptables": {"localhostNodePorts": False}}
        path = self.node.root / "kube-proxy.yaml"
        path.write_text(json.dumps(config))
        self.node._spawn("kube-proxy", [str(binary), f"--config={path}", "--v=2"])
        took = _await_log(self.node, "kube-proxy", '"SyncProxyRules complete" ipFamily="IPv4"', timeout)
        rule = self.node._nat_rule()
        _run("iptables", "-t", "nat", "-D", *rule)
        _run("iptables", "-t", "nat", "-I", rule[0], "1", *rule[1:])
        return took

    def stop(self) -> None:
        self.node._kill("kube-proxy")
        binary, _ = kube_proxy()
        subprocess.run([str(binary), "--cleanup"], capture_output=True)  # its chains and jumps, in every table


class ClusterDns:
    """CoreDNS on the pods' gateway (``GATEWAY:53``, the address a node made with ``cluster_dns=GATEWAY`` gives its
    pods), answering ``cluster.local`` from the API server with its kubernetes plugin (as ServiceAccount
    ``kube-system/coredns``, read rights only); nothing else is resolved (no upstream)."""

    def __init__(self, node: RealNode) -> None:
        self.node = node

    def start(self, timeout: float = 60.0) -> float:
        binary, _ = coredns()
        kubeconfig = _grant(self.node.cluster, "coredns", [
            {"apiGroups": [""], "resources": ["services", "namespaces", "pods"], "verbs": ["list", "watch"]},
            {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"]}])
        corefile = self.node.root / "Corefile"
        corefile.write_text(f"""cluster.local:53 in-addr.arpa:53 {{
    bind {GATEWAY}
    errors
    kubernetes cluster.local in-addr.arpa {{
        kubeconfig {kubeconfig}
    }}
    cache 5
}}
""")
        self.node._spawn("coredns", [str(binary), "-conf", str(corefile)])
        return _await_log(self.node, "coredns", "CoreDNS-", timeout)

    def stop(self) -> None:
        self.node._kill("coredns")


def containerd_config(root: Path, runtime: str, cni_bin: Path = CNI_BIN) -> str:
    """containerd's configuration, version 2 (containerd 1.6's; containerd v2 migrates it when it loads it): its own
    root, state and socket, the CRI plugin with the node's sandbox image, cgroupfs (no systemd here), ``runtime``
    (runc or crun) as the OCI runtime, the CNI plugins in ``cni_bin`` (Debian's by default)."""
    binary = shutil.which(runtime) or runtime
    return f"""version = 2
root = "{root}/containerd/root"
state = "{root}/containerd/state"
[grpc]
  address = "{root}/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  # This machine refuses any process, root included, a lower oom_score_adj than its own ("failed to update
  # /proc/self/oom_score_adj: Permission denied" from runc for the sandbox's -998): clamp it to containerd's.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "default"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.default]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.default.options]
        BinaryName = "{binary}"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{cni_bin}"
    conf_dir = "{root}/cni"
"""


def cni_config(subnet: str, bridge: str) -> str:
    return json.dumps({"cniVersion": "0.4.0", "name": "gatehouse", "plugins": [
        {"type": "bridge", "bridge": bridge, "isGateway": True, "ipMasq": False, "hairpinMode": True,
         "ipam": {"type": "host-local", "ranges": [[{"subnet": subnet}]], "routes": [{"dst": "0.0.0.0/0"}],
                  "dataDir": "CNI_DATA"}},
        {"type": "portmap", "capabilities": {"portMappings": True}}]})


def kubelet_config(root: Path, cluster: Cluster, port: int, healthz_port: int,
                   cluster_dns: str | None = None) -> dict[str, object]:
    dns: dict[str, object] = {"clusterDNS": [cluster_dns], "clusterDomain": "cluster.local"} if cluster_dns else {}
    return {
        **dns,
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
        # These machines mount cgroup v1; kubelets of 1.35 and later refuse it unless told not to.
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "containerRuntimeEndpoint": f"unix://{root}/containerd.sock",
        "port": port, "readOnlyPort": 0, "healthzBindAddress": "127.0.0.1", "healthzPort": healthz_port,
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True},
                           "x509": {"clientCAFile": str(cluster.ca)}},
        "authorization": {"mode": "Webhook"},
        "failSwapOn": False,
        "resolvConf": "/etc/resolv.conf",
        # A test node shares its disk with everything else: no eviction, no image garbage collection (the images
        # cannot be pulled back).
        "evictionHard": {"memory.available": "0%", "nodefs.available": "0%", "imagefs.available": "0%",
                         "nodefs.inodesFree": "0%"},
        "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
        "syncFrequency": "5s", "fileCheckFrequency": "5s", "nodeStatusUpdateFrequency": "5s",
        "serializeImagePulls": False,
    }


class RealNode:
    """containerd and the kubelet for ``cluster``; ``runtime``: ``runc`` or ``crun``; ``containerd``: a directory
    with ``containerd``, its shim, ``ctr`` and the CNI plugins (:func:`containerd_v2`), or None for Debian's;
    ``cluster_dns``: the address pods resolve names at (:class:`ClusterDns`)."""

    def __init__(self, cluster: Cluster, name: str = "node-1", runtime: str = "runc",
                 containerd: Path | None = None, cluster_dns: str | None = None) -> None:
        self.cluster = cluster
        self.cluster_dns = cluster_dns  # the kubelet's clusterDNS (pods' resolv.conf); None: the host's resolv.conf
        self.name = name
        self.runtime = runtime
        self.containerd = containerd
        self.root = Path(f"/tmp/gh-node-{uuid.uuid4().hex[:8]}")
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.bridge = f"gh{self.root.name[-8:-2]}"
        self.times: dict[str, float] = {}

    def log(self, component: str) -> Path:
        return self.root / "logs" / f"{component}.log"

    def start(self, timeout: float = 120.0) -> None:
        images = prepare()
        for sub in ("logs", "containerd", "cni", "kubelet", "cni-data"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        try:
            self._start_containerd(images)
            self._start_kubelet(timeout)
        except BaseException:
            self.stop()
            raise

    def _spawn(self, component: str, args: list[str]) -> None:
        log = self.log(component).open("ab")
        # containerd finds its shim on PATH: the built one first when the node runs containerd v2.
        env = {**os.environ, "PATH": f"{self.containerd}:{os.environ['PATH']}"} if self.containerd else None
        # Dies with this process (PR_SET_PDEATHSIG), like the control plane's components.
        self.procs[component] = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                                 start_new_session=True, preexec_fn=launcher._die_with_parent, env=env)
        log.close()

    def load(self, archive: Path) -> float:
        """Import an OCI archive (one image, tagged with its full reference) into the node; the seconds it took."""
        started = time.monotonic()
        self.ctr("images", "import", str(archive))
        return time.monotonic() - started

    def ctr(self, *args: str) -> str:
        return _run(self._tool("ctr"), "--address", str(self.root / "containerd.sock"), "-n", "k8s.io", *args)

    def _tool(self, name: str) -> str:
        return str(self.containerd / name) if self.containerd else name

    def _start_containerd(self, images: dict[str, Path]) -> None:
        started = time.monotonic()
        config = self.root / "containerd" / "config.toml"
        config.write_text(containerd_config(self.root, self.runtime, self.containerd or CNI_BIN))
        (self.root / "cni" / "10-gatehouse.conflist").write_text(
            cni_config(POD_SUBNET, self.bridge).replace("CNI_DATA", str(self.root / "cni-data")))
        self._service_nat()
        (self.root / "containerd.sock").unlink(missing_ok=True)  # a killed containerd's: wait for the new one's
        self._spawn("containerd", [self._tool("containerd"), "--config", str(config)])
        deadline = time.monotonic() + 30
        while not (self.root / "containerd.sock").exists():
            self._check_alive("containerd")
            if time.monotonic() > deadline:
                raise ClusterFailed(f"containerd did not serve in 30 s: {self._tail('containerd')}")
            time.sleep(0.1)
        for reference, tarball in images.items():
            self.ctr("images", "import", "--base-name", reference.rsplit(":", 1)[0], str(tarball))
        self.times["containerd"] = time.monotonic() - started

    def _nat_rule(self) -> list[str]:
        return ["PREROUTING", "-i", self.bridge, "-d", KUBERNETES_SERVICE_IP, "-p", "tcp", "--dport", "443", "-j", "DNAT",
                "--to-destination", f"127.0.0.1:{self.cluster.layout.apiserver_port}"]

    def _service_nat(self) -> None:
        """No kube-proxy: the one Service pods need, ``kubernetes`` (10.96.0.1:443, what the kubelet puts in
        KUBERNETES_SERVICE_HOST), DNATed from the pods' bridge to the API server on 127.0.0.1. The bridge is made
        here (the CNI plugin takes it as it is) so that only it may route to 127.0.0.1 (``route_localnet``)."""
        _run("ip", "link", "add", self.bridge, "type", "bridge")
        _run("ip", "link", "set", self.bridge, "up")
        # The gateway's address now rather than at the first pod's CNI ADD (the plugin keeps it): a process of the
        # host that serves the pods (a test's MCP server) listens on it from the start.
        _run("ip", "addr", "add", f"{GATEWAY}/16", "dev", self.bridge)
        Path(f"/proc/sys/net/ipv4/conf/{self.bridge}/route_localnet").write_text("1\n")
        _run("iptables", "-t", "nat", "-A", *self._nat_rule())

    def _start_kubelet(self, timeout: float) -> None:
        started = time.monotonic()
        # What kubeadm binds: the API server's client certificate may read logs and exec through the kubelet.
        binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                   "metadata": {"name": "kube-apiserver-kubelet-api-admin"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                               "name": "system:kubelet-api-admin"},
                   "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "kube-apiserver"}]}
        made = self.cluster.kubectl("apply", "-f", "-", stdin=json.dumps(binding))
        if made.returncode != 0:
            raise ClusterFailed(f"the kubelet API binding was refused: {made.stderr}")
        kubeconfig = self.cluster.user(f"system:node:{self.name}", ["system:nodes"])
        config = self.root / "kubelet.yaml"
        config.write_text(json.dumps(kubelet_config(self.root, self.cluster, free_port(), free_port(), self.cluster_dns)))
        self._spawn("kubelet", [str(bins.built()["kubelet"]), f"--config={config}", f"--kubeconfig={kubeconfig}",
                                f"--root-dir={self.root / 'kubelet'}", f"--hostname-override={self.name}",
                                "--v=2"])
        client = rest.client(self.cluster.kubeconfig())
        deadline = time.monotonic() + timeout
        while True:
            self._check_alive("kubelet")
            reply = client.get(f"/api/v1/nodes/{self.name}")
            if reply.status_code == 200:
                conditions = {c["type"]: c for c in reply.json().get("status", {}).get("conditions", [])}
                if conditions.get("Ready", {}).get("status") == "True":
                    break
                why = conditions.get("Ready", {}).get("message", "no Ready condition")
            else:
                why = f"{reply.status_code} {rest.message(reply)}"
            if time.monotonic() > deadline:
                raise ClusterFailed(f"node {self.name} not Ready in {timeout:.0f} s ({why}); kubelet:\n"
                                    f"{self._tail('kubelet', 40)}")
            time.sleep(0.5)
        self.times["kubelet"] = time.monotonic() - started

    def reboot(self, timeout: float = 120.0) -> dict[str, float]:
        """What a node's reboot does to its pods: every container killed (SIGKILL), containerd and the kubelet
        stopped, the pods' mounts and the bridge gone, containerd's state (``/run`` on a real node) lost; then
        containerd and the kubelet started again on the same root (images, the kubelet's pods directory, the CNI
        allocations: a real node keeps those on disk). The Node object stays, as it does for a reboot. Returns
        the seconds each half took."""
        started = time.monotonic()
        self._kill("kubelet")
        self._tear_down()
        shutil.rmtree(self.root / "containerd" / "state", ignore_errors=True)
        down = time.monotonic() - started
        self._start_containerd(prepare())
        self._start_kubelet(timeout)
        return {"down": down, "up": time.monotonic() - started - down}

    def _tear_down(self) -> None:
        """What stopping and rebooting share, once the kubelet is gone: every container killed, containerd and its
        shims stopped, the NAT rule, the bridge and the pods' mounts removed."""
        self._kill_tasks()
        self._kill("containerd")
        self._kill_shims()
        subprocess.run(["iptables", "-t", "nat", "-D", *self._nat_rule()], capture_output=True)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)
        self._unmount()

    def _kill_tasks(self) -> None:
        if "containerd" in self.procs and self.procs["containerd"].poll() is None:
            try:
                for task in self.ctr("tasks", "ls", "-q").split():
                    subprocess.run([self._tool("ctr"), "--address", str(self.root / "containerd.sock"), "-n", "k8s.io", "tasks",
                                    "kill", "-s", "SIGKILL", task], capture_output=True)
            except ClusterFailed:
                pass
            time.sleep(1)

    def _check_alive(self, component: str) -> None:
        if self.procs[component].poll() is not None:
            raise ClusterFailed(f"{component} exited ({self.procs[component].returncode}):\n{self._tail(component, 40)}")

    def _tail(self, component: str, lines: int = 15) -> str:
        try:
            return "\n".join(self.log(component).read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        """The kubelet first (it would restart what is stopped), then every container of the node, containerd, the
        pods' mounts, the bridge; the state directory is removed unless ``$GATEHOUSE_KEEP_NODE`` is set. The Node
        object goes too: a stopped node stays Ready in the API for the node controller's grace period (40 s), and the
        scheduler bound the next test's operator pods to such a node (`make e2e-node`: crun's node, then runc's)."""
        self._kill("kubelet")
        self.cluster.kubectl("delete", "node", self.name, "--ignore-not-found", "--wait=false")
        self._tear_down()
        if not os.environ.get("GATEHOUSE_KEEP_NODE"):
            self._unmount()
            shutil.rmtree(self.root, ignore_errors=True)

    def _kill(self, component: str) -> None:
        proc = self.procs.get(component)
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def _kill_shims(self) -> None:
        """containerd-shim-runc-v2 processes outlive containerd; those of this node name its socket's path."""
        marker = str(self.root / "containerd.sock").encode()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if b"containerd-shim" in cmdline and marker in cmdline:
                try:
                    os.kill(int(entry.name), signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass

    def _unmount(self) -> None:
        mounts = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
        for mount in sorted((m for m in mounts if m.startswith(str(self.root) + "/")), key=len, reverse=True):
            subprocess.run(["umount", "-l", mount], capture_output=True)
