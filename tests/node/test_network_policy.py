"""``networkPolicy.enabled`` enforced on the real node: kube-router's firewall (``realnode.Firewall``, built from
``hack/kuberouter/``) holds the Agent's runtime pod -- made by the chart's operator from the project's image -- and the
operator's own pods to the NetworkPolicies the chart and the operator render.

The chart is first installed with the value off, and every client reaches the runtime's port and the operator's; then
``helm upgrade`` turns it on (the documented path), the restarted operator makes the Agent's NetworkPolicy, and:
a pod labelled like an Agent's runtime in the Agent's namespace and a pod of the namespace ``runtimeFrom`` names get
through; a plain pod of the Agent's namespace, and a pod labelled like an Agent's runtime in another namespace, are
refused; no pod reaches the operator (``operatorFrom`` is empty); the kubelet's probes (from the node) keep both Ready.
The clients are busybox pods speaking HTTP through ``nc``; the evidence is what each one reads back.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from tests.support.cluster import Cluster, ClusterUnavailable, realnode
from tests.support.cluster.chart import CHART, helm
from tests.support.cluster.steps import apply, ready_pod, wait
from tests.support.processes import GATEHOUSE_CMD, free_port, running
from tests.support.runtime import write_manifests

# The first run builds kube-router (~7 min) and the image inside the fixture: far past the suite's 300 s.
pytestmark = [pytest.mark.e2e_node, pytest.mark.timeout(2400)]

RELEASE, SYSTEM = "np", "np-system"
AGENTS, INGRESS, ELSEWHERE = "np-agents", "np-ingress", "np-elsewhere"
AGENT = "file-manager"
RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}
RUNTIME_LABELS = {"app.kubernetes.io/name": "gatehouse-agent", "app.kubernetes.io/managed-by": "gatehouse-operator"}
# client pod -> (namespace, labels, admitted once the policy is on)
CLIENTS: dict[str, tuple[str, dict[str, str], bool]] = {
    "caller-agent": (AGENTS, {**RUNTIME_LABELS, "gatehouse.dev/agent": "caller"}, True),  # an Agent of the namespace
    "ingress": (INGRESS, {"app": "ingress"}, True),  # networkPolicy.runtimeFrom
    "stranger": (AGENTS, {"app": "stranger"}, False),  # the Agent's namespace, but no Agent
    "outsider": (ELSEWHERE, {**RUNTIME_LABELS, "gatehouse.dev/agent": "outsider"}, False),  # an Agent elsewhere
}
ON = ("--set", "networkPolicy.enabled=true",
      "--set-json", "networkPolicy.runtimeFrom=" + json.dumps(
          [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": INGRESS}}}]))


@dataclass
class Enforced:
    cluster: Cluster
    runtime_ip: str
    operator_ip: str
    before: dict[str, dict[str, str]]  # client -> {"runtime": reply, "operator": reply}, the value still off

    def get(self, client: str, ip: str, port: int, path: str) -> str:
        """What ``client`` reads for ``GET path`` from ``ip:port`` (the status line and body), or nc's complaint."""
        namespace = CLIENTS[client][0]
        request = f"GET {path} HTTP/1.0\\r\\nHost: {ip}\\r\\n\\r\\n"
        proc = self.cluster.kubectl("exec", "-n", namespace, client, "--", "/bin/busybox", "sh", "-c",
                                    f"printf '{request}' | /bin/busybox nc -w 15 {ip} {port} 2>&1; echo rc=$?",
                                    timeout=30)
        return proc.stdout + proc.stderr


def _admitted(reply: str) -> bool:
    return reply.startswith("HTTP/1.") and " 200 " in reply.splitlines()[0]


def _refused(reply: str) -> bool:
    """nc's own words when the firewall rejects the connection (kube-router's REJECT: a TCP reset)."""
    return "Connection refused" in reply and "rc=1" in reply


def _reply(enforced: Enforced, client: str, target: str, want: Any, timeout: float = 60) -> str:
    """``client``'s reply from ``target`` (``runtime`` or ``operator``) once ``want`` holds for it (a busy operator
    may answer late, a new policy takes a sync to apply); the last reply if it never does."""
    ip, path = ((enforced.runtime_ip, "/.well-known/agent-card.json") if target == "runtime" else
                (enforced.operator_ip, "/healthz"))
    deadline = time.monotonic() + timeout
    while not want(reply := enforced.get(client, ip, 8080, path)) and time.monotonic() < deadline:
        time.sleep(1)
    return reply


def _replies(enforced: Enforced) -> dict[str, dict[str, str]]:
    return {client: {target: _reply(enforced, client, target, _admitted) for target in ("runtime", "operator")}
            for client in CLIENTS}


@pytest.fixture(scope="module")
def enforced(node: realnode.RealNode, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Enforced]:
    if node.runtime != "runc":
        pytest.skip("under runc (crun: see test_crun_refuses_this_machines_cgroups)")
    cluster = node.cluster
    firewall = realnode.Firewall(node)
    try:
        binary, took = realnode.kube_router()
        print(f"\nkube-router {realnode.KUBE_ROUTER}: " + (f"built in {took:.0f} s" if took else f"built ({binary.name})"))
        print(f"its firewall programmed in {firewall.start():.1f} s")
    except ClusterUnavailable as exc:
        pytest.skip(str(exc))
    try:
        archive, _ = realnode.gatehouse_image()
        print(f"image imported into the node in {node.load(archive):.1f} s")
        for namespace in (SYSTEM, AGENTS, INGRESS, ELSEWHERE):
            apply(cluster, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": RESTRICTED}})
        repository, tag = realnode.GATEHOUSE_IMAGE.rsplit(":", 1)
        chart = ("--namespace", SYSTEM, "--set", f"image.repository={repository}", "--set", f"image.tag={tag}",
                 "--set", "image.pullPolicy=Never", "--set", "operator.replicas=1",
                 "--set", f"operator.watchNamespaces={{{AGENTS}}}",
                 "--set", "rbac.userRoles=false")  # gatehouse-approver/-viewer are cluster-wide: another release's
        proc = helm(cluster, "upgrade", "--install", RELEASE, str(CHART), *chart)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        base = tmp_path_factory.mktemp("network-policy")
        port = free_port()
        args = [*GATEHOUSE_CMD, "demo-tools", "--sandbox", str(base / "sandbox"), "--host", realnode.GATEWAY,
                "--port", str(port), "--journal", str(base / "journal.jsonl"), "--seed"]
        with running(args, ready="demo-tools ready"):
            for path in write_manifests(base / "manifests", f"http://{realnode.GATEWAY}:{port}/mcp"):
                doc = yaml.safe_load(path.read_text())
                doc["metadata"]["namespace"] = AGENTS
                if doc["kind"] == "Agent":
                    doc["spec"]["state"] = {"ephemeral": True}  # what is kept does not matter here
                apply(cluster, doc)
            apply(cluster, *(realnode.busybox_client(name, ns, node.name, labels) for name, (ns, labels, _) in CLIENTS.items()))
            runtime = wait("the Agent's pod Ready", lambda: ready_pod(cluster, AGENTS, f"gatehouse.dev/agent={AGENT}"), 300)
            operator = wait("the operator Ready", lambda: ready_pod(
                cluster, SYSTEM, "app.kubernetes.io/component=operator"), 180)
            for name, (namespace, _, _) in CLIENTS.items():
                wait(f"client {name} Running", lambda n=name, ns=namespace: cluster.kubectl(
                    "get", "pod", n, "-n", ns, "-o", "jsonpath={.status.phase}").stdout == "Running", 60)
            off = Enforced(cluster, runtime["status"]["podIP"], operator["status"]["podIP"], {})
            off.before = _replies(off)

            started = time.monotonic()
            proc = helm(cluster, "upgrade", RELEASE, str(CHART), *chart, *ON)
            assert proc.returncode == 0, proc.stdout + proc.stderr
            wait("the Agent's NetworkPolicy, made by the upgraded operator", lambda: cluster.kubectl(
                "get", "networkpolicy", AGENT, "-n", AGENTS).returncode == 0, 240)
            print(f"helm upgrade to the Agent's NetworkPolicy: {time.monotonic() - started:.1f} s")
            rollout = cluster.kubectl("rollout", "status", "deployment", "-n", SYSTEM, f"{RELEASE}-gatehouse-operator",
                                      "--timeout=150s", timeout=170)
            assert rollout.returncode == 0, rollout.stdout + rollout.stderr
            operator = wait("the upgraded operator Ready", lambda: ready_pod(
                cluster, SYSTEM, "app.kubernetes.io/component=operator"), 60)
            yield Enforced(cluster, runtime["status"]["podIP"], operator["status"]["podIP"], off.before)
            cluster.kubectl("delete", "agent", AGENT, "-n", AGENTS, "--timeout=60s", timeout=90)
            helm(cluster, "uninstall", RELEASE, "--namespace", SYSTEM, "--wait", "--timeout=90s", timeout=120)
            for namespace in (SYSTEM, AGENTS, INGRESS, ELSEWHERE):
                cluster.kubectl("delete", "namespace", namespace, "--wait=false")
    finally:
        firewall.stop()


def test_with_the_value_off_every_pod_reaches_the_runtime_and_the_operator(enforced: Enforced) -> None:
    for client, replies in enforced.before.items():
        assert _admitted(replies["runtime"]) and f'"name":"{AGENT}"' in replies["runtime"].replace(" ", ""), (
            client, replies)
        assert _admitted(replies["operator"]), (client, replies)


def test_on_the_runtime_admits_the_namespaces_agents_and_the_listed_peers_only(enforced: Enforced) -> None:
    policy = json.loads(enforced.cluster.kubectl("get", "networkpolicy", AGENT, "-n", AGENTS, "-o", "json").stdout)
    assert policy["metadata"]["ownerReferences"][0]["kind"] == "Agent"
    replies = {client: _reply(enforced, client, "runtime", _admitted if admitted else _refused)
               for client, (_, _, admitted) in CLIENTS.items()}
    print("\n" + "\n".join(f"{client} -> runtime: {reply.splitlines()[0][:100]}" for client, reply in replies.items()))
    for client, (_, _, admitted) in CLIENTS.items():
        if admitted:
            assert _admitted(replies[client]) and f'"name":"{AGENT}"' in replies[client].replace(" ", ""), (
                client, replies[client])
        else:
            assert _refused(replies[client]), (client, replies[client])


def test_on_no_pod_reaches_the_operator_and_the_kubelets_probes_still_do(enforced: Enforced) -> None:
    for client in CLIENTS:
        reply = _reply(enforced, client, "operator", _refused)
        print(f"{client} -> operator: {reply.splitlines()[0][:100]}")
        assert _refused(reply), (client, reply)
    # The probes come from the node, which a NetworkPolicy always lets through: after three of the runtime's readiness
    # periods (5 s) under the policy both pods are Ready, their containers never restarted.
    time.sleep(16)
    for namespace, selector in ((AGENTS, f"gatehouse.dev/agent={AGENT}"), (SYSTEM, "app.kubernetes.io/component=operator")):
        pod = ready_pod(enforced.cluster, namespace, selector)
        assert pod is not None, (namespace, selector)
        assert pod["status"]["containerStatuses"][0]["restartCount"] == 0, pod["status"]
