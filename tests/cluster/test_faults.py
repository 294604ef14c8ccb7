"""The real kube-apiserver, and separately etcd, killed (SIGKILL) and started again mid-story: the operator, the
runtime's ToolApproval mirror and its decision watcher recover by themselves, nothing is lost and nothing runs twice.

The story each time, with ``examples/file-manager`` (tests/support/cluster/local_agent.py): a delete waits for
approval (its ToolApproval Pending); the component is killed; while it is down a second delete is asked for (the
runtime pauses it in its own database, the mirror cannot write its ToolApproval yet); the component starts again;
the second ToolApproval appears, alice approves both with ``kubectl gatehouse approve`` (the watcher must count her
votes and the runtime acknowledge them), each file is deleted exactly once, and the operator reconciles a new spec.

The A2A caller uses a token of the runtime's own token file: a Kubernetes token would need a TokenReview, which
the API server cannot answer while it is down.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from agent_runtime.kube.objects import approval_name
from tests.support.cluster import Cluster
from tests.support.cluster.chart import Release
from tests.support.cluster.local_agent import AGENT, LocalAgent, local_agent, wait
from tests.support.runtime import Rpc, request_ids, state

pytestmark = pytest.mark.e2e

NS = "faults"
CALLER = "ops-client"  # the A2A caller, by the runtime's token file
TOKEN = "faults-caller-token-0123456789abcdef"


@pytest.fixture(scope="module")
def agent(cluster: Cluster, chart: Release, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalAgent]:
    base = tmp_path_factory.mktemp("faults")
    tokens = base / "tokens"
    tokens.write_text(f"{CALLER}:{TOKEN}\n")
    tokens.chmod(0o600)
    with local_agent(cluster, chart, base, NS, approvers={"groups": ["sre"]},
                     serve_args=["--api-token-file", str(tokens)]) as running:
        yield running


def _gated(agent: LocalAgent, rpc: Rpc, file: str) -> tuple[dict[str, Any], str]:
    (agent.tools.sandbox / file).write_text("x")
    task = rpc.send(f"delete {file}")["task"]
    assert state(task) == "TASK_STATE_INPUT_REQUIRED", task
    (rid,) = request_ids(task)
    return task, approval_name(AGENT, rid)


def _phase(agent: LocalAgent, name: str) -> str | None:
    return agent.approval(name).get("status", {}).get("phase")


def _approve(agent: LocalAgent, name: str) -> None:
    voted = agent.gatehouse("alice", "approve", name, "--wait", "60s")
    assert voted.returncode == 0, voted.stdout + voted.stderr
    assert f'toolapproval "{name}" approved' in voted.stdout, voted.stdout  # the runtime acknowledged the vote


def _operator_reconciles(agent: LocalAgent, description: str) -> None:
    patched = agent.cluster.kubectl("patch", "agent", AGENT, "-n", NS, "--type=merge",
                                    "-p", json.dumps({"spec": {"description": description}}))
    assert patched.returncode == 0, patched.stderr

    def observed() -> bool:
        body = agent.agent()
        return bool(body) and body.get("status", {}).get("observedGeneration") == body["metadata"]["generation"]

    wait("the operator reconciling the changed spec", observed, timeout=90)


def _story(agent: LocalAgent, component: str, first: str, second: str) -> float:
    """The story around killing ``component``; returns the seconds its restart took."""
    rpc = Rpc(agent.runtime.url, TOKEN)
    task_a, name_a = _gated(agent, rpc, first)
    wait(f"{name_a} Pending", lambda: _phase(agent, name_a) == "Pending")

    agent.cluster.kill(component)
    task_b, name_b = _gated(agent, rpc, second)  # decided only after the restart
    time.sleep(2)  # the mirror and the watcher meet the outage (refused connections, or errors from etcd)
    restarted = agent.cluster.restart(component)

    wait(f"{name_b} written by the mirror once the API is back", lambda: _phase(agent, name_b) == "Pending", timeout=90)
    assert _phase(agent, name_a) == "Pending"
    _approve(agent, name_a)
    _approve(agent, name_b)
    for task, name, file in ((task_a, name_a, first), (task_b, name_b, second)):
        done = wait(f"{file} deleted", lambda t=task: state(rpc.get_task(t["id"])) == "TASK_STATE_COMPLETED", timeout=90)
        assert done
        wait(f"{name} Approved", lambda n=name: _phase(agent, n) == "Approved")
        assert not (agent.tools.sandbox / file).exists()
    _operator_reconciles(agent, f"after {component} restarted")
    # Nothing ran twice: neither a vote seen again when the watcher listed anew, nor a retried write.
    time.sleep(2)
    for file in (first, second):
        assert len(agent.tools.executions("delete_file", file)) == 1, agent.tools.executions("delete_file")
    assert agent.runtime.proc is not None and agent.runtime.proc.poll() is None
    return restarted


def test_the_api_server_killed_and_started_again(agent: LocalAgent, capsys: pytest.CaptureFixture[str]) -> None:
    took = _story(agent, "kube-apiserver", "a1.txt", "a2.txt")
    with capsys.disabled():
        print(f"\nkube-apiserver started again and ready in {took:.1f} s")


def test_etcd_killed_and_started_again(agent: LocalAgent, capsys: pytest.CaptureFixture[str]) -> None:
    took = _story(agent, "etcd", "e1.txt", "e2.txt")
    with capsys.disabled():
        print(f"\netcd started again, the API server ready in {took:.1f} s")
