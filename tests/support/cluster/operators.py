"""The chart's operator on the real control plane, as local processes: one :class:`Replica` per pod the chart's
Deployment would run.

Each replica is the chart's operator container as a command -- ``kopf`` from this virtualenv with the container's own
arguments and environment (leader election on the release's Lease included) -- whose only credential is a token of
the chart's operator ServiceAccount (TokenRequest), so what it may do is exactly what the chart's RBAC grants. Two
changes, because a process is not a pod: its HTTP endpoint (``/healthz``, ``/metrics``) listens on 127.0.0.1 at a
free port, and the election's timings may be shortened (a test cannot wait out the chart's 15 s Lease twice).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.support.cluster.chart import Release
from tests.support.cluster.launcher import Cluster
from tests.support.cluster.steps import wait
from tests.support.processes import free_port
from tests.support.prometheus import scrape

__all__ = ["Replica", "chart_command", "leading", "wait"]

REPO = Path(__file__).resolve().parents[3]


def chart_command(cluster: Cluster, chart: Release) -> tuple[list[str], dict[str, str]]:
    """The chart's operator container (as ``helm install`` rendered it) as a command and its environment."""
    deployment = json.loads(cluster.kubectl("get", "deployment", "-n", chart.namespace, f"{chart.fullname}-operator",
                                            "-o", "json").stdout)
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    (command,) = container["command"]
    env = {e["name"]: e["value"] for e in container.get("env", [])}
    return [str(Path(sys.executable).parent / command), *container["args"]], env


class Replica:
    """One operator replica: started at construction, its log in ``log``; ``overrides`` replace chart env values."""

    def __init__(self, cluster: Cluster, chart: Release, log: Path, overrides: Mapping[str, str] | None = None) -> None:
        command, env = chart_command(cluster, chart)
        assert env.get("GATEHOUSE_LEADER_ELECTION") == "true", "the chart enables leader election by default"
        self.port = free_port()
        env.update({"GATEHOUSE_OPERATOR_LISTEN": f"127.0.0.1:{self.port}", **(overrides or {})})
        kubeconfig = cluster.service_account(chart.namespace, f"{chart.fullname}-operator")
        # This worktree's packages (not the editable install's) and unbuffered output, so the log is current.
        path = os.pathsep.join(p for p in (str(REPO), str(REPO / "operator"), os.environ.get("PYTHONPATH")) if p)
        self.log = log
        with log.open("w") as out:
            self.proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env={
                **os.environ, **env, "KUBECONFIG": str(kubeconfig), "PYTHONPATH": path, "PYTHONUNBUFFERED": "1"})

    def metrics(self) -> dict[str, float]:
        """Each sample of its ``/metrics`` by name (summed over labels); empty while nothing answers."""
        assert self.proc.poll() is None or self.proc.returncode in (0, -signal.SIGKILL), self.log.read_text()[-3000:]
        return scrape(self.port)

    def health(self) -> str:
        try:
            return httpx.get(f"http://127.0.0.1:{self.port}/healthz", timeout=2, trust_env=False).text.strip()
        except httpx.HTTPError:
            return ""

    def leads(self) -> bool:
        return self.metrics().get("gatehouse_operator_leader") == 1.0

    def reconciles(self) -> float:
        return self.metrics().get("gatehouse_operator_reconciles_total", 0.0)

    def stop(self, sig: int = signal.SIGTERM, grace: float = 20) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode


@contextmanager
def leading(cluster: Cluster, chart: Release, log: Path) -> Iterator[Replica]:
    """One replica of the chart's operator, once it leads (holds the release's Lease); stopped on the way out."""
    replica = Replica(cluster, chart, log)
    try:
        wait("the operator to lead", replica.leads, timeout=60)
        yield replica
    finally:
        replica.stop()
