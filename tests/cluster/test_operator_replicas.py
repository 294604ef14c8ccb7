"""Two operator replicas on the real control plane (issue 36, item 4): the chart's operator, twice, electing a leader
on the release's Lease through the real coordination API and the chart's leader-election Role.

One leads and reconciles; the standby reconciles nothing and says ``standby``. The leader is killed with SIGKILL (no
chance to give the Lease up); while nobody leads an Agent's Deployment is deleted and a new Agent is applied. The
standby must take the Lease once it expires and, by re-listing every Agent, repair the one and accept the other:
nothing that happened while nobody led is missed. Election timings are shortened (lease 4 s, renew 3 s, retry 1 s).
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.cluster import Cluster
from tests.support.cluster.chart import Release
from tests.support.cluster.operators import Replica, wait

pytestmark = pytest.mark.e2e

NS = "story-ha"
EXAMPLE = Path(__file__).parents[2] / "examples" / "file-manager"
AGENTS = 4
LEASE, RENEW, RETRY = 4, 3, 1
# kopf's start, then re-listing and reconciling every Agent, on a 2-core machine other work shares
START_AND_RELIST = 25.0
TIMINGS = {"GATEHOUSE_LEADER_ELECTION_LEASE_DURATION": f"{LEASE}s",
           "GATEHOUSE_LEADER_ELECTION_RENEW_DEADLINE": f"{RENEW}s",
           "GATEHOUSE_LEADER_ELECTION_RETRY_PERIOD": f"{RETRY}s"}


def _documents(names: list[str]) -> str:
    docs = []
    for stem in ("modelconfig", "mcp-server"):
        doc = yaml.safe_load((EXAMPLE / f"{stem}.yaml").read_text())
        doc["metadata"]["namespace"] = NS
        docs.append(doc)
    agent = yaml.safe_load((EXAMPLE / "agent.yaml").read_text())
    docs += [{**agent, "metadata": {"name": name, "namespace": NS}} for name in names]
    return yaml.safe_dump_all(docs)


def _accepted(cluster: Cluster) -> set[str]:
    items = json.loads(cluster.kubectl("get", "agents", "-n", NS, "-o", "json").stdout or '{"items": []}')["items"]
    return {a["metadata"]["name"] for a in items if any(
        c["type"] == "Accepted" and c["status"] == "True" for c in (a.get("status") or {}).get("conditions", []))}


def _holder(cluster: Cluster, chart: Release) -> Any:
    lease = cluster.kubectl("get", "lease", f"{chart.fullname}-operator", "-n", chart.namespace, "-o", "json")
    return json.loads(lease.stdout)["spec"].get("holderIdentity") if lease.returncode == 0 else None


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[dict[str, Replica]]:
    started: dict[str, Replica] = {}
    yield started
    for replica in started.values():
        replica.stop()


def test_one_replica_acts_and_the_other_takes_over_when_it_is_killed(
        cluster: Cluster, chart: Release, tmp_path: Path, replicas: dict[str, Replica]) -> None:
    assert cluster.kubectl("create", "namespace", NS).returncode == 0
    first = replicas["first"] = Replica(cluster, chart, tmp_path / "first.log", TIMINGS)
    wait("the first replica to lead", first.leads, timeout=60)
    second = replicas["second"] = Replica(cluster, chart, tmp_path / "second.log", TIMINGS)
    wait("the second replica to serve", second.metrics, timeout=60)
    names = [f"agent-{i}" for i in range(AGENTS)]
    applied = cluster.kubectl("apply", "-f", "-", stdin=_documents(names))
    assert applied.returncode == 0, applied.stderr
    wait("every Agent accepted", lambda: set(names) <= _accepted(cluster), timeout=60)
    leader = _holder(cluster, chart)
    assert leader, "the Lease names its holder"

    # Exactly one acts: the standby has reconciled nothing, and says so.
    assert not second.leads() and second.reconciles() == 0
    assert second.health() == "standby"
    assert first.reconciles() >= AGENTS

    killed = time.monotonic()
    first.stop(signal.SIGKILL)
    # While nobody leads: drift on one Agent, and a new Agent.
    assert cluster.kubectl("delete", "deployment", "agent-1", "-n", NS, "--wait=false").returncode == 0
    late = cluster.kubectl("apply", "-f", "-", stdin=_documents(["agent-late"]))
    assert late.returncode == 0, late.stderr
    wait("the second replica to take the Lease", second.leads, timeout=LEASE + RETRY + 15)
    led = time.monotonic() - killed
    assert _holder(cluster, chart) not in (None, "", leader)

    def caught_up() -> bool:
        back = cluster.kubectl("get", "deployment", "agent-1", "-n", NS).returncode == 0
        return back and {"agent-late", *names} <= _accepted(cluster)

    wait("the new leader to repair agent-1 and accept agent-late", caught_up, timeout=START_AND_RELIST + 30)
    took_over = time.monotonic() - killed
    print(f"\nkill -9 of the leader: Lease taken after {led:.1f} s, every Agent reconciled after {took_over:.1f} s "
          f"(bound: lease {LEASE} s + retry {RETRY} s + start and re-list {START_AND_RELIST:.0f} s)")
    assert took_over <= LEASE + RETRY + START_AND_RELIST
    assert "Forbidden" not in second.log.read_text(), second.log.read_text()[-3000:]  # the chart's RBAC covers it

    # SIGTERM (a rollout, a drain): the leader gives the Lease up and exits cleanly.
    assert second.stop(signal.SIGTERM) == 0
    assert not _holder(cluster, chart), "the Lease was given up"
