"""The kubelet stand-in as a node of the real control plane (tests/support/cluster/): it runs the Pods the real
scheduler binds to it, as local processes in their own network namespaces, exactly as it runs the emulator's.

What changes against the emulator (:class:`~tests.support.kubelet.node.Node`):

- it is a Node: registered, its Lease and ``Ready`` condition renewed (:class:`tests.support.cluster.node.Node`);
- it is **not** the Deployment controller: the real Deployment and ReplicaSet controllers make the Pods, the real
  scheduler binds them; the stand-in watches the Pods bound to it (``spec.nodeName``), runs them, patches their
  status (phase, IP, readiness), so the real EndpointSlice controller and rollouts see them;
- a Pod deleted through the API (``deletionTimestamp`` set, as a Recreate or RollingUpdate rollout does) is stopped
  and then removed with ``gracePeriodSeconds: 0`` (what a kubelet does once its containers are gone), so rollouts
  finish instead of hanging on Terminating;
- ServiceAccount tokens come from the real TokenRequest API, one per projection (audience, lifetime), bound to the
  Pod, refreshed before they expire; claims are used once the real PersistentVolume controller has bound them;
- the API server is reached from pods as a cluster reaches it: ``KUBERNETES_SERVICE_HOST=10.96.0.1``, port 443,
  DNATed from the pods' bridge to the API server on 127.0.0.1 (``route_localnet`` on that bridge only), verified
  with the cluster CA that the root-CA controller publishes as ``kube-root-ca.crt``.

Differences from a cluster that remain (docs/control-plane.md): no kube-proxy and no DNS server -- a Service name
resolves through each pod's ``/etc/hosts`` to its Ready pods (the stand-in's own resolution,
:mod:`~tests.support.kubelet.hosts`), so a client reaches the ``targetPort`` directly; the stand-in uses the cluster's
admin credential (not the Node authorizer's) to read what its pods need; a claim's data lives in the node's own
directory, not in the PersistentVolume's. Tokens are as a kubelet's: one TokenRequest per projection, with its
audience and ``expirationSeconds``, bound to the Pod, asked for again at 80 % of its lifetime.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import ssl
import subprocess
import threading
from pathlib import Path
from typing import Any

import httpx

from tests.support.cluster.launcher import Cluster
from tests.support.cluster.node import Node as Registration
from tests.support.kubelet import hosts, podobject
from tests.support.kubelet.api import Api, Informer, Key
from tests.support.kubelet.envs import kubernetes_service_env
from tests.support.kubelet.node import Node
from tests.support.kubelet.pods import Container, Pod, Settings, Waiting

__all__ = ["SERVICE_IP", "ClusterNode"]

SERVICE_IP = "10.96.0.1"  # the `kubernetes` Service: the first address of the launcher's service CIDR


def _pod_from_object(node: ClusterNode, obj: dict[str, Any]) -> Pod:
    """A stand-in :class:`Pod` for a Pod object the controllers made and the scheduler bound here."""
    meta = obj["metadata"]
    labels = dict(meta.get("labels") or {})
    owner: dict[str, Any] = next((o for o in meta.get("ownerReferences") or [] if o.get("controller")), {})
    template_hash = labels.get("pod-template-hash", "")
    workload = str(owner.get("name", meta["name"]))
    if template_hash and workload.endswith(f"-{template_hash}"):
        workload = workload[: -len(template_hash) - 1]  # the Deployment's name, as the emulator's pods report it
    pod = Pod(node, {"metadata": {"namespace": meta["namespace"], "name": workload, "uid": owner.get("uid", "")}},
              {"metadata": {"labels": labels, "annotations": meta.get("annotations") or {}}, "spec": obj["spec"]},
              template_hash)
    pod.name, pod.uid, pod.labels = meta["name"], meta["uid"], labels
    pod.dir = node.root / "pods" / f"{pod.namespace}_{pod.name}"
    pod.containers = [Container(dict(c), pod.dir / f"{c['name']}.log") for c in pod.spec.get("containers") or []]
    return pod


class ClusterNode(Node):
    """``ClusterNode(cluster, root).start()`` … ``stop()``; of the emulator's test-facing methods ``url_of``, ``logs``,
    ``pods``, ``volume_path`` and ``claim_path`` work the same (``wait_ready`` does not: the real controllers hash
    templates their own way; wait for a rollout with ``kubectl rollout status``)."""

    def __init__(self, cluster: Cluster, root: Path, name: str = "stand-in-node", settings: Settings | None = None) -> None:
        super().__init__(None, root, settings=settings or Settings(node_name=name))  # type: ignore[arg-type]
        self.cluster = cluster
        self.name = name
        self.registration = Registration(cluster, name)
        self._done: set[str] = set()  # uids of Pods whose processes ran and stopped here: never started again
        self._nat: list[str] = []

    # -- start and stop ---------------------------------------------------------------------------------

    def start(self) -> ClusterNode:
        self.root.mkdir(parents=True, exist_ok=True)
        atexit.register(self._emergency_stop)
        try:
            self.network.setup()
            self._service_nat()
            self.ca_pem = self.cluster.ca.read_text()
            self.api_url = f"https://{SERVICE_IP}:443"
            self.api_env = kubernetes_service_env(SERVICE_IP, 443)
            self.registration.start()
            self._thread = threading.Thread(target=asyncio.run, args=(self._main(),), name="stand-in-node", daemon=True)
            self._thread.start()
            if not self._started.wait(30) or self._error is not None:
                raise RuntimeError(f"the stand-in node did not start: {self._error!r}")
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop every pod, the loop and the heartbeat; delete the Node (else it stays Ready for the node controller's
        grace period and the scheduler binds the next pods to it); remove the network and the NAT rule."""
        try:
            super().stop()
        finally:
            self.registration.stop()
            self.cluster.kubectl("delete", "node", self.name, "--ignore-not-found", "--wait=false")
            if self._nat:
                subprocess.run(["iptables", "-t", "nat", "-D", *self._nat], capture_output=True)
                self._nat = []

    def _service_nat(self) -> None:
        bridge = self.network.bridge
        Path(f"/proc/sys/net/ipv4/conf/{bridge}/route_localnet").write_text("1\n")
        rule = ["PREROUTING", "-i", bridge, "-d", SERVICE_IP, "-p", "tcp", "--dport", "443", "-j", "DNAT",
                "--to-destination", f"127.0.0.1:{self.cluster.layout.apiserver_port}"]
        subprocess.run(["iptables", "-t", "nat", "-A", *rule], check=True, capture_output=True)
        self._nat = rule

    # -- the loop ---------------------------------------------------------------------------------------

    def _client(self) -> Api:
        api = Api(self.cluster.server)
        pki = self.cluster.layout.pki
        context = ssl.create_default_context(cafile=str(self.cluster.ca))
        context.load_cert_chain(pki / "client-admin.crt", pki / "client-admin.key")
        api.http = httpx.AsyncClient(base_url=self.cluster.server, trust_env=False, timeout=httpx.Timeout(10.0),
                                     verify=context)
        return api

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping, self._wake = asyncio.Event(), asyncio.Event()
        self.api = self._client()
        self.probe_http = httpx.AsyncClient(trust_env=False, verify=False, follow_redirects=False)
        self.services = Informer(self.api, "/api/v1/services", lambda _t, _o: self.wake())
        self.pod_objects = Informer(self.api, f"/api/v1/pods?fieldSelector=spec.nodeName%3D{self.name}",
                                    lambda _t, _o: self.wake())
        informers = (self.services, self.pod_objects)
        watchers = [asyncio.create_task(i.run()) for i in informers]
        try:
            await asyncio.wait_for(asyncio.gather(*(i.synced.wait() for i in informers)), 20)
        except BaseException as exc:
            self._error = exc
        self._started.set()
        try:
            while self._error is None and not self._stopping.is_set():
                try:
                    await self._reconcile()
                except Exception as exc:  # the API going away mid-pass: say so, try again
                    self.record("error", None, repr(exc))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), 0.2)
                self._wake.clear()
        finally:
            for pod in self._pods.values():
                pod.terminate("the stand-in stops")
            await asyncio.gather(*(p.task for p in self._pods.values() if p.task), return_exceptions=True)
            for pod in self._pods.values():  # what a kubelet draining itself does: its pods are gone
                with contextlib.suppress(httpx.HTTPError):
                    await self._remove(pod)
            for task in watchers:
                task.cancel()
            await asyncio.gather(*watchers, return_exceptions=True)
            await self.api.aclose()
            await self.probe_http.aclose()

    async def _reconcile(self) -> None:
        bound = dict(self.pod_objects.cache)
        for key, obj in bound.items():
            meta = obj["metadata"]
            if key not in self._pods and meta["uid"] not in self._done and not meta.get("deletionTimestamp"):
                pod = _pod_from_object(self, obj)
                self._pods[key] = pod
                pod.start()
        for key, pod in self._pods.items():
            obj = bound.get(key)
            if obj is None or obj["metadata"]["uid"] != pod.uid:
                pod.terminate("the Pod object was deleted")
            elif obj["metadata"].get("deletionTimestamp"):
                pod.terminate("the Pod is being deleted")
        self._endpoints = hosts.service_endpoints(self.services.cache.values(), [
            hosts.Endpoint(p.namespace, p.name, p.ip, p.labels, p.ready, [c.spec for c in p.containers])
            for p in self._pods.values()])
        for key, pod in list(self._pods.items()):
            if pod.sandbox is not None and not pod.finished:
                self.write_hosts(pod)
            if pod.finished:
                await self._remove(pod)
                self._done.add(pod.uid)
                del self._pods[key]
                self._published.pop(key, None)
                continue
            current = podobject.status(pod)
            if current != self._published.get(key):
                path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/status"
                if await self.api.merge_patch(path, {"status": current}) is None:
                    pod.terminate("the Pod object was deleted")
                self._published[key] = current

    async def _remove(self, pod: Pod) -> None:
        """Delete the Pod object now that its processes are gone (grace 0, only this uid)."""
        reply = await self.api.http.request(
            "DELETE", f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}",
            json={"gracePeriodSeconds": 0, "preconditions": {"uid": pod.uid}})
        if reply.status_code not in (200, 202, 404, 409):
            reply.raise_for_status()

    # -- what pods ask of the node (loop) --------------------------------------------------------------

    async def token_for(self, namespace: str, service_account: str, audience: str | None = None,
                        seconds: int = 3600, pod: Pod | None = None) -> str:
        """A token of the real TokenRequest API for ``audience`` (``None``: the API server's) and ``seconds``, bound
        to ``pod``, as the kubelet asks for each ``serviceAccountToken`` projection: deleting the Pod revokes it."""
        spec: dict[str, Any] = {"expirationSeconds": seconds}
        if audience is not None:
            spec["audiences"] = [audience]
        if pod is not None and pod.uid:
            spec["boundObjectRef"] = {"apiVersion": "v1", "kind": "Pod", "name": pod.name, "uid": pod.uid}
        reply = await self.api.http.post(
            f"/api/v1/namespaces/{namespace}/serviceaccounts/{service_account}/token",
            json={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec})
        if reply.status_code == 404:
            raise Waiting("ContainerCreating", f'serviceaccount "{service_account}" not found')
        reply.raise_for_status()
        return str(reply.json()["status"]["token"])

    async def bind_claim(self, namespace: str, claim: str) -> None:
        """Wait (``Waiting``) until the real PersistentVolume controller has bound the claim."""
        pvc = await self.api.get(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{claim}")
        if pvc is None:
            raise Waiting("ContainerCreating", f'persistentvolumeclaim "{claim}" not found')
        if (pvc.get("status") or {}).get("phase") != "Bound":
            raise Waiting("ContainerCreating", f'persistentvolumeclaim "{claim}" is not bound yet')

    def write_hosts(self, pod: Pod) -> None:
        text = hosts.render_hosts(pod.ip, pod.name, pod.namespace, SERVICE_IP, self._endpoints)
        hosts.write_in_place(pod.dir / "hosts", text)

    # -- for tests ---------------------------------------------------------------------------------------

    def bound(self) -> dict[Key, dict[str, Any]]:
        return self.call(lambda: dict(self.pod_objects.cache))

    def describe(self) -> str:
        """The pods here and the last events, for an assertion's message."""
        return json.dumps([p.__dict__ for p in self.pods()], default=str)[:3000] + f"\n{self.history[-15:]}"

