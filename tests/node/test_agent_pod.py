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
from agent_runtime.kube.objects import approval_name
from tests.support.cluster import Cluster, realnode
from tests.support.cluster.chart import CHART, helm
from tests.support.cluster.steps import apply, ready_pod, ready_pods, wait
from tests.support.postgres import find_bin_dir, running_postgres
from tests.support.processes import GATEHOUSE_CMD, free_port, running
from tests.support.runtime import Rpc, Tools, ended, request_ids, state, status_text, write_manifests

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


def test_the_slack_bridge_switched_on_by_its_value_runs_restricted(platform: Platform) -> None:
    """The chart's Slack bridge (the project's image) under ``restricted`` on the real node, as the platform story
    switches it on: its Secret, ``helm upgrade --set slack.enabled=true``, Ready."""
    cluster = platform.cluster
    made = cluster.kubectl("create", "secret", "generic", "gatehouse-slack", "-n", "gatehouse-system",
                           "--from-literal=bot-token=xoxb-test", "--from-literal=signing-secret=test-signing-secret")
    assert made.returncode == 0, made.stderr
    repository, tag = realnode.GATEHOUSE_IMAGE.rsplit(":", 1)
    upgraded = helm(cluster, "upgrade", "gh", str(CHART), "-n", "gatehouse-system", "--reuse-values",
                    "--set", "slack.enabled=true", "--set", f"slack.namespaces={{{NS}}}",
                    "--set", f"image.repository={repository}", "--set", f"image.tag={tag}")
    assert upgraded.returncode == 0, upgraded.stdout + upgraded.stderr
    rollout = cluster.kubectl("rollout", "status", "deployment", "gh-gatehouse-slack", "-n", "gatehouse-system",
                              "--timeout=150s", timeout=170)
    assert rollout.returncode == 0, rollout.stdout + rollout.stderr
    bridge = ready_pod(cluster, "gatehouse-system", "app.kubernetes.io/component=slack")
    assert bridge is not None and bridge["spec"]["nodeName"] == platform.node.name, bridge
    exec_id = cluster.kubectl("exec", "-n", "gatehouse-system", bridge["metadata"]["name"], "--", "sh", "-c",
                              "id -u; touch /etc/x", timeout=60)
    assert exec_id.stdout.splitlines()[0] == "10001" and "Read-only file system" in exec_id.stderr, exec_id


def test_an_in_cluster_client_pod_asks_with_the_token_the_kubelet_projected_for_gatehouse(platform: Platform) -> None:
    """As docs/operator.md tells a client pod to: a ServiceAccount token for the audience ``gatehouse.dev/a2a``,
    projected by the real kubelet, read on each call. The runtime's TokenReview on the real API accepts it and the
    pause is the ServiceAccount's; the pod's own API-server token is refused (401); the ServiceAccount may not approve
    its own call (no approvers name it) but may cancel it."""
    cluster = platform.cluster
    apply(cluster, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "a2a-client", "namespace": NS}})
    pod = realnode.busybox_client("a2a-client", NS, platform.node.name, {"gatehouse.dev/test": "a2a-client"})
    pod["spec"].update(serviceAccountName="a2a-client", automountServiceAccountToken=True, volumes=[{
        "name": "gatehouse-token", "projected": {"sources": [{"serviceAccountToken": {
            "audience": "gatehouse.dev/a2a", "expirationSeconds": 600, "path": "token"}}]}}])
    pod["spec"]["containers"][0]["volumeMounts"] = [
        {"name": "gatehouse-token", "mountPath": "/var/run/secrets/gatehouse.dev/a2a", "readOnly": True}]
    apply(cluster, pod)
    wait("the client pod Ready", lambda: ready_pod(cluster, NS, "gatehouse.dev/test=a2a-client"), 120)
    agent = wait("the Agent's pod Ready", lambda: _agent_pod(cluster), 240)
    (platform.tools.sandbox / "in-cluster.txt").write_text("x")

    def call(token_file: str, method: str, params: dict[str, Any]) -> str:
        body = json.dumps({"jsonrpc": "2.0", "id": "1", "method": method, "params": params})
        script = (f"wget -q -O - --header \"Authorization: Bearer $(cat {token_file})\" --header 'A2A-Version: 1.0' "
                  f"--header 'Content-Type: application/json' --post-data '{body}' "
                  f"http://{agent['status']['podIP']}:8080/ 2>&1; echo EXIT=$?")
        done = cluster.kubectl("exec", "-n", NS, "a2a-client", "--", "sh", "-c", script, timeout=90)
        return done.stdout + done.stderr

    question = {"message": {"messageId": "m-in-cluster", "role": "ROLE_USER", "parts": [{"text": "delete in-cluster.txt"}]}}
    refused = call("/var/run/secrets/kubernetes.io/serviceaccount/token", "SendMessage", question)
    assert "401" in refused and "EXIT=0" not in refused, refused
    token = "/var/run/secrets/gatehouse.dev/a2a/token"
    answered = call(token, "SendMessage", question)
    assert "EXIT=0" in answered, answered
    task = json.loads(answered.rsplit("EXIT=", 1)[0])["result"]["task"]
    assert state(task) == "TASK_STATE_INPUT_REQUIRED", task
    (request,) = request_ids(task)
    name = approval_name(AGENT, request)

    def phase() -> str:
        return cluster.kubectl("get", "toolapproval", name, "-n", NS, "-o", "jsonpath={.status.phase}").stdout

    wait(f"{name} Pending", lambda: phase() == "Pending", 30)
    got = json.loads(cluster.kubectl("get", "toolapproval", name, "-n", NS, "-o", "json").stdout)
    assert "system:serviceaccount:default:a2a-client" in json.dumps(got), got
    # A ServiceAccount is never "the requester alone" who may decide: it decides only where approvers name it.
    approve = {"message": {"messageId": "m-in-cluster-approve", "role": "ROLE_USER", "taskId": task["id"],
                           "contextId": task["contextId"], "parts": [{"data": {"decision_type": "approve"}}]}}
    vote = call(token, "SendMessage", approve)
    assert "a ServiceAccount decides only where approvers name it" in vote and phase() == "Pending", vote
    assert platform.tools.executions("delete_file", "in-cluster.txt") == []
    # It may cancel its own task: nothing stays pending (a pending call would hold the next test's move to Postgres).
    canceled = call(token, "CancelTask", {"id": task["id"]})
    assert "TASK_STATE_CANCELED" in canceled, canceled
    wait(f"{name} Canceled", lambda: phase() == "Canceled", 30)
    assert platform.tools.executions("delete_file", "in-cluster.txt") == []


def _ready_agent_pods(cluster: Cluster) -> list[dict[str, Any]]:
    return ready_pods(cluster, NS, f"gatehouse.dev/agent={AGENT}")

def _rolled(cluster: Cluster, before: set[str], replicas: int) -> list[dict[str, Any]] | None:
    """The Agent's pods once ``replicas`` of them are Ready and none of ``before`` is left (a rollout done)."""
    got = cluster.kubectl("get", "pods", "-n", NS, "-l", f"gatehouse.dev/agent={AGENT}", "-o", "json")
    names = {p["metadata"]["name"] for p in json.loads(got.stdout)["items"]} if got.returncode == 0 else before
    ready = _ready_agent_pods(cluster)
    return ready if len(ready) == replicas and not (names & before) else None


@pytest.mark.timeout(1200)  # two rollouts and a move to another store, each waiting for the real controllers
def test_calls_pending_through_a_recreate_rollout_and_a_rolling_move_to_postgres_run_once(platform: Platform) -> None:
    """The platform story's rollouts on the real node (tests/cluster/test_story.py tells it on the stand-in): sqlite on
    the claim (Recreate) with two calls waiting, then Postgres from a Secret with two replicas (RollingUpdate) with a
    call waiting. The first edit also names alice (group sre, bound to ``gatehouse-approver``) among the approvers:
    the calls paused before it keep the approvers they were asked under and are decided over A2A by the requester; the
    one paused after it is approved by alice with ``kubectl gatehouse``, through the chart's admission policy. Each
    approved call runs once, the denied one never, and each ToolApproval is Pending in the real API meanwhile."""
    cluster, tools = platform.cluster, platform.tools
    apply(cluster, {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                    "metadata": {"name": "sre-approves", "namespace": NS},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "gatehouse-approver"},
                    "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "sre"}]})
    for name in ("notes.txt", "report.md", "a.txt"):
        (tools.sandbox / name).write_text(name)

    def paused(rpc: Rpc, text: str) -> tuple[dict[str, Any], str]:
        task = rpc.send(text)["task"]
        assert state(task) == "TASK_STATE_INPUT_REQUIRED", task
        (request,) = request_ids(task)
        name = approval_name(AGENT, request)
        wait(f"{name} Pending", lambda: cluster.kubectl("get", "toolapproval", name, "-n", NS, "-o",
                                                         "jsonpath={.status.phase}").stdout == "Pending", 30)
        return task, name

    def decide(rpc: Rpc, task: dict[str, Any], decision: dict[str, Any]) -> None:
        latest = rpc.get_task(task["id"])
        assert state(latest) == "TASK_STATE_INPUT_REQUIRED", latest
        rpc.send(data=decision, task=latest)

    def finished(task: dict[str, Any]) -> dict[str, Any]:
        return wait("the task ended", lambda: (t := platform.rpc().get_task(task["id"])) and ended(t) and t, 90)

    # 1. sqlite on its claim: an edit rolls the pod (Recreate); two calls wait through it.
    rpc = platform.rpc()
    (second, _), (third, _) = paused(rpc, "delete notes.txt"), paused(rpc, "delete report.md")
    before = {p["metadata"]["name"] for p in _ready_agent_pods(cluster)}
    cluster.kubectl("patch", "agent", AGENT, "-n", NS, "--type=merge", "-p", json.dumps({"spec": {"approval": {
        "approvers": {"users": [f"{AGENT}-admin", "alice"]}}}}))
    wait("the runtime's pod replaced", lambda: _rolled(cluster, before, 1), 240)
    strategy = json.loads(cluster.kubectl("get", "deployment", AGENT, "-n", NS, "-o", "json").stdout)["spec"]["strategy"]
    assert strategy["type"] == "Recreate", strategy
    decide(platform.rpc(), second, wire.deny_all("keep the notes"))
    decide(platform.rpc(), third, wire.approve_all())
    assert "Delete of report.md: deleted" in status_text(finished(third))
    assert "delete_file" in json.dumps(finished(second)) and (tools.sandbox / "notes.txt").exists()
    assert len(tools.executions("delete_file", "report.md")) == 1 and tools.executions("delete_file", "notes.txt") == []

    # 2. Postgres (a real server on the host, reached at the pods' gateway) from a Secret, two replicas.
    bin_dir = find_bin_dir()
    assert bin_dir is not None, "no PostgreSQL binaries (initdb): make postgres-bin installs them"
    with running_postgres(bin_dir, also_listen=realnode.GATEWAY, allow_from=realnode.POD_SUBNET) as pg:
        url = pg.create_database().replace("127.0.0.1", realnode.GATEWAY)
        apply(cluster, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "agent-db", "namespace": NS},
                        "data": {"url": base64.b64encode(url.encode()).decode()}})
        before = {p["metadata"]["name"] for p in _ready_agent_pods(cluster)}
        cluster.kubectl("patch", "agent", AGENT, "-n", NS, "--type=merge", "-p", json.dumps({"spec": {
            "state": {"sqlite": None, "postgres": {"urlSecretRef": {"name": "agent-db"}}}, "deployment": {"replicas": 2}}}))
        pods = wait("two runtime pods on Postgres", lambda: _rolled(cluster, before, 2), 300)
        strategy = json.loads(cluster.kubectl("get", "deployment", AGENT, "-n", NS, "-o", "json").stdout)["spec"]["strategy"]
        assert strategy["type"] == "RollingUpdate", strategy
        # Paused through one replica, seen waiting through the other, approved by alice while the pods roll.
        first, other = (Rpc(f"http://{p['status']['podIP']}:8080", platform.token) for p in pods)
        fourth, pending = paused(first, "delete a.txt")
        assert state(other.get_task(fourth["id"])) == "TASK_STATE_INPUT_REQUIRED"
        before = {p["metadata"]["name"] for p in pods}
        cluster.kubectl("patch", "agent", AGENT, "-n", NS, "--type=merge", "-p",
                        json.dumps({"spec": {"description": "Edited again: a rolling update."}}))
        wait("a new pod Ready while the rolling update runs", lambda: any(
            p["metadata"]["name"] not in before for p in _ready_agent_pods(cluster)), 240)
        voted = _kubectl_gatehouse(cluster, "alice", "approve", pending)
        assert voted.returncode == 0, voted.stdout + voted.stderr
        done = finished(fourth)
        assert "Delete of a.txt: deleted" in status_text(done), done
        assert len(tools.executions("delete_file", "a.txt")) == 1 and not (tools.sandbox / "a.txt").exists()
        wait(f"{pending} Approved", lambda: cluster.kubectl("get", "toolapproval", pending, "-n", NS, "-o",
                                                            "jsonpath={.status.phase}").stdout == "Approved", 30)
        wait("the rolling update done", lambda: _rolled(cluster, before, 2), 300)
        # Deleted while its database still runs: the real garbage collector removes its children.
        cluster.kubectl("delete", "agent", AGENT, "-n", NS, "--timeout=90s", timeout=120)
    wait("the runtime's Deployment collected by the garbage collector", lambda: cluster.kubectl(
        "get", "deployment", AGENT, "-n", NS).returncode != 0, 90)
