"""Kubernetes-visible approvals end to end, over real HTTP with real processes.

The emulated API server (with the example Agent, ModelConfig and RemoteMCPServer applied), the demo MCP
server and ``gatehouse-runtime serve -f … --kubeconfig … --kube-namespace default`` as subprocesses;
users act with ``/usr/bin/kubectl`` and the real plugin path ``kubectl gatehouse …``, and an A2A client
over raw JSON-RPC. The example Agent accepts Kubernetes tokens (``spec.access.kubernetesTokens``), so the A2A
client calls as a ServiceAccount of the cluster, with that ServiceAccount's token (checked by TokenReview).
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent_runtime.contract import wire
from agent_runtime.kube.objects import approval_name
from tests.support.kube_fixtures import Kubectl, kubectl_and_plugin, table
from tests.support.kube_server import RunningEmulator, serve, write_kubeconfig
from tests.support.runtime import (
    Rpc,
    RuntimeProcess,
    Tools,
    demo_tools,
    request_ids,
    state,
    status_text,
    wait_for,
    write_manifests,
)

pytestmark = pytest.mark.e2e

TA = "gatehouse.dev/v1alpha1/toolapprovals"
CLIENT = "system:serviceaccount:default:file-manager-client"  # the in-cluster A2A caller
AGENTS = "gatehouse.dev/v1alpha1/agents"


@dataclass
class Stack:
    api: RunningEmulator
    kubectl: Kubectl
    tools: Tools
    runtime: RuntimeProcess
    rpc: Rpc
    env: dict[str, str]

    def gatehouse(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``kubectl gatehouse ARGS``: kubectl finds ``kubectl-gatehouse`` on PATH."""
        return subprocess.run(
            [self.kubectl.binary, "gatehouse", *args], env=self.env, capture_output=True, text=True, timeout=120
        )

    def approval(self, request_id: str) -> dict[str, Any] | None:
        return self.api.emulator.get_object(TA, "default", approval_name("file-manager", request_id))

    def phase(self, request_id: str) -> str | None:
        return ((self.approval(request_id) or {}).get("status") or {}).get("phase")

    def pending_count(self) -> int | None:
        return ((self.api.emulator.get_object(AGENTS, "default", "file-manager") or {}).get("status") or {}).get(
            "pendingApprovals"
        )

    def completed(self, task_id: str) -> dict[str, Any] | None:
        task = self.rpc.get_task(task_id)
        return task if state(task) == "TASK_STATE_COMPLETED" else None

    def log(self) -> str:
        return self.runtime.log.read_text()[-4000:] if self.runtime.log.exists() else ""


@contextmanager
def stack(base: Path, **approval: Any) -> Iterator[Stack]:
    kubectl_bin, plugin = kubectl_and_plugin()
    with serve() as api, demo_tools(base / "tools") as tools, pytest.MonkeyPatch.context() as mp:
        kubeconfig = write_kubeconfig(base / "kubeconfig", api.url)
        mp.setenv("KUBECONFIG", str(kubeconfig))
        kubectl = Kubectl(kubectl_bin)
        # kubectl votes come from the emulator's admin (tester, group system:masters), A2A ones from the client's
        # ServiceAccount, which asks: name both (with no approvers only the requester decides, and a ServiceAccount
        # only where named).
        approval = {"approvers": {"users": [CLIENT], "groups": ["system:masters"]}, **approval}
        files = write_manifests(base / "manifests", tools.url, **approval)
        for f in files:
            kubectl("apply", "--validate=false", "-f", str(f))
        env = {**os.environ, "PATH": f"{plugin.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        proc = RuntimeProcess(
            files, base / "state", base / "runtime.log",
            extra_args=["--kubeconfig", str(kubeconfig), "--kube-namespace", "default", "--log-level", "warning",
                        "--trust-kubectl-without-admission-policy"],
        )
        proc.start(timeout=90)
        client_token = api.emulator.add_service_account("default", "file-manager-client")  # an in-cluster A2A caller
        try:
            yield Stack(api, kubectl, tools, proc, Rpc(proc.url, client_token), env)
        finally:
            proc.stop()


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """One stack for the scenarios that each finish what they start (15m timeout)."""
    with stack(tmp_path_factory.mktemp("kube-e2e")) as s:
        yield s


def _gated(s: Stack, file: str) -> tuple[dict[str, Any], str]:
    (s.tools.sandbox / file).write_text("x")
    task = s.rpc.send(f"delete {file}")["task"]
    assert state(task) == "TASK_STATE_INPUT_REQUIRED"
    (rid,) = request_ids(task)
    wait_for(lambda: s.phase(rid) == "Pending", timeout=30)
    return task, rid


def test_approve_from_kubectl_resumes_the_task(shared: Stack) -> None:
    s = shared
    task, rid = _gated(s, "x.txt")
    name = approval_name("file-manager", rid)
    rows = table(s.kubectl("get", "toolapprovals"))
    assert list(rows[0]) == ["NAME", "AGENT", "TOOL", "SUMMARY", "REQUESTED BY", "PHASE", "APPROVALS", "EXPIRES",
                             "EXECUTION", "AGE"]
    (mine,) = [r for r in rows if r["NAME"] == name]  # what a triager sees at a glance
    assert (mine["AGENT"], mine["TOOL"], mine["SUMMARY"], mine["PHASE"]) == ("file-manager", "delete_file", "path=x.txt",
                                                                            "Pending")
    wait_for(lambda: s.pending_count() == 1, timeout=30)
    assert "1" in s.kubectl("get", "agents", "file-manager", "-o", "jsonpath={.status.pendingApprovals}")
    listed = s.gatehouse("approvals")
    assert listed.returncode == 0 and name in listed.stdout and '{"path": "x.txt"}' in listed.stdout

    approved = s.gatehouse("approve", name, "--reason", "fine")
    assert approved.returncode == 0, approved.stderr
    assert approved.stdout.strip() == f'toolapproval "{name}" approved (1 of 1)'  # the runtime counted it
    done = wait_for(lambda: s.completed(task["id"]), timeout=60)
    assert "Delete of x.txt: deleted" in status_text(done)
    assert done["status"]["message"]["metadata"]["decisions"][rid]["source"] == "kubectl"
    assert len(s.tools.executions("delete_file", "x.txt")) == 1 and not (s.tools.sandbox / "x.txt").exists()
    wait_for(lambda: s.phase(rid) == "Approved", timeout=30)
    status = s.approval(rid)["status"]
    assert (status["decidedBy"], status["source"], status["reason"]) == ("tester", "kubectl", "fine")
    wait_for(lambda: s.pending_count() == 0, timeout=30)
    events = json.loads(s.kubectl("get", "events", "-o", "json"))["items"]
    mine = [e["reason"] for e in events if e.get("reportingComponent") == "gatehouse.dev" and name in e["message"]]
    assert sorted(mine) == ["ApprovalApproved", "ApprovalRequested", "ToolCallRan"]  # and then what became of it


def test_deny_from_kubectl_tells_the_model_why(shared: Stack) -> None:
    s = shared
    task, rid = _gated(s, "keep.txt")
    name = approval_name("file-manager", rid)
    assert s.gatehouse("deny", name, "--reason", "").returncode == 1  # an empty reason is refused
    denied = s.gatehouse("deny", name, "--reason", "needed for the audit")
    assert denied.returncode == 0, denied.stderr
    assert denied.stdout.strip() == f'toolapproval "{name}" denied (by tester)'
    done = wait_for(lambda: s.completed(task["id"]), timeout=60)
    assert "rejected by the user: needed for the audit" in status_text(done)
    assert s.tools.executions("delete_file", "keep.txt") == [] and (s.tools.sandbox / "keep.txt").exists()
    wait_for(lambda: s.phase(rid) == "Denied", timeout=30)
    assert s.approval(rid)["status"]["source"] == "kubectl"
    wait_for(lambda: s.pending_count() == 0, timeout=30)


def test_a2a_first_then_kubectl_says_already_decided(shared: Stack) -> None:
    s = shared
    task, rid = _gated(s, "first.txt")
    done = s.rpc.send(data=wire.approve_all(), task=task)["task"]
    assert state(done) == "TASK_STATE_COMPLETED"
    wait_for(lambda: s.phase(rid) == "Approved", timeout=30)
    assert s.approval(rid)["status"]["source"] == "a2a"
    late = s.gatehouse("approve", approval_name("file-manager", rid))
    assert late.returncode == 1 and "already Approved" in late.stderr
    assert len(s.tools.executions("delete_file", "first.txt")) == 1


def test_a2a_and_kubectl_approving_at_once_run_the_tool_once(shared: Stack) -> None:
    s = shared
    task, rid = _gated(s, "both.txt")
    results: dict[str, Any] = {}
    start = threading.Barrier(2)

    def via_a2a() -> None:
        start.wait()
        results["a2a"] = s.rpc.send(data=wire.approve_all(), task=task)

    def via_kubectl() -> None:
        start.wait()
        results["kubectl"] = s.gatehouse("approve", approval_name("file-manager", rid))

    threads = [threading.Thread(target=via_a2a), threading.Thread(target=via_kubectl)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    done = wait_for(lambda: s.completed(task["id"]), timeout=60)
    winner = done["status"]["message"]["metadata"]["decisions"][rid]["source"]
    assert winner in ("a2a", "kubectl")
    wait_for(lambda: s.phase(rid) == "Approved", timeout=30)
    assert s.approval(rid)["status"]["source"] == winner
    assert len(s.tools.executions("delete_file", "both.txt")) == 1
    wait_for(lambda: s.pending_count() == 0, timeout=30)


def test_timeout_shows_expired(tmp_path: Path) -> None:
    with stack(tmp_path, timeout="2s") as s:
        task, rid = _gated(s, "slow.txt")
        done = wait_for(lambda: s.completed(task["id"]), timeout=60)
        assert "timeout: no decision within 2s" in status_text(done)
        wait_for(lambda: s.phase(rid) == "Expired", timeout=30)
        status = s.approval(rid)["status"]
        assert status["source"] == "timeout" and status["decidedBy"] == "gatehouse (onTimeout)"
        assert s.tools.executions("delete_file", "slow.txt") == []
        late = s.gatehouse("approve", approval_name("file-manager", rid))
        assert late.returncode == 1 and "already Expired" in late.stderr
        wait_for(lambda: s.pending_count() == 0, timeout=30)


def test_pods_rolled_onto_an_empty_volume_leave_no_pending_approval(tmp_path: Path) -> None:
    """The runtime's sqlite database lives on an emptyDir: a new pod starts with none. What the old one left Pending
    becomes Orphaned (it is not listed as pending any more, kubectl says why), and the Agent counts 0 pending."""
    with stack(tmp_path) as s:
        _, rid = _gated(s, "rolled.txt")
        name = approval_name("file-manager", rid)
        wait_for(lambda: s.pending_count() == 1, timeout=30)
        s.runtime.stop()
        s.runtime.state_dir = tmp_path / "new-pod-state"
        s.runtime.start(timeout=90)
        wait_for(lambda: s.phase(rid) == "Orphaned", timeout=30)
        assert f"the runtime has no record of request {rid}" in s.approval(rid)["status"]["reason"]
        wait_for(lambda: s.pending_count() == 0, timeout=30)
        listed = s.gatehouse("approvals")
        assert listed.returncode == 0 and name not in listed.stdout, listed.stdout
        refused = s.gatehouse("approve", name)
        assert refused.returncode == 1 and f'toolapproval "{name}" is Orphaned: the runtime has no record' in refused.stderr
        assert s.tools.executions("delete_file", "rolled.txt") == []


def test_a_vote_nobody_counts_fails_with_the_reason(tmp_path: Path) -> None:
    """The plugin waits for the runtime: when it is down, the vote stays on the object and the plugin says so."""
    with stack(tmp_path) as s:
        _, rid = _gated(s, "down.txt")
        name = approval_name("file-manager", rid)
        s.runtime.stop()
        late = s.gatehouse("approve", name, "--wait", "2s")
        assert (late.returncode, late.stderr.strip()) == (1, (
            "error: no runtime acknowledged your vote within 2s: is the agent running? (kubectl get agent file-manager "
            "-n default; the ToolApproval stays Pending, with your vote on it)")), late.stdout
        assert s.phase(rid) == "Pending" and [v["by"] for v in s.approval(rid)["spec"]["votes"]] == ["tester"]
        s.runtime.start(timeout=90)  # the same pod (its state kept) counts it once back
        wait_for(lambda: s.phase(rid) == "Approved", timeout=30)
        wait_for(lambda: len(s.tools.executions("delete_file", "down.txt")) == 1, timeout=30)
