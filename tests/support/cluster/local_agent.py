"""An Agent on the real control plane with its processes run locally: the chart's operator (its container's command,
with only the chart's operator ServiceAccount token), the demo MCP server, and the Agent's runtime
(``gatehouse-runtime serve --kubeconfig``) with only a token of the ServiceAccount the operator made for it, so
what each may do is what the chart's and the operator's RBAC grant. No node runs pods in ``make test``: the local
runtime stands in for the Agent's pod (its Deployment's pod stays Pending).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from agent_runtime.clients import processes
from tests.support.cluster.chart import Release
from tests.support.cluster.launcher import Cluster
from tests.support.cluster.steps import wait
from tests.support.processes import free_port
from tests.support.runtime import RuntimeProcess, Tools, demo_tools, write_manifests

__all__ = ["LocalAgent", "local_agent", "operator", "wait"]

AGENT = "file-manager"  # the example's Agent


@contextmanager
def operator(cluster: Cluster, chart: Release, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """The chart's operator container as a local process (``kopf`` from this virtualenv; its /healthz on a free
    port of 127.0.0.1, the one change: a pod has its own network, this process has the host's)."""
    deployment = json.loads(cluster.kubectl("get", "deployment", "-n", chart.namespace, f"{chart.fullname}-operator",
                                            "-o", "json").stdout)
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    (command,) = container["command"]
    env = {e["name"]: e["value"] for e in container.get("env", [])}
    port = free_port()
    env["GATEHOUSE_OPERATOR_LISTEN"] = f"127.0.0.1:{port}"
    kubeconfig = cluster.service_account(chart.namespace, f"{chart.fullname}-operator")
    with log.open("ab") as out:
        proc = subprocess.Popen([str(Path(sys.executable).parent / command), *container["args"]], stdout=out,
                                stderr=subprocess.STDOUT, env={**os.environ, **env, "KUBECONFIG": str(kubeconfig)})

    def live() -> bool:
        assert proc.poll() is None, log.read_text()[-4000:]
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as reply:
                return bool(reply.status == 200)
        except (urllib.error.URLError, ConnectionError):
            return False

    try:
        wait("the operator's liveness endpoint", live)
        yield proc
    finally:
        processes.stop(proc, grace=10)


@dataclass
class LocalAgent:
    cluster: Cluster
    namespace: str
    tools: Tools
    runtime: RuntimeProcess
    operator_log: Path

    def agent(self) -> dict[str, Any]:
        got = self.cluster.kubectl("get", "agent", AGENT, "-n", self.namespace, "-o", "json")
        return json.loads(got.stdout) if got.returncode == 0 else {}

    def condition(self, kind: str) -> dict[str, Any]:
        conditions = self.agent().get("status", {}).get("conditions", [])
        return next((c for c in conditions if c["type"] == kind), {})

    def gatehouse(self, user: str, *args: str) -> subprocess.CompletedProcess[str]:
        """``kubectl gatehouse ARGS -n NAMESPACE`` as ``user``: the real kubectl finding the plugin on PATH."""
        env = {**os.environ, "KUBECONFIG": str(self.cluster.kubeconfig(user)),
               "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        return subprocess.run([str(self.cluster.kubectl_path), "gatehouse", *args, "-n", self.namespace],
                              capture_output=True, text=True, env=env, timeout=120)

    def approval(self, name: str) -> dict[str, Any]:
        got = self.cluster.kubectl("get", "toolapproval", name, "-n", self.namespace, "-o", "json")
        return json.loads(got.stdout) if got.returncode == 0 else {}


def _in_namespace(files: list[Path], namespace: str) -> None:
    for path in files:
        doc = yaml.safe_load(path.read_text())
        doc["metadata"]["namespace"] = namespace
        path.write_text(yaml.safe_dump(doc))


@contextmanager
def local_agent(cluster: Cluster, chart: Release, base: Path, namespace: str, approvers: dict[str, Any],
                serve_args: Sequence[str] = ()) -> Iterator[LocalAgent]:
    """``examples/file-manager`` (its MCP server's URL the local demo tools, ``approvers`` its approvers) applied in
    ``namespace`` with the operator running; the runtime started once the operator has made its ServiceAccount and
    reports the chart's admission policy as enforcing (so kubectl votes count). alice (group ``sre``) may vote."""
    made = cluster.kubectl("create", "namespace", namespace)
    assert made.returncode == 0, made.stderr
    bound = cluster.kubectl("create", "rolebinding", "sre-approves", "-n", namespace,
                            "--clusterrole=gatehouse-approver", "--group=sre")
    assert bound.returncode == 0, bound.stderr
    with operator(cluster, chart, base / "operator.log") as _, demo_tools(base / "tools") as tools:
        files = write_manifests(base / "manifests", tools.url, approvers=approvers)
        _in_namespace(files, namespace)
        for path in files:
            applied = cluster.kubectl("apply", "-f", str(path))
            assert applied.returncode == 0, applied.stderr
        local = LocalAgent(cluster, namespace, tools, None, base / "operator.log")  # type: ignore[arg-type]
        wait("the Agent Accepted", lambda: local.condition("Accepted").get("status") == "True")
        wait("the chart's admission policy enforcing on the Agent",
             lambda: local.condition("AdmissionPolicy").get("status") == "True")
        kubeconfig = cluster.service_account(namespace, AGENT)
        local.runtime = RuntimeProcess(files, base / "state", base / "runtime.log", extra_args=[
            "--kubeconfig", str(kubeconfig), "--kube-namespace", namespace, "--log-level", "info"], serve_args=serve_args)
        local.runtime.start(timeout=120)
        try:
            yield local
        finally:
            local.runtime.stop()
