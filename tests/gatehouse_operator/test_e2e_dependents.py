"""End-to-end: a changed dependency reconciles every Agent that uses it, even when one of them fails (issue 36, item 3).

The repro of the issue: the ModelConfig ``mc-x`` is used by ``a-agent`` and ``z-agent``; the ModelConfig and
``a-agent`` are deleted together. ``a-agent`` is reconciled first (dependents go in name order) and its status write
fails -- the Agent was deleted between the read and the write (404), someone wrote in between (409), or the API is in
trouble (503). The emulator answers that write so, every time (``forbid``), which makes the race deterministic.
"""

from __future__ import annotations

from pathlib import Path

import kubernetes
import pytest
import yaml

from gatehouse_operator import metrics
from tests.gatehouse_operator.conftest import EXAMPLE, Kubectl, OperatorProcess, wait_for
from tests.gatehouse_operator.test_e2e import NS, Cluster, _write_manifest
from tests.support.kube_server import RunningEmulator

pytestmark = pytest.mark.e2e

MODEL = "mc-x"


@pytest.fixture
def cluster(kube: kubernetes.client.ApiClient) -> Cluster:
    return Cluster(kube)


def _apply_agents_using_one_model(kubectl: Kubectl, tmp_path: Path) -> None:
    model = yaml.safe_load((EXAMPLE / "modelconfig.yaml").read_text())
    model["metadata"]["name"] = MODEL
    kubectl("apply", "--validate=false", "-f", _write_manifest(tmp_path, model))
    kubectl("apply", "--validate=false", "-f", str(EXAMPLE / "mcp-server.yaml"))
    agent = yaml.safe_load((EXAMPLE / "agent.yaml").read_text())
    for name in ("a-agent", "z-agent"):
        doc = {**agent, "metadata": {"name": name, "namespace": NS}, "spec": {**agent["spec"], "modelConfig": MODEL}}
        kubectl("apply", "--validate=false", "-f", _write_manifest(tmp_path, doc))


@pytest.mark.parametrize("code", [404, 409, 503])
def test_one_dependent_failing_does_not_stop_the_others(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, tmp_path: Path, code: int,
    cluster: Cluster,
) -> None:
    _apply_agents_using_one_model(kubectl, tmp_path)
    for name in ("a-agent", "z-agent"):
        cluster.wait_accepted(name)
    failures = metrics.FAILURES.labels("Agent", str(code))._value.get()
    kube_api.emulator.forbid("PATCH", r"/agents/a-agent/status$", code)

    kubectl("delete", "modelconfig", MODEL)

    missing = cluster.wait_accepted("z-agent", "False", timeout=15)
    assert missing["reason"] == "DependencyMissing"
    assert f"ModelConfig {MODEL!r} not found" in missing["message"]
    assert metrics.FAILURES.labels("Agent", str(code))._value.get() > failures  # the operator's /metrics counts it
    kubectl("delete", "agent", "a-agent")


def test_a_dependent_that_failed_is_retried_until_it_succeeds(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, tmp_path: Path, cluster: Cluster
) -> None:
    _apply_agents_using_one_model(kubectl, tmp_path)
    for name in ("a-agent", "z-agent"):
        cluster.wait_accepted(name)
    kube_api.emulator.forbid("PATCH", r"/agents/a-agent/status$", 503)  # the API in trouble for a while

    kubectl("delete", "modelconfig", MODEL)
    cluster.wait_accepted("z-agent", "False")
    wait_for(lambda: metrics.FAILURES.labels("Agent", "503")._value.get() >= 2, what="a-agent retried (a second failure)")
    assert cluster.condition("a-agent", "Accepted")["status"] == "True"  # not written yet
    kube_api.emulator.allow_all()  # the API recovers: the next retry (no other trigger; resync is 1 h) gets through

    missing = cluster.wait_accepted("a-agent", "False", timeout=20)
    assert missing["reason"] == "DependencyMissing"
