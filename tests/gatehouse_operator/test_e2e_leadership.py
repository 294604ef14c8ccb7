"""End-to-end: two operator replicas elect a leader on a Lease; exactly one acts; the other takes over (issue 36, item 4).

Each replica is a real process (``python -m gatehouse_operator --standalone``, as the chart runs it) against the
emulated API, with short election timings (lease 4 s, renew deadline 3 s, retry 1 s) so that the test is quick;
what each replica does is read from its own ``/metrics``, as a platform team's Prometheus would.
"""

from __future__ import annotations

import datetime
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import kubernetes
import pytest
import yaml

from gatehouse_operator.leadership import LOST_EXIT_CODE
from tests.gatehouse_operator.conftest import EXAMPLE, REPO, Kubectl, wait_for
from tests.support.kube_server import RunningEmulator
from tests.support.processes import free_port
from tests.support.prometheus import scrape

pytestmark = pytest.mark.e2e

NS = "default"
AGENTS = 20
LEASE, RENEW, RETRY = 4, 3, 1
START_AND_RELIST = 20.0  # bound on kopf's start plus re-listing and reconciling every Agent, on a busy 2-core machine


class Replica:
    """One operator process, its log and its ``/metrics``."""

    def __init__(self, tmp_path: Path, name: str) -> None:
        self.port = free_port()
        self.log = tmp_path / f"operator-{name}.log"
        env = {
            **os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{REPO / 'operator'}", "PYTHONUNBUFFERED": "1",
            "GATEHOUSE_LEADER_ELECTION": "true", "GATEHOUSE_LEADER_ELECTION_NAMESPACE": NS,
            "GATEHOUSE_LEADER_ELECTION_LEASE_DURATION": f"{LEASE}s",
            "GATEHOUSE_LEADER_ELECTION_RENEW_DEADLINE": f"{RENEW}s",
            "GATEHOUSE_LEADER_ELECTION_RETRY_PERIOD": f"{RETRY}s",
            "GATEHOUSE_OPERATOR_LISTEN": f"127.0.0.1:{self.port}",
            "GATEHOUSE_RESYNC_SECONDS": "3600", "GATEHOUSE_SECRET_CHECK_INTERVAL": "1h",
            "GATEHOUSE_RUNTIME_IMAGE": "ghcr.io/gatehouse-dev/gatehouse:test",
        }
        with self.log.open("w") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "gatehouse_operator", "--standalone"], env=env,
                                         stdout=out, stderr=subprocess.STDOUT, cwd=REPO)

    def metrics(self) -> dict[str, float]:
        """Each sample by name (summed over labels); empty while nothing answers."""
        return scrape(self.port)

    def leads(self) -> bool:
        return self.metrics().get("gatehouse_operator_leader") == 1.0

    def reconciles(self) -> float:
        return self.metrics().get("gatehouse_operator_reconciles_total", 0.0)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture
def replicas(kube_api: RunningEmulator, tmp_path: Path) -> Iterator[dict[str, Replica]]:
    started: dict[str, Replica] = {}
    yield started
    for replica in started.values():
        replica.stop()


def _start(replicas: dict[str, Replica], tmp_path: Path, name: str) -> Replica:
    replicas[name] = Replica(tmp_path, name)
    wait_for(lambda: replicas[name].metrics(), timeout=60, what=f"replica {name} to serve /metrics")
    return replicas[name]


def _apply_agents(kubectl: Kubectl, tmp_path: Path) -> list[str]:
    agent = yaml.safe_load((EXAMPLE / "agent.yaml").read_text())
    names = [f"agent-{i:02d}" for i in range(AGENTS)]
    docs = [yaml.safe_load((EXAMPLE / f"{n}.yaml").read_text()) for n in ("modelconfig", "mcp-server")]
    docs += [{**agent, "metadata": {"name": n, "namespace": NS}} for n in names]
    path = tmp_path / "agents.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    kubectl("apply", "--validate=false", "-f", str(path))
    return names


def _accepted(custom: kubernetes.client.CustomObjectsApi, names: list[str]) -> bool:
    items = custom.list_namespaced_custom_object("gatehouse.dev", "v1alpha1", NS, "agents")["items"]
    ok = {a["metadata"]["name"] for a in items
          if any(c["type"] == "Accepted" and c["status"] == "True" for c in (a.get("status") or {}).get("conditions", []))}
    return set(names) <= ok


def _holder(kube: kubernetes.client.ApiClient) -> Any:
    return kubernetes.client.CoordinationV1Api(kube).read_namespaced_lease("gatehouse-operator", NS).spec.holder_identity


def test_one_replica_acts_and_the_other_takes_over_when_it_is_killed(
    kube_api: RunningEmulator, kube: kubernetes.client.ApiClient, kubectl: Kubectl, tmp_path: Path,
    replicas: dict[str, Replica],
) -> None:
    first = _start(replicas, tmp_path, "first")
    wait_for(first.leads, timeout=30, what="the first replica to lead")
    second = _start(replicas, tmp_path, "second")
    names = _apply_agents(kubectl, tmp_path)
    custom, apps = kubernetes.client.CustomObjectsApi(kube), kubernetes.client.AppsV1Api(kube)
    wait_for(lambda: _accepted(custom, names), timeout=60, what="every Agent accepted")
    assert _holder(kube), "the Lease names its holder"

    # Exactly one acts: the standby has reconciled nothing, and says so.
    assert not second.leads() and second.reconciles() == 0
    assert first.reconciles() >= AGENTS
    assert httpx.get(f"http://127.0.0.1:{second.port}/healthz").text.strip() == "standby"

    killed = time.monotonic()
    first.proc.send_signal(signal.SIGKILL)
    apps.delete_namespaced_deployment("agent-07", NS)  # drift while nobody leads: the new leader must repair it
    wait_for(second.leads, timeout=LEASE + RETRY + 10, what="the second replica to take the Lease")
    led = time.monotonic() - killed
    wait_for(lambda: second.reconciles() >= AGENTS and apps.list_namespaced_deployment(
        NS, field_selector="metadata.name=agent-07").items, timeout=START_AND_RELIST + 30,
        what="the new leader to re-list and reconcile every Agent")
    took_over = time.monotonic() - killed
    print(f"kill -9 of the leader: Lease taken after {led:.1f}s, every Agent reconciled after {took_over:.1f}s "
          f"(bound: lease {LEASE}s + retry {RETRY}s + start and re-list {START_AND_RELIST:.0f}s)")
    assert took_over <= LEASE + RETRY + START_AND_RELIST

    # SIGTERM (a rollout, a drain): the leader gives the Lease up, a standby takes over without waiting it out.
    third = _start(replicas, tmp_path, "third")
    assert not third.leads()
    stopped = time.monotonic()
    second.proc.send_signal(signal.SIGTERM)
    assert second.proc.wait(30) == 0
    wait_for(third.leads, timeout=LEASE + RETRY + 10, what="the third replica to take the given-up Lease")
    handed = time.monotonic() - stopped
    print(f"SIGTERM of the leader: Lease taken after {handed:.1f}s")
    wait_for(lambda: third.reconciles() >= AGENTS, timeout=START_AND_RELIST + 30, what="the third to reconcile all")
    assert handed < LEASE, "the Lease was given up, not waited out"


def test_a_leader_that_loses_its_lease_stops_at_once(
    kube_api: RunningEmulator, kube: kubernetes.client.ApiClient, tmp_path: Path, replicas: dict[str, Replica],
) -> None:
    only = _start(replicas, tmp_path, "only")
    wait_for(only.leads, timeout=30, what="the replica to lead")
    leases = kubernetes.client.CoordinationV1Api(kube)
    # Another holder renews the Lease (as after a network partition healed): this replica must not go on acting.
    stamp = datetime.datetime.now(tz=datetime.UTC)
    leases.patch_namespaced_lease("gatehouse-operator", NS, {"spec": {"holderIdentity": "intruder", "renewTime": stamp}})
    assert only.proc.wait(RENEW + RETRY + 10) == LOST_EXIT_CODE
    assert "lost the Lease" in only.log.read_text()
