"""Start and stop a real control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler) as processes.

Every cluster lives in its own directory under ``.gatehouse/clusters/``: certificates, kubeconfigs, etcd's data,
logs, the audit log and ``state.json`` (the PIDs it started, and the PID that owns it). Stopping a cluster kills
those PIDs (each checked against its command line first, so a recycled PID is never hit) and removes the
directory. A cluster whose owner is gone (a test run killed with -9) is such leftovers: the next start stops and
removes it. A cluster started by ``make cluster-up`` has no owner and lives until ``make cluster-down``.

Ports are picked free at start, so two runs on one machine do not collide.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import re
import shutil
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.cluster import binaries as bins
from tests.support.cluster import components, kubeconfigs, pki, storage
from tests.support.processes import free_port

__all__ = ["CLUSTERS", "Cluster", "ClusterFailed", "start", "stop", "stop_leftovers"]

CLUSTERS = bins.REPO / ".gatehouse" / "clusters"
_STATE = "state.json"
# Users every cluster has, each with a client certificate: (name, groups).
USERS = {"admin": ("kubernetes-admin", ("system:masters",)), "alice": ("alice", ("sre",)), "bob": ("bob", ())}


class ClusterFailed(RuntimeError):
    """A component did not start or get ready; the message carries the end of its log."""


@dataclass
class Cluster:
    """A running control plane: where its files are and how to reach it."""

    layout: components.Layout
    kubectl_path: Path
    helm_path: Path
    authority: pki.Authority | None = None  # kept by the process that started the cluster, to make more users
    owner: list[int] | None = None  # (pid, start time) of the process whose end makes the cluster a leftover
    pids: dict[str, int] = field(default_factory=dict)
    commands: dict[str, list[str]] = field(default_factory=dict)  # each component's command line, to start it again
    owned: bool = True  # its processes die with the process that started them

    @property
    def server(self) -> str:
        return self.layout.server

    @property
    def ca(self) -> Path:
        return self.layout.pki / "ca.crt"

    def kubeconfig(self, user: str = "admin") -> Path:
        """The kubeconfig of ``admin`` (system:masters), ``alice`` (group sre) or ``bob`` (no groups)."""
        return self.layout.kubeconfig(user)

    def kubectl(self, *args: str, user: str = "admin", stdin: str | None = None,
                timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Run the real kubectl as ``user``; the caller checks the outcome."""
        return subprocess.run([str(self.kubectl_path), f"--kubeconfig={self.kubeconfig(user)}", *args],
                              input=stdin, capture_output=True, text=True, timeout=timeout)

    def service_account(self, namespace: str, name: str, *, audience: str | None = None,
                        duration: str = "1h") -> Path:
        """A kubeconfig for ServiceAccount ``namespace/name`` (created if missing), with a token the TokenRequest
        API issued; made once per account, audience and duration (the token outlives a test session)."""
        stem = re.sub(r"[^A-Za-z0-9.-]", "_", audience or "api")  # an audience may be a URL or hold a slash
        path = self.layout.root / f"sa-{namespace}-{name}-{stem}-{duration}.kubeconfig"
        if path.exists():
            return path
        self.kubectl("create", "serviceaccount", name, "-n", namespace)  # AlreadyExists is fine
        args = ["create", "token", name, "-n", namespace, f"--duration={duration}"]
        if audience:
            args.append(f"--audience={audience}")
        proc = self.kubectl(*args)
        if proc.returncode != 0:
            raise ClusterFailed(f"kubectl create token {namespace}/{name}: {proc.stderr}")
        kubeconfigs.write(path, self.server, self.ca, f"system:serviceaccount:{namespace}:{name}",
                          token=proc.stdout.strip())
        return path

    def kill(self, component: str) -> None:
        """Kill one component with SIGKILL, as a crash would (``etcd``, ``kube-apiserver``, …); the rest runs on."""
        pid = self.pids.pop(component)
        if _started_here(pid, self.layout.root):
            os.kill(pid, signal.SIGKILL)
            _reap(pid, time.monotonic() + 10)
        _write_state(self)

    def restart(self, component: str, timeout: float = 60.0) -> float:
        """Start a killed component again with its command line (same ports, same data) and wait until the API server
        serves again (its /readyz checks etcd too); returns the seconds that took."""
        started = time.monotonic()
        _launch(self, component, self.commands[component], self.owned)
        self.pids = {c: self.pids[c] for c in self.commands if c in self.pids}  # the start order: stop() stops etcd last
        _write_state(self)
        deadline = started + timeout
        _wait_paths(self, ["/readyz"], deadline)
        if component == "kube-scheduler":
            _wait_healthz(self, self.layout.scheduler_port, component, deadline)
        return time.monotonic() - started

    def user(self, name: str, groups: list[str] | tuple[str, ...] = ()) -> Path:
        """A kubeconfig for any ``name`` in ``groups`` (the API server adds system:authenticated), by a client
        certificate of this cluster's CA: the x509 authenticator takes CN as the user and each O as a group."""
        if self.authority is None:
            raise ClusterFailed("only the process that started the cluster holds its CA key")
        stem = "user-" + hashlib.sha256(repr((name, tuple(groups))).encode()).hexdigest()[:12]
        path = self.layout.root / f"{stem}.kubeconfig"
        if not path.exists():
            pair = self.authority.client(stem, name, [g for g in groups if g != "system:authenticated"])
            kubeconfigs.write(path, self.server, self.ca, name, client=pair)
        return path


def start(*, owned: bool = True, name: str | None = None, timeout: float = 120.0,
          owner_pid: int | None = None) -> Cluster:
    """Start a cluster (building nothing: :func:`binaries.built` must find the binaries) and wait until it serves
    and its controllers have made the ``default`` ServiceAccount. ``owned``: this process owns it and it dies with
    this process (tests); otherwise it lives until :func:`stop` (``make cluster-up``), and is a leftover once
    ``owner_pid`` (if given) is gone."""
    stop_leftovers()
    binaries = bins.built()
    for attempt in (1, 2):
        try:
            return _start(binaries, owned, name, timeout, os.getpid() if owned else owner_pid)
        except ClusterFailed as exc:
            # A free port picked here can be taken by another process before the component binds it: once more.
            if attempt == 2 or "address already in use" not in str(exc):
                raise
    raise AssertionError("unreachable")


def _start(binaries: bins.Binaries, owned: bool, name: str | None, timeout: float, owner_pid: int | None) -> Cluster:
    root = CLUSTERS / (name or f"run-{uuid.uuid4().hex[:8]}")
    if root.exists():
        stop(root)
    layout = components.Layout(root, *(free_port() for _ in range(5)))
    cluster = Cluster(layout, bins.kubectl_binary(), bins.helm_binary(), owned=owned)
    cluster.owner = None if owner_pid is None else _identity(owner_pid)
    root.mkdir(parents=True)
    _write_state(cluster)  # first, so that no other run takes this directory for leftovers
    for sub in ("pki", "logs", "etcd", "controller-manager"):
        (root / sub).mkdir(mode=0o700)
    cluster.authority = _make_credentials(layout)
    try:
        _launch(cluster, "etcd", components.etcd(binaries["etcd"], layout), owned)
        _launch(cluster, "kube-apiserver", components.apiserver(binaries["kube-apiserver"], layout), owned)
        deadline = time.monotonic() + timeout
        # /readyz includes the RBAC bootstrap: started earlier, the controller-manager finds no role and exits.
        _wait_paths(cluster, ["/readyz"], deadline)
        _launch(cluster, "kube-controller-manager",
                components.controller_manager(binaries["kube-controller-manager"], layout), owned)
        _launch(cluster, "kube-scheduler", components.scheduler(binaries["kube-scheduler"], layout), owned)
        # The ServiceAccount and root-CA controllers at work: a pod in "default" can now be admitted.
        _wait_paths(cluster, ["/api/v1/namespaces/default/serviceaccounts/default",
                              "/api/v1/namespaces/default/configmaps/kube-root-ca.crt"], deadline)
        _wait_healthz(cluster, layout.scheduler_port, "kube-scheduler", deadline)
        _make_storage(cluster)
    except BaseException:
        stop(root)
        raise
    return cluster


def _make_credentials(layout: components.Layout) -> pki.Authority:
    ca = pki.Authority(layout.pki)
    ca.serving("apiserver", ["127.0.0.1", "localhost", "kubernetes", "kubernetes.default",
                             "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "10.96.0.1"])
    # The API server's identity towards kubelets (the node stand-in), bound to system:kubelet-api-admin.
    ca.client("apiserver-kubelet-client", "kube-apiserver")
    pki.write_signing_key(layout.pki / "sa.key", layout.pki / "sa.pub")
    (layout.root / "audit-policy.yaml").write_text(components.AUDIT_POLICY)
    identities = {**USERS, "controller-manager": ("system:kube-controller-manager", ()),
                  "scheduler": ("system:kube-scheduler", ())}
    for stem, (user, groups) in identities.items():
        pair = ca.client(f"client-{stem}", user, groups)
        kubeconfigs.write(layout.kubeconfig(stem), layout.server, ca.pair.cert, user, client=pair)
    return ca


def _make_storage(cluster: Cluster) -> None:
    documents = storage.manifests(cluster.layout.root / "volumes")
    made = cluster.kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": documents}))
    if made.returncode != 0:
        raise ClusterFailed(f"the StorageClass and volumes were refused: {made.stderr}")


def _launch(cluster: Cluster, component: str, args: list[str], owned: bool) -> None:
    log = cluster.layout.log(component).open("ab")
    # A cluster owned by this process dies with it (PR_SET_PDEATHSIG); either way the components get their own
    # session, so a terminal's Ctrl-C reaches the launcher, which stops them in order.
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True, preexec_fn=_die_with_parent if owned else None)
    log.close()
    cluster.pids[component] = proc.pid
    cluster.commands[component] = args
    _write_state(cluster)


_LIBC = ctypes.CDLL(None, use_errno=True)  # loaded here: the forked child must not import or load anything


def _die_with_parent() -> None:
    _LIBC.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _wait_paths(cluster: Cluster, paths: list[str], deadline: float) -> None:
    """Until each of ``paths`` answers 200 to the admin."""
    context = ssl.create_default_context(cafile=str(cluster.ca))
    pair = cluster.layout.pki
    context.load_cert_chain(pair / "client-admin.crt", pair / "client-admin.key")
    checks = list(paths)
    while checks:
        _check_alive(cluster)
        try:
            with urllib.request.urlopen(cluster.server + checks[0], context=context, timeout=5) as resp:
                if resp.status == 200:
                    checks.pop(0)
                    continue
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        if time.monotonic() > deadline:
            raise ClusterFailed(f"{cluster.server}{checks[0]} not ready in time\n{_tails(cluster)}")
        time.sleep(0.25)


def _wait_healthz(cluster: Cluster, port: int, component: str, deadline: float) -> None:
    context = ssl._create_unverified_context()  # its self-made serving certificate; only liveness is asked
    while True:
        _check_alive(cluster)
        try:
            with urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", context=context, timeout=5) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        if time.monotonic() > deadline:
            raise ClusterFailed(f"{component} not healthy in time\n{_tails(cluster)}")
        time.sleep(0.25)


def _check_alive(cluster: Cluster) -> None:
    for component, pid in cluster.pids.items():
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done:
            raise ClusterFailed(f"{component} exited\n{_tails(cluster)}")


def _tails(cluster: Cluster, lines: int = 15) -> str:
    out = []
    for component in cluster.pids:
        path = cluster.layout.log(component)
        text = path.read_text(errors="replace").splitlines()[-lines:] if path.exists() else []
        out.append(f"--- {path}\n" + "\n".join(text))
    return "\n".join(out)


def _write_state(cluster: Cluster) -> None:
    layout = cluster.layout
    state = {
        "owner": cluster.owner, "pids": cluster.pids, "server": layout.server,
        "ports": [layout.etcd_port, layout.etcd_peer_port, layout.apiserver_port, layout.controller_manager_port,
                  layout.scheduler_port],
    }
    (layout.root / _STATE).write_text(json.dumps(state))


def _identity(pid: int) -> list[int] | None:
    """(pid, start time in clock ticks): a PID that has been recycled since has another start time."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None
    return [pid, int(fields[19])]


def stop(root: Path, grace: float = 10.0) -> None:
    """Stop the processes ``root``'s cluster started (newest first, etcd last) and remove ``root``."""
    try:
        pids: dict[str, int] = json.loads((root / _STATE).read_text()).get("pids", {})
    except (FileNotFoundError, json.JSONDecodeError):
        pids = {}
    for pid in reversed(list(pids.values())):
        if _started_here(pid, root):
            os.kill(pid, signal.SIGTERM)
            _reap(pid, time.monotonic() + grace)
    shutil.rmtree(root, ignore_errors=True)


def _started_here(pid: int, root: Path) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return str(root).encode() in cmdline


def _reap(pid: int, deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            if os.waitpid(pid, os.WNOHANG)[0]:
                return
        except ChildProcessError:  # not our child (a leftover): watch /proc instead
            if not Path(f"/proc/{pid}").exists():
                return
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


def stop_leftovers() -> list[Path]:
    """Stop and remove every cluster whose owning process is gone, and every unowned one (``make cluster-up``) of
    which no process runs any more; returns what was removed."""
    removed = []
    for root in sorted(CLUSTERS.glob("*")) if CLUSTERS.is_dir() else []:
        try:
            state = json.loads((root / _STATE).read_text())
        except FileNotFoundError:
            if time.time() - root.stat().st_mtime < 60:
                continue  # another run has just made it
            state = {"owner": [0, 0]}  # never got as far as writing its state
        except json.JSONDecodeError:
            continue  # being written right now
        owner = state.get("owner")
        if owner is not None:
            left = _identity(owner[0]) != owner
        else:  # an unowned cluster being started has its first process within a second
            left = (time.time() - root.stat().st_mtime > 60
                    and not any(_started_here(pid, root) for pid in state.get("pids", {}).values()))
        if left:
            stop(root)
            removed.append(root)
    return removed
