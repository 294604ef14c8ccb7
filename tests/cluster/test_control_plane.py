"""The control plane itself, as a user sees it: the version built, who each user is, the controllers and scheduler
at work, the audit log; and the launcher's cleanup of what a crashed run left behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.cluster import Cluster, binaries, launcher
from tests.support.cluster.steps import wait

pytestmark = pytest.mark.e2e


def test_the_server_is_the_release_built(cluster: Cluster) -> None:
    version = json.loads(cluster.kubectl("version", "-o", "json").stdout)
    assert version["serverVersion"]["gitVersion"] == binaries.KUBERNETES_VERSION
    assert version["clientVersion"]["minor"] == "36"  # kubectl within the skew policy


@pytest.mark.parametrize(("user", "name", "groups"), [
    ("admin", "kubernetes-admin", ["system:masters", "system:authenticated"]),
    ("alice", "alice", ["sre", "system:authenticated"]),
    ("bob", "bob", ["system:authenticated"]),
])
def test_each_user_is_who_their_certificate_says(cluster: Cluster, user: str, name: str, groups: list[str]) -> None:
    whoami = json.loads(cluster.kubectl("auth", "whoami", "-o", "json", user=user).stdout)
    assert (whoami["status"]["userInfo"]["username"], whoami["status"]["userInfo"]["groups"]) == (name, groups)


def test_bob_may_do_nothing_until_bound(cluster: Cluster) -> None:
    refused = cluster.kubectl("get", "pods", "-n", "default", user="bob")
    assert refused.returncode == 1
    assert 'User "bob" cannot list resource "pods" in API group "" in the namespace "default"' in refused.stderr


def test_the_garbage_collector_deletes_what_an_owner_left(cluster: Cluster) -> None:
    ns = "gc"
    cluster.kubectl("create", "namespace", ns)
    cluster.kubectl("create", "configmap", "owner", "-n", ns)
    uid = cluster.kubectl("get", "configmap", "owner", "-n", ns, "-o", "jsonpath={.metadata.uid}").stdout
    dependent = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dependent", "namespace": ns,
                 "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid}]}}
    assert cluster.kubectl("create", "-f", "-", stdin=json.dumps(dependent)).returncode == 0
    cluster.kubectl("delete", "configmap", "owner", "-n", ns)
    wait("the dependent is collected",
          lambda: cluster.kubectl("get", "configmap", "dependent", "-n", ns).returncode == 1)


def test_the_scheduler_and_the_deployment_controller_are_at_work(cluster: Cluster) -> None:
    """No node yet: the Deployment controller makes a ReplicaSet and a Pod, and the scheduler says it has no node."""
    ns = "sched"
    cluster.kubectl("create", "namespace", ns)
    created = cluster.kubectl("create", "deployment", "web", "-n", ns, "--image=busybox")
    assert created.returncode == 0, created.stderr

    def unschedulable() -> bool:
        events = cluster.kubectl("get", "events", "-n", ns, "--field-selector=reason=FailedScheduling", "-o", "json")
        return any(e.get("reportingComponent") == "default-scheduler" or e["source"].get("component")
                   == "default-scheduler" for e in json.loads(events.stdout or '{"items": []}')["items"])

    wait("the scheduler reports the pod unschedulable", unschedulable)


def test_the_audit_log_records_who_did_what(cluster: Cluster) -> None:
    cluster.kubectl("get", "namespaces", user="alice")  # refused, and recorded as such

    def recorded() -> bool:
        for line in cluster.layout.audit_log.read_text().splitlines():
            event = json.loads(line)
            if (event["user"]["username"] == "alice" and event["objectRef"].get("resource") == "namespaces"
                    and event["responseStatus"]["code"] == 403):
                return True
        return False

    wait("alice's refused list in the audit log", recorded)


def test_a_crashed_runs_leftovers_are_stopped_and_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs without the control plane: a leftover is any cluster directory whose owner is gone."""
    monkeypatch.setattr(launcher, "CLUSTERS", tmp_path)
    leftover, alive, crashed_up = tmp_path / "run-dead", tmp_path / "run-alive", tmp_path / "default"
    crashed_up.mkdir()  # a `make cluster-up` cluster whose processes are all gone: no owner, nothing running
    (crashed_up / "state.json").write_text(json.dumps({"owner": None, "pids": {"etcd": 2**22 + 1}}))
    os.utime(crashed_up, (time.time() - 120, time.time() - 120))
    owner = subprocess.Popen([sys.executable, "-c", "pass"])
    owner.wait()  # a PID that is gone
    children = {}
    for root, owner_id in ((leftover, [owner.pid, 0]), (alive, launcher._identity(os.getpid()))):
        root.mkdir()
        # A stand-in component: its command line names its cluster's directory, as every real one does.
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", str(root)])
        children[root] = proc
        (root / "state.json").write_text(json.dumps({"owner": owner_id, "pids": {"etcd": proc.pid}}))
    try:
        assert launcher.stop_leftovers() == [crashed_up, leftover]
        assert not crashed_up.exists()
        assert not leftover.exists() and children[leftover].poll() is not None
        assert alive.exists() and children[alive].poll() is None
    finally:
        for proc in children.values():
            proc.kill()
            proc.wait()


def test_a_claim_without_a_class_gets_the_default_one_and_binds(cluster: Cluster) -> None:
    ns = "claims"
    cluster.kubectl("create", "namespace", ns)
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": ns},
             "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}
    assert cluster.kubectl("create", "-f", "-", stdin=json.dumps(claim)).returncode == 0

    def bound() -> bool:
        got = json.loads(cluster.kubectl("get", "pvc", "data", "-n", ns, "-o", "json").stdout)
        return bool(got["status"].get("phase") == "Bound" and got["spec"]["storageClassName"] == "standard")

    wait("the claim bound to a volume of the default class", bound)


def test_cluster_up_runs_beside_another_and_down_removes_it(cluster: Cluster) -> None:
    """`make cluster-up`'s command starts a second cluster next to this session's (other ports) that outlives the
    command; `down` stops its processes and removes its files."""
    name = f"test-up-{os.getpid()}"
    command = [sys.executable, "-m", "tests.support.cluster"]
    # Owned by this test process: if the test is killed before `down`, the next start removes what is left.
    up = subprocess.run([*command, "up", "--name", name, "--owner-pid", str(os.getpid())], capture_output=True,
                        text=True, timeout=180, cwd=binaries.REPO)
    assert up.returncode == 0, up.stdout + up.stderr
    root = launcher.CLUSTERS / name
    try:
        pids = json.loads((root / "state.json").read_text())["pids"]
        assert json.loads((root / "state.json").read_text())["owner"][0] == os.getpid()  # not the `up` command
        other = subprocess.run([str(cluster.kubectl_path), f"--kubeconfig={root / 'admin.kubeconfig'}", "get",
                                "--raw", "/readyz"], capture_output=True, text=True, timeout=30)
        assert other.stdout == "ok" and cluster.kubectl("get", "--raw", "/readyz").stdout == "ok"
        assert f"export KUBECONFIG={root / 'admin.kubeconfig'}" in up.stdout
    finally:
        down = subprocess.run([*command, "down", "--name", name], capture_output=True, text=True, timeout=60,
                              cwd=binaries.REPO)
    assert down.returncode == 0, down.stderr
    assert not root.exists()
    assert not [pid for pid in pids.values() if Path(f"/proc/{pid}").exists()]
