"""Services and DNS on the real node, as a cluster gives them: kube-proxy (iptables mode, from ``hack/kubeproxy/``)
routes Services' cluster IPs, CoreDNS (from ``hack/coredns/``, on the pods' gateway, the kubelet's ``clusterDNS``)
answers ``<service>.<namespace>.svc.cluster.local``.

The Agent's MCP server is named the way a cluster names it: a Service ``file-tools`` (its one endpoint the test's
demo tools on the node) at ``http://file-tools.<namespace>.svc.cluster.local:<port>/mcp`` in the RemoteMCPServer; the
runtime's pod turns Ready only once it has listed its tools there. A busybox pod then reads the agent card at the URL
the card itself announces, ``http://file-manager.<namespace>.svc.cluster.local:8080/``: the operator's Service, by
name.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from tests.node.conftest import _unavailable
from tests.support.cluster import Cluster, ClusterUnavailable, realnode
from tests.support.cluster.chart import CHART, helm
from tests.support.cluster.steps import apply, ready_pod, wait
from tests.support.processes import GATEHOUSE_CMD, free_port, running
from tests.support.runtime import write_manifests

# The first run builds CoreDNS (~16 min) and kube-proxy and the image inside the fixture: far past the suite's 300 s.
pytestmark = [pytest.mark.e2e_node, pytest.mark.timeout(2400)]

RELEASE, SYSTEM, AGENTS = "sv", "sv-system", "sv-agents"
AGENT = "file-manager"
RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}
TOOLS_PORT = 8765  # the Service's port; its endpoint is wherever the demo tools listen


def _tools_service(port: int) -> list[dict[str, Any]]:
    """A Service without a selector and its EndpointSlice: the demo tools on the node, at ``GATEWAY:port``."""
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "file-tools", "namespace": AGENTS},
               "spec": {"ports": [{"name": "mcp", "port": TOOLS_PORT, "targetPort": port, "protocol": "TCP"}]}}
    endpoints = {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                 "metadata": {"name": "file-tools-node", "namespace": AGENTS,
                              "labels": {"kubernetes.io/service-name": "file-tools"}},
                 "addressType": "IPv4", "ports": [{"name": "mcp", "port": port, "protocol": "TCP"}],
                 "endpoints": [{"addresses": [realnode.GATEWAY]}]}
    return [service, endpoints]


@dataclass
class Served:
    cluster: Cluster
    runtime: dict[str, Any]

    def client(self, script: str) -> str:
        proc = self.cluster.kubectl("exec", "-n", AGENTS, "client", "--", "/bin/busybox", "sh", "-c", script,
                                    timeout=40)
        return proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def served(node_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    try:
        for build in (realnode.kube_proxy, realnode.coredns):
            binary, took = build()
            print(f"\n{binary.name}: " + (f"built in {took:.0f} s" if took else "built"))
    except ClusterUnavailable as exc:
        _unavailable(str(exc))
    node = realnode.RealNode(node_cluster, name="node-services", cluster_dns=realnode.GATEWAY)
    node.start()
    proxy, dns = realnode.ServiceProxy(node), realnode.ClusterDns(node)
    try:
        print(f"kube-proxy synced in {proxy.start():.1f} s, CoreDNS serving in {dns.start():.1f} s")
        cluster = node.cluster
        archive, _ = realnode.gatehouse_image()
        print(f"image imported into the node in {node.load(archive):.1f} s")
        for namespace in (SYSTEM, AGENTS):
            apply(cluster, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": RESTRICTED}})
        repository, tag = realnode.GATEHOUSE_IMAGE.rsplit(":", 1)
        proc = helm(cluster, "upgrade", "--install", RELEASE, str(CHART), "--namespace", SYSTEM,
                    "--set", f"image.repository={repository}", "--set", f"image.tag={tag}",
                    "--set", "image.pullPolicy=Never", "--set", "operator.replicas=1",
                    "--set", f"operator.watchNamespaces={{{AGENTS}}}",
                    "--set", "rbac.userRoles=false")  # gatehouse-approver/-viewer are cluster-wide: another release's
        assert proc.returncode == 0, proc.stdout + proc.stderr
        base = tmp_path_factory.mktemp("services")
        port = free_port()
        args = [*GATEHOUSE_CMD, "demo-tools", "--sandbox", str(base / "sandbox"), "--host", realnode.GATEWAY,
                "--port", str(port), "--journal", str(base / "journal.jsonl"), "--seed"]
        with running(args, ready="demo-tools ready"):
            apply(cluster, *_tools_service(port), realnode.busybox_client("client", AGENTS, node.name))
            url = f"http://file-tools.{AGENTS}.svc.cluster.local:{TOOLS_PORT}/mcp"
            for path in write_manifests(base / "manifests", url):
                doc = yaml.safe_load(path.read_text())
                doc["metadata"]["namespace"] = AGENTS
                if doc["kind"] == "Agent":
                    doc["spec"]["state"] = {"ephemeral": True}
                apply(cluster, doc)
            started = time.monotonic()
            runtime = wait("the Agent's pod Ready (its tools listed by the Service's name)",
                            lambda: ready_pod(cluster, AGENTS, f"gatehouse.dev/agent={AGENT}"), 300)
            print(f"the Agent's pod Ready {time.monotonic() - started:.1f} s after it was applied")
            wait("the client Running", lambda: cluster.kubectl(
                "get", "pod", "client", "-n", AGENTS, "-o", "jsonpath={.status.phase}").stdout == "Running", 60)
            yield Served(cluster, runtime)
            cluster.kubectl("delete", "agent", AGENT, "-n", AGENTS, "--timeout=60s", timeout=90)
            helm(cluster, "uninstall", RELEASE, "--namespace", SYSTEM, "--wait", "--timeout=90s", timeout=120)
            for namespace in (SYSTEM, AGENTS):
                cluster.kubectl("delete", "namespace", namespace, "--wait=false")
    finally:
        dns.stop()
        proxy.stop()
        node.stop()


def test_the_runtime_lists_its_tools_through_dns_and_a_service(served: Served) -> None:
    (container,) = served.runtime["spec"]["containers"]
    assert container["name"] == "runtime"
    resolv = served.cluster.kubectl("exec", "-n", AGENTS, served.runtime["metadata"]["name"], "-c", "runtime", "--",
                                    "cat", "/etc/resolv.conf")
    assert f"nameserver {realnode.GATEWAY}" in resolv.stdout and f"search {AGENTS}.svc.cluster.local" in resolv.stdout, (
        resolv.stdout + resolv.stderr)
    conditions = {c["type"]: c["status"] for c in served.runtime["status"]["conditions"]}
    assert conditions["Ready"] == "True"  # /readyz: the tools were listed at file-tools.<namespace>.svc.cluster.local


def test_a_pod_reaches_the_agent_at_the_url_its_card_announces(served: Served) -> None:
    name = f"{AGENT}.{AGENTS}.svc.cluster.local"
    looked_up = served.client(f"/bin/busybox nslookup {name}")
    service = json.loads(served.cluster.kubectl("get", "service", AGENT, "-n", AGENTS, "-o", "json").stdout)
    assert service["spec"]["clusterIP"] in looked_up, looked_up
    request = f"GET /.well-known/agent-card.json HTTP/1.0\\r\\nHost: {name}:8080\\r\\n\\r\\n"
    reply = served.client(f"printf '{request}' | /bin/busybox nc -w 15 {name} 8080")
    assert reply.startswith("HTTP/1.1 200"), reply
    card = json.loads(reply.split("\n\n", 1)[1])  # kubectl exec's text: CRLF read as newlines
    (interface,) = card["supportedInterfaces"]
    assert interface["url"] == f"http://{name}:8080/", card  # the card's own URL is the one just used
