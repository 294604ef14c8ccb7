"""The kubelet stand-in running pods: addresses, Services, volumes, environment, the API in-cluster, probes, restarts.

Every container is a real process in its own network and mount namespace, started from a Deployment created in the
emulated API; the test reaches pods at their own addresses (tests/support/kubelet, docs/testing-pods.md).
"""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client

from tests.kubelet.cluster import GATEHOUSE, Cluster, container, deployment, python, service
from tests.support.kube_fixtures import wait_for
from tests.support.kube_server import RunningEmulator
from tests.support.kubelet import Kubelet

pytestmark = pytest.mark.e2e


@pytest.fixture
def cluster(kube_api: RunningEmulator) -> Cluster:
    return Cluster(kube_api)


def _mcp(url: str, tool: str, **args: Any) -> str:
    async def call() -> str:
        async with Client(f"{url}/mcp") as client:
            result = await client.call_tool(tool, args)
        return "\n".join(getattr(c, "text", "") for c in result.content)

    return asyncio.run(call())


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1, trust_env=False).status_code == 200
    except httpx.HTTPError:
        return False


def _waiting(cluster: Cluster, pod: str) -> dict[str, Any] | None:
    statuses = ((cluster.get("Pod", pod) or {}).get("status") or {}).get("containerStatuses") or [{}]
    waiting: dict[str, Any] | None = statuses[0].get("state", {}).get("waiting")
    return waiting


def _tools(replicas: int = 2) -> dict[str, Any]:
    """The project's own demo MCP server, as a pod would run it: port 8080 on every address, its sandbox an emptyDir."""
    command = ["gatehouse", "demo-tools", "--port", "8080", "--host", "0.0.0.0", "--sandbox", "/data"]
    tools = container("tools", command, image=GATEHOUSE, port=8080, mounts=[("data", "/data")],
                      readinessProbe={"tcpSocket": {"port": "http"}, "periodSeconds": 5})
    return deployment("tools", [tools], replicas=replicas, volumes=[{"name": "data", "emptyDir": {}}])


def test_two_replicas_listen_on_8080_each_at_its_own_address_behind_a_service(
    kubelet: Kubelet, cluster: Cluster
) -> None:
    cluster.create(_tools(), service("tools"))
    pods = kubelet.wait_ready("tools")
    assert len({p.ip for p in pods}) == 2
    wait_for(lambda: sorted(kubelet.endpoints("tools")) == sorted(p.ip for p in pods), what="both pods behind the Service")
    assert kubelet.url_of("tools", port=8080) in {f"http://{p.ip}:8080" for p in pods}

    for i, pod in enumerate(pods):  # each pod's /data is its own emptyDir
        (kubelet.volume_path(pod.name, "data") / f"only-in-{i}.txt").write_text(pod.name)
    for i, pod in enumerate(pods):
        listing = _mcp(f"http://{pod.ip}:8080", "list_dir", path="")
        assert f"only-in-{i}.txt" in listing and f"only-in-{1 - i}.txt" not in listing
        assert _mcp(f"http://{pod.ip}:8080", "read_file", path=f"only-in-{i}.txt") == pod.name

    status = wait_for(lambda: (cluster.get("Deployment", "tools") or {}).get("status", {}).get("availableReplicas") == 2
                      and cluster.get("Deployment", "tools"), what="the Deployment's status")["status"]
    assert (status["observedGeneration"], status["replicas"], status["readyReplicas"], status["updatedReplicas"]) == (1, 2, 2, 2)
    assert {c["type"]: c["status"] for c in status["conditions"]} == {"Available": "True", "Progressing": "True"}
    objects = {p["metadata"]["name"]: p for p in cluster.list("Pod")}
    assert set(objects) == {p.name for p in pods}
    for pod in pods:
        obj = objects[pod.name]
        ready = next(c for c in obj["status"]["conditions"] if c["type"] == "Ready")
        assert (obj["status"]["podIP"], obj["status"]["phase"], ready["status"]) == (pod.ip, "Running", "True")
        assert obj["metadata"]["ownerReferences"][0]["kind"] == "Deployment"
        assert obj["metadata"]["labels"]["pod-template-hash"] == pod.hash


INSPECT = """
    import json, os, socket, time, urllib.request, asyncio
    out = {"env": {k: os.environ.get(k) for k in ("PASSWORD", "POD_NAME", "POD_IP", "KUBERNETES_SERVICE_HOST",
                                                   "KUBERNETES_SERVICE_PORT", "KUBECONFIG", "HOME", "HOSTNAME")}}
    out["cwd"] = os.getcwd()
    out["secret_file"] = open("/etc/app/password.txt").read()
    try:
        open("/etc/app/new", "w")
        out["secret_writable"] = True
    except OSError as exc:
        out["secret_writable"] = exc.strerror
    sa = "/var/run/secrets/kubernetes.io/serviceaccount"
    out["sa_files"] = sorted(f for f in os.listdir(sa) if not f.startswith(".."))
    out["namespace"] = open(f"{sa}/namespace").read()
    from kubernetes import client, config
    config.load_incluster_config()
    out["secrets"] = sorted(s.metadata.name for s in client.CoreV1Api().list_namespaced_secret("default").items)
    from agent_runtime.kube.client import KubeClient
    async def whoami():
        kube = KubeClient.connect(None, in_cluster=True)
        try:
            review = await kube.create("/apis/authentication.k8s.io/v1/selfsubjectreviews",
                                       {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
            return review["status"]["userInfo"]["username"]
        finally:
            await kube.aclose()
    out["whoami"] = asyncio.run(whoami())
    for _ in range(200):
        try:
            out["web"] = urllib.request.urlopen("http://web.default.svc.cluster.local:8080/hello.txt", timeout=2).read().decode()
            break
        except OSError as exc:
            out["web"] = repr(exc)
            time.sleep(0.1)
    print("RESULT " + json.dumps(out), flush=True)
    time.sleep(3600)
"""


def test_a_pod_sees_its_volumes_env_and_the_api_in_cluster(kubelet: Kubelet, cluster: Cluster) -> None:
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "app", "namespace": "default"},
              "data": {"password": base64.b64encode(b"s3cret").decode()}}
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "inspector", "namespace": "default"}}
    web = container("web", ["python3", "-m", "http.server", "8080", "--directory", "/srv"], port=8080,
                    mounts=[("srv", "/srv")], readinessProbe={"tcpSocket": {"port": 8080}})
    env = [
        {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "app", "key": "password"}}},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
    ]
    inspector = container("inspect", python(INSPECT), env=env, mounts=[("app", "/etc/app")])
    volume = {"name": "app", "secret": {"secretName": "app", "items": [{"key": "password", "path": "password.txt"}]}}
    cluster.create(deployment("inspect", [inspector], volumes=[volume], serviceAccountName="inspector"))
    (pod,) = wait_for(lambda: kubelet.pods(deployment="inspect"), what="the inspect pod")
    waiting = wait_for(lambda: _waiting(cluster, pod.name), what="the pod waiting")  # for what it needs, as a real one
    assert waiting == {"reason": "CreateContainerConfigError", "message": 'secret "app" not found'}

    cluster.create(secret, account, deployment("web", [web], volumes=[{"name": "srv", "emptyDir": {}}]), service("web"))
    (web_pod,) = kubelet.wait_ready("web")
    (kubelet.volume_path(web_pod.name, "srv") / "hello.txt").write_text("hello from web")
    log = wait_for(lambda: "RESULT " in kubelet.logs(pod.name) and kubelet.logs(pod.name), timeout=60,
                   what="the inspector's report")
    out = json.loads(log.split("RESULT ", 1)[1].splitlines()[0])
    api_port = kubelet.api_url.rsplit(":", 1)[1]
    assert out["env"] == {"PASSWORD": "s3cret", "POD_NAME": pod.name, "POD_IP": kubelet.pods(deployment="inspect")[0].ip,
                          "KUBERNETES_SERVICE_HOST": kubelet.gateway, "KUBERNETES_SERVICE_PORT": api_port,
                          "KUBECONFIG": None, "HOME": "/root", "HOSTNAME": pod.name}
    assert out["cwd"] == "/"
    assert out["secret_file"] == "s3cret" and out["secret_writable"] == "Read-only file system"
    assert out["sa_files"] == ["ca.crt", "namespace", "token"] and out["namespace"] == "default"
    assert out["secrets"] == ["app"]
    assert out["whoami"] == "system:serviceaccount:default:inspector"
    assert out["web"] == "hello from web"


def test_readiness_comes_from_the_probe_and_services_list_ready_pods_only(kubelet: Kubelet, cluster: Cluster) -> None:
    probe = {"httpGet": {"path": "/ready.txt", "port": "http"}, "periodSeconds": 1, "failureThreshold": 1}
    site = container("site", ["python3", "-m", "http.server", "8080", "--directory", "/srv"], port=8080,
                     mounts=[("srv", "/srv")], readinessProbe=probe)
    cluster.create(deployment("site", [site], volumes=[{"name": "srv", "emptyDir": {}}]), service("site"))
    (pod,) = wait_for(lambda: [p for p in kubelet.pods(deployment="site") if p.ip], what="the site pod")
    wait_for(lambda: _answers(f"http://{pod.ip}:8080/"), what="the server")
    assert not kubelet.pods(deployment="site")[0].ready and kubelet.endpoints("site") == []
    with pytest.raises(TimeoutError):
        kubelet.url_of("site", timeout=0.3)
    assert "readyReplicas" not in (cluster.get("Deployment", "site") or {}).get("status", {})

    (kubelet.volume_path(pod.name, "srv") / "ready.txt").write_text("ok")
    assert kubelet.url_of("site", timeout=10) == f"http://{pod.ip}:8080"
    wait_for(lambda: (cluster.get("Deployment", "site") or {}).get("status", {}).get("readyReplicas") == 1,
             what="readyReplicas 1")

    (kubelet.volume_path(pod.name, "srv") / "ready.txt").unlink()
    wait_for(lambda: kubelet.endpoints("site") == [], what="the pod to leave the Service")
    wait_for(lambda: "readyReplicas" not in (cluster.get("Deployment", "site") or {}).get("status", {}),
             what="readyReplicas gone")
    assert [e.kind for e in kubelet.history if e.pod == pod.name][-2:] == ["ready", "unready"]


def test_an_exiting_container_is_restarted_with_backoff_and_keeps_its_log(kubelet: Kubelet, cluster: Cluster) -> None:
    crash = container("crash", python("import sys; print('running', flush=True); sys.exit(3)"))
    cluster.create(deployment("crash", [crash]))
    (pod,) = wait_for(lambda: [p for p in kubelet.pods(deployment="crash") if p.restarts >= 3], timeout=20,
                      what="three restarts")
    assert kubelet.logs(pod.name).count("running") >= 3
    exits = [e.at for e in kubelet.history if e.pod == pod.name and e.kind == "exited"]
    assert exits[2] - exits[1] > exits[1] - exits[0]  # the back-off grows
    # The kubelet counts a restart before it reports it: wait for the Pod object to catch up.
    statuses = wait_for(lambda: [s for s in (cluster.get("Pod", pod.name) or {}).get("status", {})
                                 .get("containerStatuses", []) if s.get("restartCount", 0) >= 3],
                        what="container statuses with three restarts")
    assert statuses[0]["lastState"]["terminated"]["exitCode"] == 3


def test_pods_are_replaced_scaled_and_stopped_with_the_deployment(kubelet: Kubelet, cluster: Cluster) -> None:
    sleeper = container("sleep", python("import time; time.sleep(3600)"))
    cluster.create(deployment("sleeper", [sleeper]))
    (first,) = kubelet.wait_ready("sleeper")
    wait_for(lambda: cluster.get("Pod", first.name), what="the Pod object")
    cluster.delete("Pod", first.name)  # as `kubectl delete pod` does: the Deployment makes a new one
    (second,) = wait_for(lambda: [p for p in kubelet.wait_ready("sleeper") if p.name != first.name], what="a replacement")
    assert first.name not in {p.name for p in kubelet.pods()}

    cluster.patch("Deployment", "sleeper", {"spec": {"replicas": 3}})
    assert len(kubelet.wait_ready("sleeper", replicas=3)) == 3
    cluster.patch("Deployment", "sleeper", {"spec": {"replicas": 1}})
    assert [p.name for p in kubelet.wait_ready("sleeper", replicas=1)] == [second.name]  # the youngest went first

    cluster.delete("Deployment", "sleeper")
    wait_for(lambda: kubelet.pods() == [] and cluster.list("Pod") == [], what="every pod gone")
    assert {e.pod for e in kubelet.history if e.kind == "stopped"} == {e.pod for e in kubelet.history if e.kind == "created"}


def test_exec_probes_run_inside_the_container_and_a_failing_liveness_probe_restarts_it(
    kubelet: Kubelet, cluster: Cluster
) -> None:
    worker = container(
        "worker", python("import time; open('/tmp/ready', 'w').close(); print('up', flush=True); time.sleep(3600)"),
        mounts=[("control", "/control")],
        readinessProbe={"exec": {"command": ["cat", "/tmp/ready"]}},  # the container's own /tmp, not the host's
        livenessProbe={"exec": {"command": ["sh", "-c", "test ! -e /control/die"]}, "periodSeconds": 1, "failureThreshold": 2},
    )
    cluster.create(deployment("worker", [worker], volumes=[{"name": "control", "emptyDir": {}}]))
    (pod,) = kubelet.wait_ready("worker")
    assert not Path("/tmp/ready").exists()  # the pod's /tmp is its own

    (kubelet.volume_path(pod.name, "control") / "die").write_text("")
    wait_for(lambda: any(e.kind == "killing" and e.pod == pod.name for e in kubelet.history), timeout=10,
             what="the liveness probe to fail")
    (kubelet.volume_path(pod.name, "control") / "die").unlink()
    (again,) = kubelet.wait_ready("worker")
    assert again.name == pod.name and again.restarts == 1  # the same pod, its container restarted
    assert kubelet.logs(pod.name).count("up") == 2
    killing = next(e for e in kubelet.history if e.kind == "killing")
    assert killing.detail == "worker: liveness probe failed"


def test_stopping_sends_sigterm_then_sigkill_after_the_grace_period(kubelet: Kubelet, cluster: Cluster) -> None:
    stubborn = container("stubborn", python("""
        import signal, time
        signal.signal(signal.SIGTERM, lambda *_: print("got SIGTERM, staying", flush=True))
        print("up", flush=True)
        while True:
            time.sleep(1)
    """))
    cluster.create(deployment("stubborn", [stubborn], terminationGracePeriodSeconds=1))
    (pod,) = kubelet.wait_ready("stubborn")
    wait_for(lambda: "up" in kubelet.logs(pod.name), what="the handler installed")
    cluster.delete("Deployment", "stubborn")
    wait_for(lambda: any(e.kind == "stopped" and e.pod == pod.name for e in kubelet.history), what="the pod stopped")
    stopping = next(e.at for e in kubelet.history if e.kind == "stopping" and e.pod == pod.name)
    stopped = next(e.at for e in kubelet.history if e.kind == "stopped" and e.pod == pod.name)
    assert 1.0 <= stopped - stopping < 3.0  # the grace, then SIGKILL
    assert "got SIGTERM, staying" in kubelet.logs(pod.name)
