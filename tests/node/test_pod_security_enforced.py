"""A pod under the real kubelet, containerd and runc/crun: the security context is enforced by the kernel, not
just admitted. The pod's own output (its logs, through the API server and the kubelet) is the evidence."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.support.cluster import Cluster, realnode

pytestmark = pytest.mark.e2e_node

PROBE = """
id
touch /probe 2>/dev/null && echo ROOTFS=writable || echo ROOTFS=read-only
touch /tmp/probe && echo TMP=writable
touch /data/probe && stat -c 'DATA=writable %g' /data/probe
grep -E '^(CapEff|CapBnd|CapPrm|NoNewPrivs|Seccomp):' /proc/self/status
chown 0 /tmp/probe 2>/dev/null && echo CHOWN=allowed || echo CHOWN=refused
"""


def _pod(name: str, node: str, command: str, *, seccomp: str = "RuntimeDefault") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "restricted"}, "spec": {
        "nodeName": node, "restartPolicy": "Never", "automountServiceAccountToken": False,
        "securityContext": {"runAsNonRoot": True, "runAsUser": 10001, "runAsGroup": 10001, "fsGroup": 10001,
                            "seccompProfile": {"type": seccomp}},
        "containers": [{"name": "probe", "image": realnode.BUSYBOX_IMAGE, "imagePullPolicy": "Never",
                        "command": ["/bin/sh", "-c", command],
                        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                            "capabilities": {"drop": ["ALL"]}},
                        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}, {"name": "data", "mountPath": "/data"}]}],
        "volumes": [{"name": "tmp", "emptyDir": {}}, {"name": "data", "emptyDir": {}}]}}


def _ensure_namespace(cluster: Cluster) -> None:
    manifest = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "restricted", "labels": {
        "pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}}}
    proc = cluster.kubectl("apply", "-f", "-", stdin=json.dumps(manifest))
    assert proc.returncode == 0, proc.stderr


def run_to_completion(cluster: Cluster, pod: dict[str, Any], timeout: float = 90) -> tuple[str, str, float]:
    """Create ``pod``, wait until it has Succeeded or Failed; (phase, logs, seconds from create to done)."""
    name = pod["metadata"]["name"]
    cluster.kubectl("delete", "pod", name, "-n", "restricted", "--ignore-not-found", "--wait=true")
    started = time.monotonic()
    proc = cluster.kubectl("create", "-f", "-", stdin=json.dumps(pod))
    assert proc.returncode == 0, proc.stderr
    deadline = started + timeout
    phase = ""
    while time.monotonic() < deadline:
        got = cluster.kubectl("get", "pod", name, "-n", "restricted", "-o", "json")
        status = json.loads(got.stdout).get("status", {}) if got.returncode == 0 else {}
        phase = status.get("phase", "")
        if phase in ("Succeeded", "Failed"):
            break
        time.sleep(0.3)
    elapsed = time.monotonic() - started
    logs = cluster.kubectl("logs", name, "-n", "restricted")
    described = "" if phase in ("Succeeded", "Failed") else cluster.kubectl("describe", "pod", name, "-n",
                                                                             "restricted").stdout
    assert phase in ("Succeeded", "Failed"), f"pod {name} still {phase!r} after {timeout} s:\n{described}"
    return phase, logs.stdout + logs.stderr, elapsed


def test_the_node_is_ready_with_the_real_runtime(node: realnode.RealNode) -> None:
    got = node.cluster.kubectl("get", "node", node.name, "-o", "json")
    info = json.loads(got.stdout)["status"]["nodeInfo"]
    assert info["kubeletVersion"] == "v1.36.3"
    assert info["containerRuntimeVersion"].startswith("containerd://")


def _runs_pods(node: realnode.RealNode) -> None:
    if node.runtime == "crun" and (why := realnode.crun_limit()):
        pytest.skip(why)  # test_crun_refuses_this_machines_cgroups shows it


def test_crun_refuses_this_machines_cgroups(node: realnode.RealNode) -> None:
    """What crun does with a pod on this machine's hybrid cgroups: the exact error, as the kubelet reports it."""
    why = realnode.crun_limit()
    if node.runtime != "crun" or why is None:
        pytest.skip("crun on a machine it can run pods on")
    _ensure_namespace(node.cluster)
    pod = _pod("crun-probe", node.name, "id")
    node.cluster.kubectl("delete", "pod", "crun-probe", "-n", "restricted", "--ignore-not-found", "--wait=true")
    assert node.cluster.kubectl("create", "-f", "-", stdin=json.dumps(pod)).returncode == 0
    deadline = time.monotonic() + 60
    events = ""
    while time.monotonic() < deadline and "FailedCreatePodSandBox" not in events:
        events = node.cluster.kubectl("get", "events", "-n", "restricted", "--field-selector",
                                      "involvedObject.name=crun-probe", "-o", "json").stdout
        time.sleep(1)
    assert "cgroups in hybrid mode not supported, drop all controllers from cgroupv2" in events, events


def test_a_restricted_pod_runs_as_10001_read_only_without_capabilities(node: realnode.RealNode) -> None:
    _runs_pods(node)
    _ensure_namespace(node.cluster)
    phase, logs, elapsed = run_to_completion(node.cluster, _pod(f"probe-{node.runtime}", node.name, PROBE))
    print(f"\n{node.runtime}: pod created to Succeeded in {elapsed:.1f} s\n{logs}")
    assert phase == "Succeeded", logs
    lines = dict(line.split(":", 1) if ":" in line and not line.startswith("uid=") else (line, "")
                 for line in logs.splitlines())
    assert logs.startswith("uid=10001 gid=10001 groups=10001"), logs
    assert "ROOTFS=read-only" in lines, logs
    assert "TMP=writable" in lines, logs
    assert "DATA=writable 10001" in lines, logs  # fsGroup on the volume
    assert lines["CapEff"].strip() == "0000000000000000", logs
    assert lines["CapBnd"].strip() == "0000000000000000", logs
    assert lines["NoNewPrivs"].strip() == "1", logs
    assert lines["Seccomp"].strip() == "2", logs  # filter mode: RuntimeDefault applied
    assert "CHOWN=refused" in lines, logs


def test_a_write_outside_the_volumes_fails(node: realnode.RealNode) -> None:
    _runs_pods(node)
    _ensure_namespace(node.cluster)
    phase, logs, _ = run_to_completion(node.cluster, _pod(f"writer-{node.runtime}", node.name,
                                                          "echo x > /etc/owned && echo WROTE"))
    assert phase == "Failed", logs
    assert "WROTE" not in logs
    assert "Read-only file system" in logs, logs
