"""The operator rows: N Agents to Accepted, API requests per reconcile, writes on a no-op resync.

Against the emulated Kubernetes API of the operator's own tests (``tests/support/kube_server.serve``: kmock's
emulator with the CRDs of ``crds/``, on 127.0.0.1 from a thread), with the real operator (``python -m
gatehouse_operator --all-namespaces --standalone``, i.e. ``kopf run -m gatehouse_operator``, in a process of its own as
in a cluster; until 2026-11-26 it ran in the bench's process through ``kopf.testing.KopfRunner``, sharing one
interpreter and its GIL with the emulated API server, which a cluster never does):

1. the bench creates one ModelConfig, one RemoteMCPServer (``examples/file-manager/``) and then ``agents`` Agents
   (copies of the example Agent, ``bench-agent-<i>``) over HTTP, ``CREATORS`` at a time, as fast as the API answers;
2. **agents_to_accepted_seconds**: from the first create until every Agent has ``Accepted=True`` (read straight
   from the emulator's store, so polling adds no requests);
3. **api_requests_per_reconcile**: the operator's requests during (1)-(2), watches excluded, divided by the number
   of Agents (the bench's own creates carry their own User-Agent and are not counted). It includes kopf's own
   bookkeeping (any patch of the Agent, Events) besides the reconcile's GETs and creates; the periodic resync and
   Secret check are an hour away in this phase (a Secret check 60 s after a reconcile, the default, had added ~250
   GETs to a 63 s window: periodic work, not a reconcile's), so every request counted is a reconcile's;
4. **writes_on_noop_resync**: the operator is stopped once the API is quiet, restarted with
   ``GATEHOUSE_RESYNC_SECONDS`` low, and runs a first reconcile of every Agent (kopf keeps its last-handled state
   in memory, so after a restart that is ``on.create``) plus at least one periodic resync of every Agent over an
   unchanged cluster (reconciles counted by their read of the Agent's Deployment); every POST/PUT/PATCH/DELETE it
   sends in that window is counted (target 0). ``noop_reconciles`` and ``api_requests_per_noop_reconcile`` say
   what that window cost.

``operator_results`` reports every row as not available (with the reason) when the operator or the test
support cannot be imported, so the rest of the bench runs on.
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

__all__ = ["OPERATOR_METRICS", "not_run", "operator_results", "run_operator_bench"]

OPERATOR_METRICS = ("agents_to_accepted_seconds", "api_requests_per_reconcile", "writes_on_noop_resync")

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "file-manager"
GROUP, VERSION, NS = "gatehouse.dev", "v1alpha1", "default"
BENCH_AGENT = "gatehouse-bench/1"  # User-Agent of the bench's own requests (not counted)
WRITES = {"POST", "PUT", "PATCH", "DELETE"}
CREATORS = 8  # the bench's Agent creates in flight at once (its own load, like several kubectl applies)


def _log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.__stdout__, flush=True)


def _wait(check: Callable[[], bool], timeout: float, what: str, poll: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(poll)


def _settle(count: Callable[[], int], quiet: float = 1.5, timeout: float = 120.0) -> None:
    """Wait until no request has reached the API for ``quiet`` seconds."""
    deadline = time.monotonic() + timeout
    last, since = count(), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.1)
        now = count()
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return
    raise TimeoutError("the API server never went quiet")


@contextlib.contextmanager
def _environment(kubeconfig: Path, resync: str, secret_check: str | None = None) -> Iterator[None]:
    import kubernetes

    saved = {k: os.environ.get(k) for k in ("KUBECONFIG", "GATEHOUSE_RESYNC_SECONDS", "GATEHOUSE_RUNTIME_IMAGE",
                                            "GATEHOUSE_SECRET_CHECK_INTERVAL")}
    saved_default = kubernetes.config.kube_config.KUBE_CONFIG_DEFAULT_LOCATION
    os.environ["KUBECONFIG"] = str(kubeconfig)
    os.environ["GATEHOUSE_RESYNC_SECONDS"] = resync
    if secret_check is not None:
        os.environ["GATEHOUSE_SECRET_CHECK_INTERVAL"] = secret_check
    os.environ["GATEHOUSE_RUNTIME_IMAGE"] = "ghcr.io/gatehouse-dev/gatehouse:bench"
    kubernetes.config.kube_config.KUBE_CONFIG_DEFAULT_LOCATION = str(kubeconfig)
    try:
        yield
    finally:
        kubernetes.config.kube_config.KUBE_CONFIG_DEFAULT_LOCATION = saved_default
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


class _Operator:
    """The real operator in a process of its own (``python -m gatehouse_operator``, which is ``kopf run -m
    gatehouse_operator``), as in a cluster: it shares no interpreter, and no GIL, with the API server. Restartable;
    its log goes to ``log``."""

    def __init__(self, log: Path) -> None:
        self._log_path = log
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self, emulator: Any, settle: bool = True) -> None:
        """Start it, and return once it watches Agents (and, with ``settle``, once the API has then been quiet for a
        second: its start-up listing and watches done)."""
        mark = emulator.request_count
        with self._log_path.open("ab") as log:
            self._proc = subprocess.Popen([sys.executable, "-m", "gatehouse_operator", "--all-namespaces", "--standalone"],
                                          cwd=REPO, env=dict(os.environ), stdout=log, stderr=subprocess.STDOUT)

        def watching() -> bool:
            if self._proc is not None and self._proc.poll() is not None:
                raise RuntimeError(f"the operator exited with {self._proc.returncode}: {self._tail()}")
            return any(_is_watch(r) and r.url.path.endswith("/agents") for r in emulator.requests_since(mark))

        try:
            _wait(watching, 300, "the operator to watch Agents")  # a restart over 2,000 Agents at load 12 took over 60 s
            if settle:
                _settle(lambda: emulator.request_count, quiet=1.0, timeout=60)
        except BaseException:
            self.stop()  # no operator left running behind a failed start
            raise

    def stop(self) -> None:
        if self._proc is not None:
            proc, self._proc = self._proc, None
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def _tail(self) -> str:
        return self._log_path.read_text(errors="replace")[-2000:]


def create_agents(agents: int, create: Callable[[tuple[str, dict[str, Any]]], None]) -> None:
    """Create ``agents`` Agents with ``create`` (plural, document): their ModelConfig and RemoteMCPServer first, then the
    Agents :data:`CREATORS` at a time (both the emulator's and the real control plane's rows)."""
    manifests = _manifests(agents)
    for item in manifests[:2]:  # the ModelConfig and the RemoteMCPServer first
        create(item)
    with ThreadPoolExecutor(CREATORS) as pool:
        list(pool.map(create, manifests[2:]))


def _manifests(agents: int) -> list[tuple[str, dict[str, Any]]]:
    model = yaml.safe_load((EXAMPLE / "modelconfig.yaml").read_text())
    server = yaml.safe_load((EXAMPLE / "mcp-server.yaml").read_text())
    agent = yaml.safe_load((EXAMPLE / "agent.yaml").read_text())
    out = [("modelconfigs", model), ("remotemcpservers", server)]
    for i in range(agents):
        doc = copy.deepcopy(agent)
        doc["metadata"] = {"name": f"bench-agent-{i}", "namespace": NS}
        out.append(("agents", doc))
    return out


def _accepted(emulator: Any, names: list[str]) -> int:
    """How many of ``names`` have Accepted=True (runs in the emulator's loop; reads its store without copying,
    since the emulator serves the operator from the same loop)."""
    from kmock._internal import references

    resource = references.resource(f"{GROUP}/{VERSION}/agents")
    objects = emulator._objects
    n = 0
    for name in names:
        key = (resource, NS, name)
        stored = objects[key] if key in objects else None
        obj = None if stored is None or stored.deleted else stored.raw
        conditions = ((obj or {}).get("status") or {}).get("conditions") or []
        if any(c.get("type") == "Accepted" and c.get("status") == "True" for c in conditions):
            n += 1
    return n


def _is_watch(request: Any) -> bool:
    return request.params.get("watch") in ("true", "1")


def _operator_requests(requests: list[Any]) -> list[Any]:
    return [r for r in requests if r.headers.get("User-Agent") != BENCH_AGENT and not _is_watch(r)]


def _breakdown(requests: list[Any]) -> dict[str, int]:
    """Requests by verb and resource (``GET agents``, ``PATCH agents/status``, ``POST events``), most first."""
    counts: dict[str, int] = {}
    for r in requests:
        parts = str(r.url.path).strip("/").split("/")
        if "namespaces" in parts and len(parts) > parts.index("namespaces") + 2:
            parts = parts[parts.index("namespaces") + 2:]
        else:
            parts = parts[2:] if parts[:1] == ["api"] else parts[3:]
        what = parts[0] if parts else "/"
        if len(parts) > 2:
            what += "/" + parts[2]
        key = f"{str(r.method.value).upper()} {what}"
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


def run_operator_bench(agents: int, timeout: float = 600.0) -> dict[str, Any]:
    """Start the emulated API and the operator, apply ``agents`` Agents, measure (see the module docstring)."""
    import httpx

    from tests.support.kube_server import serve, write_kubeconfig

    with tempfile.TemporaryDirectory(prefix="gatehouse-bench-operator-") as tmp, serve() as api:
        emulator = api.emulator
        kubeconfig = write_kubeconfig(Path(tmp) / "kubeconfig", api.url)
        names = [f"bench-agent-{i}" for i in range(agents)]
        # Periodic work (resyncs, Secret checks: 60 s after a reconcile by default) kept out of the reconcile count.
        with _environment(kubeconfig, "3600", secret_check="1h"):
            operator = _Operator(Path(tmp) / "operator.log")
            operator.start(emulator)
            try:
                mark = emulator.request_count
                headers = {"User-Agent": BENCH_AGENT, "Content-Type": "application/json"}
                start = time.perf_counter()
                with httpx.Client(base_url=api.url, headers=headers, timeout=60,
                                  limits=httpx.Limits(max_connections=CREATORS)) as http:

                    def create(item: tuple[str, dict[str, Any]]) -> None:
                        plural, doc = item
                        http.post(f"/apis/{GROUP}/{VERSION}/namespaces/{NS}/{plural}", json=doc).raise_for_status()

                    create_agents(agents, create)
                created = time.perf_counter() - start
                _log(f"  operator: {agents} Agents created in {created:.1f}s")
                _wait(lambda: api.call(lambda: _accepted(emulator, names)) == agents, timeout, f"{agents} Agents Accepted",
                      poll=0.5)
                to_accepted = time.perf_counter() - start
                _log(f"  operator: {agents} Agents Accepted in {to_accepted:.1f}s")
                _settle(lambda: emulator.request_count, timeout=timeout)
                applied = _operator_requests(emulator.requests_since(mark))
            finally:
                operator.stop()

        # A restart over the unchanged cluster: a first reconcile of every Agent, then periodic resyncs.
        resync = max(2.0, agents / 100)
        with _environment(kubeconfig, str(resync)):
            mark = emulator.request_count
            # Every reconcile of an existing Agent reads its Deployment (the first one after a start reads no Agent:
            # it takes kopf's event), so those reads count the reconciles.
            agent_paths = {f"/apis/apps/v1/namespaces/{NS}/deployments/{n}" for n in names}

            seen = {"cursor": mark, "count": 0}

            def reconciles() -> int:  # incremental: the log grows by thousands of requests
                new = emulator.requests_since(seen["cursor"])
                seen["cursor"] += len(new)
                seen["count"] += sum(1 for r in new if r.method.value == "GET" and str(r.url.path) in agent_paths)
                return seen["count"]

            operator = _Operator(Path(tmp) / "operator.log")
            operator.start(emulator, settle=False)  # it reconciles every Agent from its start: counted from there
            try:
                _wait(lambda: reconciles() >= 2 * agents, timeout, "a first reconcile and one resync of every Agent", poll=0.5)
            finally:
                operator.stop()
            window = _operator_requests(emulator.requests_since(mark))
            n_reconciles = reconciles()
            writes = [r for r in window if str(r.method.value).upper() in WRITES]
            for r in writes[:10]:
                _log(f"  operator: write on a no-op resync: {r.method.value} {r.url.path} {r.text[:160]}")
    return {
        "agents_to_accepted_seconds": round(to_accepted, 2),
        "api_requests_per_reconcile": round(len(applied) / agents, 2),
        "writes_on_noop_resync": len(writes),
        "create_seconds": round(created, 2),
        "api_requests_applied": len(applied),
        "api_writes_applied": sum(1 for r in applied if str(r.method.value).upper() in WRITES),
        "api_requests_applied_by_verb": _breakdown(applied),
        "noop_reconciles": n_reconciles,
        "api_requests_per_noop_reconcile": round(len(window) / n_reconciles, 2) if n_reconciles else None,
        "resync_seconds": resync,
        "threads_left": threading.active_count(),
    }


def not_run(agents: int, reason: str) -> dict[str, Any]:
    """The operator rows when they do not run, with why."""
    return {"available": False, "reason": reason, "agents": agents, **dict.fromkeys(OPERATOR_METRICS)}


def operator_results(agents: int = 500) -> dict[str, Any]:
    """``{"available": bool, "reason": str, "agents": n, <metric>: value | None, ...}``."""
    for module in ("gatehouse_operator", "kopf", "kmock"):
        if importlib.util.find_spec(module) is None:
            return not_run(agents, f"operator bench not available ({module} is not importable)")
    try:
        return {"available": True, "reason": "", "agents": agents, **dict.fromkeys(OPERATOR_METRICS),
                **run_operator_bench(agents)}
    except Exception as exc:
        return not_run(agents, f"operator bench failed: {type(exc).__name__}: {exc}")
