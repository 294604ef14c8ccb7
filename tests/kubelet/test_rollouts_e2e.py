"""Template changes roll pods as the Deployment's strategy says; a claim's directory outlives the pods using it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.kubelet.cluster import Cluster, container, deployment, python
from tests.support.kube_fixtures import wait_for
from tests.support.kube_server import RunningEmulator
from tests.support.kubelet import Kubelet, PodEvent

pytestmark = pytest.mark.e2e

GUESTBOOK = """
    import os, time
    with open("/data/guests.txt", "a") as f:
        f.write(os.environ["HOSTNAME"] + "\\n")
    print(open("/data/guests.txt").read(), end="", flush=True)
    time.sleep(3600)
"""


@pytest.fixture
def cluster(kube_api: RunningEmulator) -> Cluster:
    return Cluster(kube_api)


def _first(history: list[PodEvent], kind: str, pods: set[str]) -> float:
    return min(e.at for e in history if e.kind == kind and e.pod in pods)


def _last(history: list[PodEvent], kind: str, pods: set[str]) -> float:
    return max(e.at for e in history if e.kind == kind and e.pod in pods)


def test_recreate_stops_the_old_pod_before_starting_the_new_and_the_claim_survives(kubelet: Kubelet, cluster: Cluster) -> None:
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "book", "namespace": "default"},
             "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}
    writer = container("guestbook", python(GUESTBOOK), mounts=[("book", "/data")])
    volume = {"name": "book", "persistentVolumeClaim": {"claimName": "book"}}
    cluster.create(deployment("guestbook", [writer], volumes=[volume], strategy={"type": "Recreate"}))
    (pending,) = wait_for(lambda: kubelet.pods(deployment="guestbook"), what="the pod")
    assert not pending.ready  # the claim does not exist yet: the pod waits for it
    cluster.create(claim)
    (first,) = kubelet.wait_ready("guestbook")
    wait_for(lambda: first.name in kubelet.logs(first.name), what="the first guest")
    pvc = cluster.get("PersistentVolumeClaim", "book") or {}
    assert pvc["status"] == {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}}

    cluster.roll("guestbook", "1")
    (second,) = wait_for(lambda: [p for p in kubelet.wait_ready("guestbook") if p.name != first.name], what="the new pod")
    assert second.hash != first.hash
    assert _last(kubelet.history, "stopped", {first.name}) < _first(kubelet.history, "created", {second.name})
    log = wait_for(lambda: second.name in kubelet.logs(second.name) and kubelet.logs(second.name), what="the second guest")
    assert log.splitlines() == [first.name, second.name]  # the new pod read what the old one wrote
    assert (kubelet.claim_path("book") / "guests.txt").read_text().splitlines() == [first.name, second.name]


def _ready_over_time(history: list[PodEvent], deployment: str, ready_before: set[str]) -> list[int]:
    """How many pods of ``deployment`` were Ready after each event."""
    ready = set(ready_before)
    counts = []
    for event in history:
        if event.deployment != deployment:
            continue
        if event.kind == "ready":
            ready.add(event.pod)
        elif event.kind in ("unready", "stopping", "stopped"):
            ready.discard(event.pod)
        counts.append(len(ready))
    return counts


def test_rolling_update_starts_a_new_pod_and_waits_for_it_before_stopping_an_old_one(kubelet: Kubelet, cluster: Cluster) -> None:
    web = container("web", ["python3", "-m", "http.server", "8080", "--directory", "/"], port=8080,
                    readinessProbe={"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 5})
    rolling: dict[str, Any] = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    cluster.create(deployment("web", [web], replicas=2, strategy=rolling))
    old = {p.name for p in kubelet.wait_ready("web")}
    start = len(kubelet.history)

    cluster.roll("web", "1")

    def only_new_pods() -> set[str] | None:
        pods = kubelet.pods(deployment="web")
        names = {p.name for p in pods}
        return names if len(pods) == 2 and not names & old and all(p.ready for p in pods) else None

    new = wait_for(only_new_pods, what="two new pods, Ready, and no old one")
    rollout = kubelet.history[start:]
    assert _first(rollout, "ready", new) < _first(rollout, "stopping", old)  # start, then stop
    assert min(_ready_over_time(rollout, "web", old)) >= 2  # maxUnavailable 0: never fewer than 2 Ready
    for stop in (e for e in rollout if e.kind == "stopping"):  # each old pod went after one more new pod was Ready
        assert any(e.kind == "ready" and e.pod in new and e.at < stop.at for e in rollout)

    status = wait_for(lambda: (cluster.get("Deployment", "web") or {}).get("status", {}).get("observedGeneration") == 2
                      and (cluster.get("Deployment", "web") or {})["status"], what="the status of generation 2")
    assert (status["replicas"], status["updatedReplicas"], status["availableReplicas"]) == (2, 2, 2)
    progressing = next(c for c in status["conditions"] if c["type"] == "Progressing")
    assert progressing["reason"] == "NewReplicaSetAvailable"
