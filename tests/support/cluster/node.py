"""A node of the real control plane, as far as the API server sees one: registered by its own credential, its
Lease renewed and its Ready condition kept, so the scheduler binds pods to it.

The credential is what a kubelet has: a client certificate for ``system:node:<name>`` in group ``system:nodes``,
so the Node authorizer and the NodeRestriction admission plugin decide what it may do. It runs nothing: the pods
bound to it stay Pending (running them as processes is the kubelet stand-in's part, tests/support/kubelet/).
"""

from __future__ import annotations

import datetime
import threading
from pathlib import Path
from typing import Any

import httpx

from tests.support.cluster import rest
from tests.support.cluster.launcher import Cluster, ClusterFailed

__all__ = ["Node"]

LEASE_SECONDS = 40


def _now() -> str:
    return datetime.datetime.now(tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Node:
    """``start()`` registers the node and renews its Lease and Ready condition every ``interval`` seconds until
    ``stop()``."""

    def __init__(self, cluster: Cluster, name: str = "stand-in", interval: float = 5.0) -> None:
        self.name = name
        self.kubeconfig: Path = cluster.user(f"system:node:{name}", ["system:nodes"])
        self.interval = interval
        self._client = rest.client(self.kubeconfig)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"node-{name}", daemon=True)

    def start(self) -> None:
        reply = self._client.post("/api/v1/nodes", json=self._node())
        if reply.status_code not in (201, 409):
            raise ClusterFailed(f"node {self.name} could not register: {rest.message(reply)}")
        self.heartbeat()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _node(self) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": self.name, "labels": {"kubernetes.io/hostname": self.name, "kubernetes.io/os": "linux",
                                          "kubernetes.io/arch": "amd64"}}}

    def heartbeat(self) -> None:
        """Renew the Lease (created the first time) and report the node Ready, with room for pods."""
        lease_path = f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{self.name}"
        lease: dict[str, Any] = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                 "metadata": {"name": self.name, "namespace": "kube-node-lease"},
                 "spec": {"holderIdentity": self.name, "leaseDurationSeconds": LEASE_SECONDS, "renewTime": _now()}}
        current = self._client.get(lease_path)
        if current.status_code == 404:
            reply = self._client.post("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", json=lease)
        else:
            lease["metadata"]["resourceVersion"] = current.json()["metadata"]["resourceVersion"]
            reply = self._client.put(lease_path, json=lease)
        _check(reply, "renew its Lease")
        now = _now()
        status = {"status": {
            "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "the stand-in node is ready", "lastHeartbeatTime": now,
                            "lastTransitionTime": now}],
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": self.name}],
            "nodeInfo": {"kubeletVersion": "v0.0.0-stand-in", "operatingSystem": "linux", "architecture": "amd64",
                         "containerRuntimeVersion": "stand-in://0", "kernelVersion": "", "osImage": "",
                         "kubeProxyVersion": "", "machineID": "", "systemUUID": "", "bootID": ""},
        }}
        reply = self._client.patch(f"/api/v1/nodes/{self.name}/status", json=status,
                                   headers={"Content-Type": "application/strategic-merge-patch+json"})
        _check(reply, "report its status")

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.heartbeat()
            except (ClusterFailed, httpx.HTTPError):
                continue  # the API server restarting: the next beat tries again


def _check(reply: httpx.Response, what: str) -> None:
    if reply.status_code >= 300:
        raise ClusterFailed(f"the node could not {what}: {reply.status_code} {rest.message(reply)}")
