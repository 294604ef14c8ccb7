"""The stand-in itself: a node that runs the Deployments of an emulated API as local processes.

:class:`Node` owns one asyncio loop in its own thread (the test's thread stays free; kopf runs in yet another). In
that loop three informers (:mod:`~tests.support.kubelet.api`) keep Deployments, Services and Pods cached, and one
reconcile pass -- on every change, at least every 0.2 s -- does what the Deployment controller, the kubelet and
the endpoints controller would:

1. per Deployment: the pods of each template (:func:`~tests.support.kubelet.controller.plan`), started
   (:class:`~tests.support.kubelet.pods.Pod`) or terminated; its ``.status`` written through ``/status`` when it
   differs from what the object holds;
2. per pod: the Pod object created (owned by the Deployment, so deleting the Deployment deletes it too), its
   status patched when it changes, the object deleted once the processes are gone; a Pod object deleted by someone
   else terminates the pod (the Deployment then replaces it);
3. the Services' ready endpoints, and every pod's ``/etc/hosts`` rewritten in place when they change.

The test-facing methods (:meth:`Node.url_of`, :meth:`Node.logs`, :meth:`Node.pods`, :meth:`Node.wait_ready`...)
are thread-safe: they run small functions in the loop, or read files.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx

from tests.support.kube_server import RunningEmulator
from tests.support.kubelet import controller, hosts, podobject, probes
from tests.support.kubelet import images as imagelib
from tests.support.kubelet.api import Api, Informer, Key
from tests.support.kubelet.apiserver import ApiListener
from tests.support.kubelet.certs import make_ca
from tests.support.kubelet.envs import kubernetes_service_env
from tests.support.kubelet.network import Network
from tests.support.kubelet.pods import Pod, Settings, Waiting

__all__ = ["Node", "PodEvent", "PodInfo"]

T = TypeVar("T")


@dataclass(frozen=True)
class PodEvent:
    """One step in a pod's life (``created``, ``started``, ``ready``, ``unready``, ``killing``, ``exited``,
    ``stopping``, ``stopped``; ``error`` when something failed, ``pod`` empty for the stand-in's own), in the order
    they happened: tests read rollout order from these."""

    at: float
    kind: str
    namespace: str
    pod: str
    deployment: str
    hash: str
    detail: str = ""


@dataclass(frozen=True)
class PodInfo:
    namespace: str
    name: str
    deployment: str
    hash: str
    ip: str
    ready: bool
    phase: str
    restarts: int
    terminating: bool


def _strip_times(status: Mapping[str, Any] | None) -> dict[str, Any]:
    out = dict(status or {})
    out["conditions"] = [{k: v for k, v in c.items() if not k.endswith("Time")} for c in out.get("conditions") or []]
    return out


class Node:
    def __init__(self, api: RunningEmulator, root: Path, *, images: Mapping[str, imagelib.Image] | None = None,
                 settings: Settings | None = None) -> None:
        self.emulator = api
        self.root = Path(root)
        self.images = {**imagelib.builtin_images(), **(images or {})}
        self.settings = settings or Settings()
        self.network = Network()
        self.history: list[PodEvent] = []
        self.processes: set[int] = set()  # container pids (process-group leaders), for an emergency stop
        self.ca_pem = ""
        self.api_url = ""  # the API as pods reach it (https://<bridge address>:<port>)
        self.api_env: dict[str, str] = {}
        self._pods: dict[Key, Pod] = {}
        self._endpoints: dict[tuple[str, str], list[hosts.Endpoint]] = {}
        self._published: dict[Key, dict[str, Any] | None] = {}
        self._listener: ApiListener | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._error: BaseException | None = None
        self._stopping: asyncio.Event | None = None
        self._wake: asyncio.Event | None = None

    @property
    def gateway(self) -> str:
        """The test host's address on the pods' network (the API listens here; bind test servers here for pods)."""
        return self.network.gateway

    # -- start and stop (test thread) -------------------------------------------------------------------

    def start(self) -> Node:
        self.root.mkdir(parents=True, exist_ok=True)
        atexit.register(self._emergency_stop)
        try:
            self.network.setup()
            ca = make_ca()
            self.ca_pem = ca.certificate
            (self.root / "ca.crt").write_text(ca.certificate)
            self._listener = ApiListener(self.emulator, self.gateway, ca.server_context(self.gateway))
            self.api_url = self._listener.start()
            self.api_env = kubernetes_service_env(self.gateway, self._listener.port)
            self._thread = threading.Thread(target=asyncio.run, args=(self._main(),), name="kubelet-stand-in", daemon=True)
            self._thread.start()
            if not self._started.wait(30) or self._error is not None:
                raise RuntimeError(f"the kubelet stand-in did not start: {self._error!r}")
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop every pod (SIGTERM, then SIGKILL after the grace), the loop, the listener; remove the network."""
        try:
            if self._loop is not None and self._thread is not None and self._thread.is_alive():
                stopping = self._stopping
                assert stopping is not None
                self._loop.call_soon_threadsafe(stopping.set)
                self._thread.join(timeout=self.settings.max_grace + 30)
            if self._listener is not None:
                self._listener.stop()
        finally:
            self._emergency_stop()
            atexit.unregister(self._emergency_stop)

    def _emergency_stop(self) -> None:
        for pid in list(self.processes):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        self.network.teardown()

    # -- the loop ---------------------------------------------------------------------------------------

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping, self._wake = asyncio.Event(), asyncio.Event()
        self.api = Api(self.emulator.url)
        self.probe_http = httpx.AsyncClient(trust_env=False, verify=False, follow_redirects=False)
        self.deployments = Informer(self.api, "/apis/apps/v1/deployments", lambda _t, _o: self.wake())
        self.services = Informer(self.api, "/api/v1/services", lambda _t, _o: self.wake())
        self.pod_objects = Informer(self.api, "/api/v1/pods", self._pod_event)
        watchers = [asyncio.create_task(i.run()) for i in (self.deployments, self.services, self.pod_objects)]
        try:
            await asyncio.wait_for(asyncio.gather(*(i.synced.wait() for i in
                                                    (self.deployments, self.services, self.pod_objects))), 20)
        except BaseException as exc:
            self._error = exc
        self._started.set()
        try:
            while self._error is None and not self._stopping.is_set():
                try:
                    await self._reconcile()
                except Exception as exc:  # e.g. the API went away mid-pass: say so (history), try again
                    self.record("error", None, repr(exc))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), 0.2)
                self._wake.clear()
        finally:
            for pod in self._pods.values():
                pod.terminate("the stand-in stops")
            await asyncio.gather(*(p.task for p in self._pods.values() if p.task), return_exceptions=True)
            for task in watchers:
                task.cancel()
            await asyncio.gather(*watchers, return_exceptions=True)
            await self.api.aclose()
            await self.probe_http.aclose()

    def wake(self) -> None:
        if self._wake is not None:
            self._wake.set()

    def record(self, kind: str, pod: Pod | None, detail: str = "") -> None:
        if pod is None:
            self.history.append(PodEvent(time.monotonic(), kind, "", "", "", "", detail))
        else:
            self.history.append(PodEvent(time.monotonic(), kind, pod.namespace, pod.name, pod.deployment, pod.hash, detail))

    def _pod_event(self, kind: str, obj: dict[str, Any]) -> None:
        pod = self._pods.get(Informer.key(obj))
        if kind == "DELETED" and pod is not None and pod.uid and obj["metadata"].get("uid") == pod.uid:
            pod.terminate("the Pod object was deleted")
        self.wake()

    async def _reconcile(self) -> None:
        wanted: set[tuple[Key, str]] = set()
        for key, deployment in list(self.deployments.cache.items()):
            wanted.add((key, deployment["metadata"].get("uid", "")))
            await self._reconcile_deployment(key, deployment)
        for pod in list(self._pods.values()):
            if ((pod.namespace, pod.deployment), pod.owner_uid) not in wanted:
                pod.terminate("the Deployment is gone")
        endpoints = hosts.service_endpoints(self.services.cache.values(), [
            hosts.Endpoint(p.namespace, p.name, p.ip, p.labels, p.ready, [c.spec for c in p.containers])
            for p in self._pods.values()])
        self._endpoints = endpoints
        for key, pod in list(self._pods.items()):
            if pod.sandbox is not None and not pod.finished:
                self.write_hosts(pod)
            if (pod.namespace, pod.deployment) in self.deployments.cache or pod.uid:
                self._published[key] = await podobject.publish(self.api, pod, self._published.get(key))
            if pod.finished:
                del self._pods[key]
                self._published.pop(key, None)

    def _views(self, key: Key, uid: str, min_ready: float) -> list[controller.PodView]:
        return [controller.PodView(p.name, p.hash, p.ready, p.available(min_ready), p.terminating, p.created)
                for p in self._pods.values() if (p.namespace, p.deployment) == key and p.owner_uid == uid]

    async def _reconcile_deployment(self, key: Key, deployment: dict[str, Any]) -> None:
        spec = deployment.get("spec") or {}
        uid = deployment["metadata"].get("uid", "")
        current = controller.template_hash(spec.get("template") or {})
        min_ready = float(spec.get("minReadySeconds", 0))
        step = controller.plan(spec, current, self._views(key, uid, min_ready))
        for name in step.stop:
            self._pods[(key[0], name)].terminate("rollout" if name.split("-")[-2] != current else "scale down")
        for _ in range(step.start):
            pod = Pod(self, deployment, spec.get("template") or {}, current)
            self._pods[(pod.namespace, pod.name)] = pod
            pod.start()
        status = controller.deployment_status(deployment, current, self._views(key, uid, min_ready), podobject.now_iso())
        if _strip_times(status) != _strip_times(deployment.get("status")):
            patch: dict[str, Any] = {k: None for k in (deployment.get("status") or {}) if k not in status}
            patch.update(status)
            updated = await self.api.merge_patch(f"/apis/apps/v1/namespaces/{key[0]}/deployments/{key[1]}/status",
                                                 {"status": patch})
            if updated is not None:
                self.deployments.cache[key] = updated

    # -- what pods ask of the node (loop) --------------------------------------------------------------

    async def token_for(self, namespace: str, service_account: str, audience: str | None = None,
                        seconds: int = 3600, pod: Pod | None = None) -> str:
        """A token the emulated API accepts as ``system:serviceaccount:<namespace>:<name>`` (as a TokenRequest would).
        The emulator has one token per ServiceAccount, for any audience and without expiry (docs/control-plane.md):
        ``audience``, ``seconds`` and ``pod`` are what the real node's TokenRequest uses."""
        running = self.emulator
        issue = lambda: running.emulator.add_service_account(namespace, service_account)  # noqa: E731
        return str(await asyncio.to_thread(running.call, issue))

    async def bind_claim(self, namespace: str, claim: str) -> None:
        """Wait for the claim (``Waiting`` while absent), then mark it Bound (binding on first use, as
        ``WaitForFirstConsumer`` storage does)."""
        path = f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{claim}"
        pvc = await self.api.get(path)
        if pvc is None:
            raise Waiting("ContainerCreating", f'persistentvolumeclaim "{claim}" not found')
        if (pvc.get("status") or {}).get("phase") != "Bound":
            spec = pvc.get("spec") or {}
            storage = ((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")
            await self.api.merge_patch(f"{path}/status", {"status": {
                "phase": "Bound", "accessModes": spec.get("accessModes") or ["ReadWriteOnce"], "capacity": {"storage": storage}}})

    def write_hosts(self, pod: Pod) -> None:
        text = hosts.render_hosts(pod.ip, pod.name, pod.namespace, self.gateway, self._endpoints)
        hosts.write_in_place(pod.dir / "hosts", text)

    # -- for tests (any thread) -------------------------------------------------------------------------

    def call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` in the stand-in's loop and return its result."""
        assert self._loop is not None

        async def run() -> T:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout=10)

    def pods(self, namespace: str | None = None, deployment: str | None = None) -> list[PodInfo]:
        """The pods that exist now (terminating ones included, until their processes are gone), oldest first."""
        def snapshot() -> list[PodInfo]:
            return [PodInfo(p.namespace, p.name, p.deployment, p.hash, p.ip, p.ready, p.phase,
                            sum(c.restarts for c in p.containers), p.terminating)
                    for p in sorted(self._pods.values(), key=lambda p: p.created)
                    if namespace in (None, p.namespace) and deployment in (None, p.deployment)]
        return self.call(snapshot)

    def endpoints(self, service: str, namespace: str = "default") -> list[str]:
        """The addresses a Service resolves to now (its Ready pods)."""
        return self.call(lambda: [e.ip for e in self._endpoints.get((namespace, service), [])])

    def _resolve(self, service: str, namespace: str, port: int | str | None) -> str | None:
        svc = self.services.cache.get((namespace, service))
        ready = self._endpoints.get((namespace, service)) or []
        if svc is None or not ready:
            return None
        ports = (svc.get("spec") or {}).get("ports") or []
        chosen = next((p for p in ports if port is None or p.get("port") == port or p.get("name") == port), None)
        if chosen is None:
            raise LookupError(f"service {namespace}/{service} has no port {port!r} (ports: {ports})")
        target = chosen.get("targetPort", chosen["port"])
        endpoint = ready[0]
        for container in endpoint.containers:
            with contextlib.suppress(LookupError):
                return f"http://{endpoint.ip}:{probes.container_port(target, container)}"
        return None

    def url_of(self, service: str, namespace: str = "default", port: int | str | None = None, timeout: float = 30.0) -> str:
        """``http://<pod ip>:<targetPort>`` of a Ready pod behind the Service (waiting up to ``timeout`` for one)."""
        deadline = time.monotonic() + timeout
        while True:
            url = self.call(lambda: self._resolve(service, namespace, port))
            if url is not None:
                return url
            if time.monotonic() > deadline:
                raise TimeoutError(f"no ready pod behind service {namespace}/{service} after {timeout}s; pods: {self.pods()}")
            time.sleep(0.1)

    def refresh_tokens(self, pod: str, namespace: str = "default") -> None:
        """Renew the pod's ServiceAccount tokens now, as at 80 % of their lifetime (a test cannot wait 8 minutes)."""
        assert self._loop is not None

        async def renew() -> None:
            running = self._pods[(namespace, pod)]
            running.tokens = {projection: (token, 0.0) for projection, (token, _) in running.tokens.items()}
            await running.refresh_tokens()

        asyncio.run_coroutine_threadsafe(renew(), self._loop).result(30)

    def pod_dir(self, pod: str, namespace: str = "default") -> Path:
        return self.root / "pods" / f"{namespace}_{pod}"

    def logs(self, pod: str, container: str | None = None, namespace: str = "default") -> str:
        """What the pod's container (default: the first) wrote to stdout and stderr: every run of it, also after the
        pod is gone; ``""`` before it first started."""
        directory = self.pod_dir(pod, namespace)
        if not directory.is_dir():
            raise LookupError(f"no pod {namespace}/{pod} ever ran here ({directory})")
        found = sorted(directory.glob(f"{container or '*'}.log"))
        return found[0].read_text(errors="replace") if found else ""  # "": not started yet

    def volume_path(self, pod: str, volume: str, namespace: str = "default") -> Path:
        """The host directory behind a pod's volume (emptyDir, Secret...: gone with the pod)."""
        return self.pod_dir(pod, namespace) / "volumes" / volume

    def claim_path(self, claim: str, namespace: str = "default") -> Path:
        """The host directory of a PersistentVolumeClaim (kept for the whole session)."""
        return self.root / "pvc" / namespace / claim

    def wait_ready(self, deployment: str, namespace: str = "default", replicas: int | None = None,
                   timeout: float = 30.0) -> list[PodInfo]:
        """Wait until the Deployment runs ``replicas`` (default: its spec's) Ready pods of its current template and no
        others; returns them."""
        deadline = time.monotonic() + timeout

        def check() -> list[PodInfo] | None:
            obj = self.deployments.cache.get((namespace, deployment))
            if obj is None:
                return None
            spec = obj.get("spec") or {}
            want = replicas if replicas is not None else int(spec.get("replicas", 1) if spec.get("replicas") is not None else 1)
            current = controller.template_hash(spec.get("template") or {})
            mine = [p for p in self._pods.values() if (p.namespace, p.deployment) == (namespace, deployment)]
            if len(mine) == want and all(p.ready and p.hash == current for p in mine):
                return sorted((PodInfo(p.namespace, p.name, p.deployment, p.hash, p.ip, p.ready, p.phase,
                                       sum(c.restarts for c in p.containers), p.terminating) for p in mine),
                              key=lambda i: i.name)
            return None

        while True:
            done = self.call(check)
            if done is not None:
                return done
            if time.monotonic() > deadline:
                raise TimeoutError(f"{namespace}/{deployment} not ready after {timeout}s; pods: {self.pods(namespace)}; "
                                   f"recent events: {self.history[-10:]}")
            time.sleep(0.1)
