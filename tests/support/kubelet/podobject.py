"""The Pod object a pod is reported as in the API: created owned by its Deployment, status patched on change.

The stand-in writes what a kubelet would: ``spec.nodeName``, ``status.phase``, ``podIP``/``podIPs``, ``hostIP`` (the
bridge address), the conditions ``PodScheduled``, ``Initialized``, ``ContainersReady`` and ``Ready`` (each with the
time it last flipped) and per container ``ready``, ``started``, ``restartCount``, ``state`` and ``lastState``. The owner
is the Deployment itself (there are no ReplicaSets), so deleting the Deployment deletes its Pod objects. The object
is deleted once the pod's processes are gone (the emulator has no graceful deletion: no ``Terminating`` phase).
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.support.kubelet.api import Api
    from tests.support.kubelet.pods import Pod

__all__ = ["manifest", "now_iso", "publish", "status"]


def now_iso() -> str:
    return datetime.datetime.now(tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def manifest(pod: Pod) -> dict[str, Any]:
    owner = {"apiVersion": "apps/v1", "kind": "Deployment", "name": pod.deployment, "uid": pod.owner_uid,
             "controller": True, "blockOwnerDeletion": True}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": pod.name, "namespace": pod.namespace, "labels": pod.labels,
                     "annotations": pod.annotations, "ownerReferences": [owner]},
        "spec": {**pod.spec, "nodeName": pod.node.settings.node_name, "serviceAccountName": pod.service_account},
    }


def _condition(pod: Pod, type_: str, ok: bool) -> dict[str, Any]:
    value = "True" if ok else "False"
    if pod.transitions.get(type_, ("", ""))[0] != value:
        pod.transitions[type_] = (value, now_iso())
    return {"type": type_, "status": value, "lastTransitionTime": pod.transitions[type_][1]}


def status(pod: Pod) -> dict[str, Any]:
    containers = []
    for c in pod.containers:
        state: dict[str, Any] = {"waiting": {"reason": c.reason, **({"message": c.message} if c.message else {})}}
        if c.state == "running":
            state = {"running": {"startedAt": c.started_at}}
        elif c.state == "terminated" and c.process is not None:
            state = {"terminated": {"exitCode": c.process.returncode, "reason": c.reason}}
        entry: dict[str, Any] = {"name": c.name, "image": c.spec.get("image", ""), "ready": c.ready,
                                 "started": c.started, "restartCount": c.restarts, "state": state}
        if c.last_exit is not None:
            entry["lastState"] = {"terminated": {"exitCode": c.last_exit}}
        containers.append(entry)
    out: dict[str, Any] = {
        "phase": pod.phase, "hostIP": pod.node.gateway, "startTime": pod.start_time,
        "conditions": [_condition(pod, "PodScheduled", True), _condition(pod, "Initialized", True),
                       _condition(pod, "ContainersReady", pod.ready), _condition(pod, "Ready", pod.ready)],
        "containerStatuses": containers,
    }
    if pod.ip:
        out.update(podIP=pod.ip, podIPs=[{"ip": pod.ip}])
    return out


async def publish(api: Api, pod: Pod, published: dict[str, Any] | None) -> dict[str, Any] | None:
    """Bring the API's Pod object in line with ``pod``; returns the status now published (``None``: nothing is)."""
    path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}"
    if pod.finished:
        if pod.uid:
            await api.delete(path)
        return None
    if not pod.uid:
        created = await api.create(f"/api/v1/namespaces/{pod.namespace}/pods", manifest(pod))
        pod.uid = created["metadata"]["uid"]
    current = status(pod)
    if current != published:
        if await api.merge_patch(f"{path}/status", {"status": current}) is None and not pod.terminating:
            pod.terminate("the Pod object was deleted")
    return current
