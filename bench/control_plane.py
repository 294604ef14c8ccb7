"""The real control plane for the bench's Kubernetes rows (issue 40, bar 5): what ``tests/support/cluster`` builds
and starts (etcd, kube-apiserver, kube-controller-manager, kube-scheduler from their Go modules, as local processes;
docs/control-plane.md), with charts/gatehouse installed by the real helm and one node, registered and cordoned.

Why a cordoned node (and not none): a cluster has nodes; an Agent's Deployment makes a ReplicaSet and a Pod there
(the real controllers do, the emulator makes neither), and the real scheduler takes each Pod, finds the one node
unschedulable (``spec.unschedulable``, the node controller's ``node.kubernetes.io/unschedulable`` taint) and leaves it
Pending. So the API server carries everything a cluster adds per Agent but running pods, which no node here can
(the stand-in node of ``tests/support/cluster/node.py`` runs nothing). With no node at all the scheduler would have
no node to filter, the only difference; the Pods and ReplicaSets would be there either way.

What is read, and how, without adding load to what is measured:

- **the audit log** (``logs/audit.log``: every request at Metadata level, one JSON line each, the API server's own
  record): which user sent what (:func:`counted`, :func:`by_user`, :func:`breakdown`), so the operator's requests
  are the ones of its ServiceAccount and the runtime's those of the Agent's;
- **a watch** (:class:`Watch`) over HTTPS as the admin, in a thread of the bench: each event timed when it arrives,
  i.e. what ``kubectl get -w`` would show, the watch's delivery included.

:func:`unavailable` says why the real control plane cannot run here (no Go, the binaries not built, no kubectl or
helm); the rows then carry that reason.
"""

from __future__ import annotations

import contextlib
import json
import os
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

__all__ = ["NODE", "ControlPlane", "Cores", "EventLog", "Operator", "Watch", "breakdown", "by_user", "control_plane",
           "counted", "service_account_user", "settle", "tls_context", "unavailable", "users"]

NODE = "bench-node"


def unavailable() -> str:
    """Why the real control plane cannot run here, or "" when it can."""
    try:
        from tests.support.cluster import binaries
    except ImportError as exc:  # an installed bench without the repository's tests
        return f"no real control plane: tests.support.cluster is not importable ({exc})"
    try:
        binaries.built()
        binaries.kubectl_binary()
        binaries.helm_binary()
    except binaries.ClusterUnavailable as exc:
        return f"no real control plane: {str(exc).splitlines()[0]}"
    return ""


def service_account_user(namespace: str, name: str) -> str:
    return f"system:serviceaccount:{namespace}:{name}"


def counted(event: Mapping[str, Any]) -> bool:
    """An audit event that is one request answered: the ``ResponseComplete`` stage (a long-running request also has
    ``ResponseStarted``), watches excluded (a watch is one long request, not work per object)."""
    return event.get("stage") == "ResponseComplete" and event.get("verb") != "watch"


def by_user(events: Iterable[Mapping[str, Any]], username: str) -> list[Mapping[str, Any]]:
    """The counted requests of ``username``."""
    return [e for e in events if counted(e) and (e.get("user") or {}).get("username") == username]


def breakdown(events: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Requests by verb and resource (``create deployments``, ``patch agents/status``), most first."""
    counts: dict[str, int] = {}
    for e in events:
        ref = e.get("objectRef") or {}
        what = ref.get("resource") or e.get("requestURI", "?").split("?")[0]
        if ref.get("subresource"):
            what += "/" + ref["subresource"]
        key = f"{e.get('verb')} {what}"
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


def users(events: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Counted requests per user, most first (who else loaded the API server meanwhile)."""
    counts: dict[str, int] = {}
    for e in events:
        if counted(e):
            name = (e.get("user") or {}).get("username") or "?"
            counts[name] = counts.get(name, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


class EventLog:
    """The audit log read as it grows: :meth:`read` returns the events written since the last read (whole lines)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._rest = b""

    def read(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        with self.path.open("rb") as f:
            f.seek(self._offset)
            data = f.read()
        self._offset += len(data)
        lines = (self._rest + data).split(b"\n")
        self._rest = lines.pop()
        out = []
        for line in lines:
            with contextlib.suppress(ValueError):
                out.append(_slim(json.loads(line)))
        return out


def _slim(event: dict[str, Any]) -> dict[str, Any]:
    """What the bench reads of an audit event (2,000 Agents make ~100,000 of them: the rest is not kept)."""
    return {"stage": event.get("stage"), "verb": event.get("verb"),
            "user": {"username": (event.get("user") or {}).get("username")}, "objectRef": event.get("objectRef") or {},
            "requestURI": event.get("requestURI", "")}


def _client(kubeconfig: Path) -> httpx.Client:
    from tests.support.cluster import rest

    return rest.client(kubeconfig)


def tls_context(kubeconfig: Path) -> tuple[str, ssl.SSLContext]:
    """The server and a TLS context with the kubeconfig's CA and client certificate (the bench's async clients)."""
    config = yaml.safe_load(kubeconfig.read_text())
    cluster, user = config["clusters"][0]["cluster"], config["users"][0]["user"]
    context = ssl.create_default_context(cafile=cluster["certificate-authority"])
    context.load_cert_chain(user["client-certificate"], user["client-key"])
    return cluster["server"], context


class Watch:
    """A list then a watch of ``path`` in a thread; ``on_event((time.monotonic() at arrival, event))`` for each
    object (the listed ones as ADDED). Reconnects from the last resourceVersion when the server ends the watch."""

    def __init__(self, kubeconfig: Path, path: str, on_event: Callable[[tuple[float, dict[str, Any]]], None]) -> None:
        self._http = _client(kubeconfig)
        self._path, self._on_event = path, on_event
        self._stop = threading.Event()
        self._ready = threading.Event()
        self.error: BaseException | None = None
        self.retries = 0  # 429s and 5xx answered to a list or watch, each waited out
        self._thread = threading.Thread(target=self._run, name=f"watch {path}", daemon=True)
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError(f"the watch of {path} did not start: {self.error}")

    def _run(self) -> None:
        version = ""
        try:
            while not self._stop.is_set():
                if not version:  # first, or after 410 Gone: list again (the listed objects as ADDED)
                    listed = self._http.get(self._path)
                    if self._retry_later(listed):
                        continue
                    listed.raise_for_status()
                    body = listed.json()
                    for item in body.get("items") or []:
                        self._on_event((time.monotonic(), {"type": "ADDED", "object": item}))
                    version = body["metadata"]["resourceVersion"]
                    self._ready.set()
                params = {"watch": "1", "resourceVersion": version, "allowWatchBookmarks": "true",
                          "timeoutSeconds": "1800"}
                with self._http.stream("GET", self._path, params=params, timeout=None) as reply:
                    if self._retry_later(reply):
                        continue
                    reply.raise_for_status()
                    for line in reply.iter_lines():
                        if not line:
                            continue
                        arrived = time.monotonic()
                        event = json.loads(line)
                        obj = event.get("object") or {}
                        if event.get("type") == "ERROR":
                            if obj.get("code") == 410:
                                version = ""
                                break
                            raise RuntimeError(f"watch of {self._path}: {obj.get('message')}")
                        version = (obj.get("metadata") or {}).get("resourceVersion") or version
                        if event.get("type") != "BOOKMARK":
                            self._on_event((arrived, event))
        except (httpx.HTTPError, RuntimeError, ValueError) as exc:
            if not self._stop.is_set():
                self.error = exc
        finally:
            self._ready.set()

    def _retry_later(self, reply: httpx.Response) -> bool:
        """A 429 (API Priority and Fairness under load) or 5xx: wait as the server says, then again."""
        if reply.status_code != 429 and reply.status_code < 500:
            return False
        self.retries += 1
        self._stop.wait(float(reply.headers.get("Retry-After") or 1))
        return True

    def close(self) -> None:
        self._stop.set()
        self._http.close()  # ends the stream the thread reads
        self._thread.join(timeout=10)


@dataclass
class ControlPlane:
    cluster: Any  # tests.support.cluster.Cluster
    release: Any  # tests.support.cluster.chart.Release

    @property
    def operator_account(self) -> tuple[str, str]:
        return self.release.namespace, f"{self.release.fullname}-operator"

    def pids(self) -> dict[str, int]:
        return dict(self.cluster.pids)

    def admin(self) -> httpx.Client:
        return _client(self.cluster.kubeconfig())


@contextlib.contextmanager
def control_plane() -> Iterator[ControlPlane]:
    """A fresh cluster owned by the bench process (it dies with it), the chart installed, one node registered and
    cordoned; stopped and removed afterwards."""
    from tests.support.cluster import launcher
    from tests.support.cluster.chart import install
    from tests.support.cluster.node import Node

    cluster = launcher.start()
    node = None
    try:
        release = install(cluster)
        node = Node(cluster, NODE)
        node.start()
        with _client(cluster.kubeconfig()) as admin:  # kubectl cordon: the same merge patch
            admin.patch(f"/api/v1/nodes/{NODE}", content=json.dumps({"spec": {"unschedulable": True}}),
                        headers={"Content-Type": "application/merge-patch+json"}).raise_for_status()
        yield ControlPlane(cluster, release)
    finally:
        if node is not None:
            node.stop()
        launcher.stop(cluster.layout.root)


class Operator:
    """The chart's operator container as a local process: its command (``kopf run -m gatehouse_operator --standalone
    --all-namespaces``, what the emulator's rows run too) and its environment as ``helm install`` rendered them, with
    the chart's operator ServiceAccount token as its only credential, so the chart's RBAC applies to every request it
    sends. Two changes: no leader election (one replica; as in the emulator's rows, so the two count the same
    requests: the Lease's renewals are no reconcile's), and no HTTP endpoint (a pod's port; nothing reads it here).
    ``env`` overrides the chart's values (the resync and Secret-check intervals)."""

    def __init__(self, cp: ControlPlane, log: Path, env: Mapping[str, str]) -> None:
        from bench.operator_hook import REPO
        from tests.support.cluster.operators import chart_command

        namespace, name = cp.operator_account
        self.user = service_account_user(namespace, name)
        kubeconfig = cp.cluster.service_account(namespace, name)
        command, chart_env = chart_command(cp.cluster, cp.release)
        chart_env = {k: v for k, v in chart_env.items()
                     if not k.startswith("GATEHOUSE_LEADER_ELECTION") and k != "GATEHOUSE_OPERATOR_LISTEN"}
        # This checkout's packages first (not an editable install's elsewhere).
        path = os.pathsep.join(p for p in (str(REPO), str(REPO / "operator"), os.environ.get("PYTHONPATH")) if p)
        self._log = log
        with log.open("ab") as out:
            self.proc = subprocess.Popen(
                command, cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                env={**os.environ, **chart_env, "KUBECONFIG": str(kubeconfig), "PYTHONUNBUFFERED": "1", "PYTHONPATH": path,
                     "GATEHOUSE_RUNTIME_IMAGE": "ghcr.io/gatehouse-dev/gatehouse:bench", **env})

    def wait_watching(self, audit: EventLog, timeout: float = 60.0) -> None:
        """Until the audit log shows its watch of Agents."""
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the operator exited with {self.proc.returncode}: "
                                   f"{self._log.read_text(errors='replace')[-2000:]}")
            for e in audit.read():
                ref = e.get("objectRef") or {}
                if (e.get("verb") == "watch" and ref.get("resource") == "agents"
                        and (e.get("user") or {}).get("username") == self.user):
                    return
            if time.monotonic() > deadline:
                raise TimeoutError(f"the operator did not watch Agents within {timeout:.0f}s")
            time.sleep(0.2)

    def stop(self) -> None:
        from agent_runtime.clients import processes

        processes.stop(self.proc, grace=10)


def settle(audit: EventLog, username: str, into: list[dict[str, Any]], quiet: float = 1.5,
           timeout: float = 120.0) -> None:
    """Until ``username`` has sent no request for ``quiet`` seconds; every event read meanwhile is added to ``into``."""
    deadline = time.monotonic() + timeout
    since = time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.2)
        new = audit.read()
        into.extend(new)
        if by_user(new, username):
            since = time.monotonic()
        elif time.monotonic() - since >= quiet:
            return
    raise TimeoutError(f"{username} never went quiet")


class Cores:
    """CPU seconds of named processes (the control plane's components, the operator, the runtime) between readings."""

    def __init__(self, pids: Mapping[str, int]) -> None:
        import psutil

        self._procs = {}
        for name, pid in pids.items():
            with contextlib.suppress(psutil.Error):
                self._procs[name] = psutil.Process(pid)

    def read(self) -> dict[str, float]:
        import psutil

        out = {}
        for name, proc in self._procs.items():
            with contextlib.suppress(psutil.Error):
                t = proc.cpu_times()
                out[name] = t.user + t.system
        return out

    @staticmethod
    def used(before: Mapping[str, float], after: Mapping[str, float], seconds: float) -> dict[str, float]:
        return {k: round((after[k] - before[k]) / seconds, 2) for k in before if k in after} if seconds > 0 else {}
