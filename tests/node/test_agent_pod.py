"""An Agent's runtime pod, made by the chart's operator from the project's image, under the real kubelet: Pod
Security ``restricted`` admits the chart's pods and the Agent's, the kernel holds the runtime to its security
context, and a node reboot with an approval pending loses nothing.

The example file-manager Agent (``examples/file-manager/``) in ``default``, labelled to enforce ``restricted``; its
sqlite state on a ``local`` PersistentVolume of the node pre-bound to its claim (a ``hostPath`` volume, the
launcher's, gets no ``fsGroup``); its MCP server a process of the host on the pods' gateway (the node has no
kube-proxy and no DNS, so a Service would not route). The test talks A2A to the pod's own address.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from agent_runtime.contract import wire
from tests.support.cluster import Cluster, realnode
from tests.support.cluster.chart import CHART, helm
from tests.support.cluster.steps import apply, ready_pod, wait
from tests.support.processes import GATEHOUSE_CMD, free_port, running
from tests.support.runtime import Rpc, Tools, request_ids, state, status_text, write_manifests

pytestmark = pytest.mark.e2e_node

AGENT = "file-manager"
GATEWAY = "files-gate"  # an MCPGateway in front of the same tools server (issue 38: its pod under the real kubelet)
NS = "default"  # the example's own namespace
RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}


def _agent_pod(cluster: Cluster, *, ready: bool = True) -> dict[str, Any] | None:
    return ready_pod(cluster, NS, f"gatehouse.dev/agent={AGENT}", ready=ready)


def _local_volume(node: realnode.RealNode, owner: str = AGENT) -> dict[str, Any]:
    """A ``local`` volume on the node, pre-bound to the claim of ``owner`` (an Agent or an MCPGateway): the kubelet
    applies ``fsGroup`` to it."""
    path = node.root / "volumes" / f"{owner}-state"
    path.mkdir(parents=True, exist_ok=True)
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"{node.name}-{owner}-state"},
            "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "standard",
                     "persistentVolumeReclaimPolicy": "Retain", "local": {"path": str(path)},
                     "claimRef": {"namespace": NS, "name": f"{owner}-state"},
                     "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                         {"key": "kubernetes.io/hostname", "operator": "In", "values": [node.name]}]}]}}}}


class Platform:
    def __init__(self, node: realnode.RealNode, tools: Tools, token: str) -> None:
        self.node, self.cluster, self.tools, self.token = node, node.cluster, tools, token

    def rpc(self) -> Rpc:
        pod = wait("the Agent's pod Ready", lambda: _agent_pod(self.cluster), 240)
        return Rpc(f"http://{pod['status']['podIP']}:8080", self.token)

    def exec(self, *command: str) -> tuple[int, str]:
        pod = _agent_pod(self.cluster)
        assert pod is not None
        proc = self.cluster.kubectl("exec", "-n", NS, pod["metadata"]["name"], "-c", "runtime", "--", *command,
                                    timeout=60)
        return proc.returncode, proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def platform(node: realnode.RealNode, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    if node.runtime != "runc":
        pytest.skip("under runc (crun: see test_crun_refuses_this_machines_cgroups)")
    cluster = node.cluster
    archive, _ = realnode.gatehouse_image()
    print(f"\nimage imported into the node in {node.load(archive):.1f} s")
    for namespace in ("gatehouse-system", NS):
        apply(cluster, {"apiVersion": "v1", "kind": "Namespace",
                         "metadata": {"name": namespace, "labels": RESTRICTED}})
    repository, tag = realnode.GATEHOUSE_IMAGE.rsplit(":", 1)
    started = time.monotonic()
    proc = helm(cluster, "upgrade", "--install", "gh", str(CHART), "--namespace", "gatehouse-system",
                "--set", f"image.repository={repository}", "--set", f"image.tag={tag}",
                "--set", "image.pullPolicy=Never")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rollout = cluster.kubectl("rollout", "status", "deployment", "-n", "gatehouse-system", "--timeout=150s",
                              timeout=170)
    assert rollout.returncode == 0, rollout.stdout + rollout.stderr
    base = tmp_path_factory.mktemp("agent-pod")
    port = free_port()
    sandbox, journal = base / "sandbox", base / "journal.jsonl"
    args = [*GATEHOUSE_CMD, "demo-tools", "--sandbox", str(sandbox), "--host", realnode.GATEWAY, "--port", str(port),
            "--journal", str(journal), "--seed"]
    with running(args, ready="demo-tools ready") as server:
        tools = Tools(f"http://{realnode.GATEWAY}:{port}/mcp", sandbox, journal, server)
        apply(cluster, _local_volume(node))
        for path in write_manifests(base / "manifests", tools.url):
            apply(cluster, yaml.safe_load(path.read_text()))
        pod = wait("the Agent's pod Ready", lambda: _agent_pod(cluster), 300)
        print(f"\nhelm install to the Agent's pod Ready: {time.monotonic() - started:.1f} s "
              f"({pod['metadata']['name']} on {pod['spec']['nodeName']})")
        secret = cluster.kubectl("get", "secret", "-n", NS, f"{AGENT}-access", "-o", "jsonpath={.data.tokens}")
        token = base64.b64decode(secret.stdout).decode().splitlines()[0].rsplit(":", 1)[1]
        yield Platform(node, tools, token)
        # What the next module installs again (test_operator_pod.py: `helm install gh`) must be gone, the operator's
        # Lease too (`helm uninstall` leaves it, naming a pod of this release as its holder): the whole namespace.
        cluster.kubectl("delete", "agent", AGENT, "-n", NS, "--timeout=60s", timeout=90)
        cluster.kubectl("delete", "mcpgateway", GATEWAY, "-n", NS, "--ignore-not-found", "--timeout=60s", timeout=90)
        helm(cluster, "uninstall", "gh", "--namespace", "gatehouse-system", "--wait", "--timeout=90s", timeout=120)
        cluster.kubectl("delete", "namespace", "gatehouse-system", "--timeout=120s", timeout=150)
        cluster.kubectl("delete", "pvc", f"{AGENT}-state", "-n", NS, "--wait=false")
        cluster.kubectl("delete", "pv", f"{node.name}-{AGENT}-state", "--wait=false")
        cluster.kubectl("delete", "pvc", f"{GATEWAY}-state", "-n", NS, "--wait=false", "--ignore-not-found")
        cluster.kubectl("delete", "pv", f"{node.name}-{GATEWAY}-state", "--wait=false", "--ignore-not-found")


def test_pod_security_restricted_admits_the_charts_pods_and_the_agents(platform: Platform) -> None:
    cluster = platform.cluster
    for namespace in ("gatehouse-system", NS):
        labels = json.loads(cluster.kubectl("get", "namespace", namespace, "-o", "json").stdout)["metadata"]["labels"]
        assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    operators = json.loads(cluster.kubectl("get", "pods", "-n", "gatehouse-system", "-o", "json").stdout)["items"]
    assert operators and all(p["status"]["phase"] == "Running" for p in operators)
    agent = _agent_pod(cluster)
    assert agent is not None and agent["spec"]["nodeName"] == platform.node.name
    # The same namespace refuses a pod that asks for what restricted forbids: the admission is real.
    refused = cluster.kubectl("run", "asks-for-more", "-n", NS, f"--image={realnode.GATEHOUSE_IMAGE}",
                              "--image-pull-policy=Never", "--overrides", json.dumps({"spec": {"containers": [{
                                  "name": "asks-for-more", "image": realnode.GATEHOUSE_IMAGE,
                                  "securityContext": {"capabilities": {"add": ["NET_ADMIN"]}}}]}}))
    assert refused.returncode != 0
    assert 'violates PodSecurity "restricted:latest"' in refused.stderr, refused.stderr


def test_the_runtime_runs_as_10001_and_writes_only_its_claim_and_tmp(platform: Platform) -> None:
    code, out = platform.exec("id")
    assert code == 0 and out.startswith("uid=10001(gatehouse) gid=10001(gatehouse) groups=10001(gatehouse)"), out
    code, out = platform.exec("sh", "-c", "touch /etc/owned")
    assert code != 0 and "Read-only file system" in out, out
    code, out = platform.exec("sh", "-c", "touch /opt/gatehouse/owned")
    assert code != 0 and "Read-only file system" in out, out
    code, out = platform.exec("sh", "-c", "touch /tmp/probe && echo TMP=ok")
    assert code == 0 and "TMP=ok" in out, out
    # The claim: the runtime's own database is there, and the volume is the pod's fsGroup's (the kubelet chowned it).
    code, out = platform.exec("sh", "-c", "ls /var/lib/gatehouse && stat -c 'STATE=%g %A' /var/lib/gatehouse && "
                                          "touch /var/lib/gatehouse/probe && echo CLAIM=ok && mount | grep ' / '")
    assert code == 0 and "STATE=10001 drwxrws" in out and "CLAIM=ok" in out, out
    assert any(p.startswith(("gatehouse", "state")) for p in out.split()), out
    assert "ro," in out.splitlines()[-1] or "(ro" in out.splitlines()[-1], out  # the root mount itself read-only


def test_the_runtime_cannot_gain_a_capability(platform: Platform) -> None:
    code, out = platform.exec("grep", "-E", "^(CapEff|CapPrm|CapBnd|NoNewPrivs|Seccomp):", "/proc/self/status")
    fields = dict(line.split(":\t") for line in out.strip().splitlines())
    assert code == 0 and fields["CapEff"] == fields["CapPrm"] == fields["CapBnd"] == "0000000000000000", out
    assert fields["NoNewPrivs"] == "1" and fields["Seccomp"] == "2", out  # seccomp RuntimeDefault: a filter
    # chown needs CAP_CHOWN, setuid(0) CAP_SETUID; a new user namespace (where a process would hold every
    # capability) is refused by RuntimeDefault's filter. Python 3.11 has no os.unshare: libc's, through ctypes.
    code, out = platform.exec("python3", "-c", """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def unshare():
    if libc.unshare(0x10000000) != 0:  # CLONE_NEWUSER
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
for name, attempt in (("chown", lambda: os.chown("/tmp", 0, 0)), ("setuid", lambda: os.setuid(0)),
                      ("unshare", unshare)):
    try:
        attempt()
        print(name, "ALLOWED")
    except OSError as exc:
        print(name, "refused", exc.strerror)
""")
    assert code == 0, out
    assert "ALLOWED" not in out and out.count("refused") == 3, out


def test_a_node_reboot_with_an_approval_pending_loses_nothing(platform: Platform) -> None:
    rpc = platform.rpc()
    task = rpc.send("delete old.txt")["task"]
    assert state(task) == "TASK_STATE_INPUT_REQUIRED", task
    pending = request_ids(task)
    before = _agent_pod(platform.cluster)
    assert before is not None
    started = time.monotonic()
    times = platform.node.reboot()
    restarted = wait("the Agent's pod Ready after the reboot", lambda: (p := _agent_pod(platform.cluster)) and
                      p["status"]["containerStatuses"][0]["restartCount"] > 0 and p, 300)
    print(f"\nreboot: down {times['down']:.1f} s, node Ready {times['up']:.1f} s later; the Agent's pod Ready again "
          f"{time.monotonic() - started:.1f} s after the reboot began ({restarted['status']['podIP']}, was "
          f"{before['status']['podIP']})")
    assert restarted["metadata"]["uid"] == before["metadata"]["uid"]  # the same pod, its containers started again
    rpc = platform.rpc()
    again = rpc.get_task(task["id"])
    assert state(again) == "TASK_STATE_INPUT_REQUIRED" and request_ids(again) == pending, again
    assert platform.tools.executions("delete_file") == []  # nothing ran while it waited
    done = rpc.send(data=wire.approve_all(), task=again)["task"]
    assert state(done) == "TASK_STATE_COMPLETED", done
    assert "Delete of old.txt" in status_text(done), done
    assert len(platform.tools.executions("delete_file", "old.txt")) == 1
    assert not (platform.tools.sandbox / "old.txt").exists()


def _gateway_manifest() -> dict[str, Any]:
    """examples/gateway/gateway.yaml's shape, narrowed: reads pass through, deletes wait for alice (group sre)."""
    return {"apiVersion": "gatehouse.dev/v1alpha1", "kind": "MCPGateway", "metadata": {"name": GATEWAY, "namespace": NS},
            "spec": {"upstream": {"name": "file-tools", "toolNames": ["read_file", "delete_file"],
                                  "requireApproval": ["delete_file"]},
                     "approval": {"timeout": "10m", "onTimeout": "deny", "approvers": {"users": ["alice"]}}}}


def _kubectl_gatehouse(cluster: Cluster, user: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``kubectl gatehouse ...`` as ``user`` (alice: her own client certificate), the plugin found on PATH."""
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig(user)),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run([str(cluster.kubectl_path), "gatehouse", *args, "-n", NS], capture_output=True, text=True,
                          env=env, timeout=120)


def _held_approval(cluster: Cluster) -> str | None:
    got = cluster.kubectl("get", "toolapprovals", "-n", NS, "-l", f"gatehouse.dev/gateway={GATEWAY}", "-o", "json")
    items = json.loads(got.stdout)["items"] if got.returncode == 0 else []
    pending = [i["metadata"]["name"] for i in items if i.get("status", {}).get("phase") == "Pending"]
    return pending[0] if pending else None


def test_a_gateway_pod_runs_restricted_and_holds_a_gated_call_until_kubectl_approves(platform: Platform) -> None:
    cluster, tools = platform.cluster, platform.tools
    apply(cluster, _local_volume(platform.node, GATEWAY))
    apply(cluster, _gateway_manifest())
    pod = wait("the gateway's pod Ready", lambda: ready_pod(cluster, NS, f"gatehouse.dev/gateway={GATEWAY}"), 300)
    assert pod["spec"]["nodeName"] == platform.node.name  # admitted by restricted in this namespace, run by the kubelet
    exec_id = cluster.kubectl("exec", "-n", NS, pod["metadata"]["name"], "--", "sh", "-c", "id -u; touch /etc/x", timeout=60)
    assert exec_id.stdout.splitlines()[0] == "10001" and "Read-only file system" in exec_id.stderr, exec_id
    apply(cluster, {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                    "metadata": {"name": "alice-approves", "namespace": NS},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "gatehouse-approver"},
                    "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]})
    secret = cluster.kubectl("get", "secret", "-n", NS, f"{GATEWAY}-access", "-o", "jsonpath={.data.tokens}")
    token = base64.b64decode(secret.stdout).decode().splitlines()[0].rsplit(":", 1)[1]
    url = f"http://{pod['status']['podIP']}:8080/mcp"
    (tools.sandbox / "through-the-gate.txt").write_text("kept until alice says")

    async def story() -> tuple[str, str, str]:
        async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http, \
                Client(streamable_http_client(url, http_client=http)) as client:
            read = await client.call_tool("read_file", {"path": "through-the-gate.txt"})
            assert not read.is_error and "kept until alice says" in _text(read), _text(read)
            call = asyncio.create_task(client.call_tool("delete_file", {"path": "through-the-gate.txt"}))
            name = await asyncio.to_thread(wait, "the held call's ToolApproval", lambda: _held_approval(cluster), 60)
            assert not call.done() and tools.executions("delete_file", "through-the-gate.txt") == []
            vote = await asyncio.to_thread(_kubectl_gatehouse, cluster, "alice", "approve", name)
            assert vote.returncode == 0, vote.stdout + vote.stderr
            result = await asyncio.wait_for(call, 60)
            return name, _text(result), "error" if result.is_error else "ok"

    name, text, outcome = asyncio.run(story())
    assert outcome == "ok", text
    assert len(tools.executions("delete_file", "through-the-gate.txt")) == 1
    assert not (tools.sandbox / "through-the-gate.txt").exists()
    phase = cluster.kubectl("get", "toolapproval", name, "-n", NS, "-o", "jsonpath={.status.phase}").stdout
    assert phase in ("Approved", "Executed", "Succeeded"), phase


def _text(result: Any) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)
