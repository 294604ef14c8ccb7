"""``kubectl gatehouse`` (agent_runtime/clients/kubectl_plugin.py) against the emulated API server.

Most commands run in-process through the plugin's ``main()`` (fast); one test runs the real plugin path,
``kubectl gatehouse …`` with the virtualenv's bin on PATH so kubectl finds ``kubectl-gatehouse``. No runtime
runs here: a vote is written with ``--wait 0``, or a stand-in (:func:`runtime_answers`) writes what a runtime
would into the status; the real runtime's answers are in test_e2e.py and test_access_kubectl_e2e.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from agent_runtime.clients import kubectl_plugin
from agent_runtime.kube import toolapproval_client
from tests.support.kube_fixtures import Kubectl, table
from tests.support.kube_identity import AUTHENTICATED, MASTERS
from tests.support.kube_server import RunningEmulator

pytestmark = pytest.mark.e2e  # the emulated API server on 127.0.0.1, and the real kubectl

TA = "gatehouse.dev/v1alpha1/toolapprovals"
Cap = pytest.CaptureFixture[str]


def approval(name: str, agent: str = "file-manager", namespace: str = "default", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "gatehouse.dev/v1alpha1", "kind": "ToolApproval",
        "metadata": {"name": name, "namespace": namespace, "labels": {"gatehouse.dev/agent": agent}},
        "spec": {"agentRef": agent, "contextId": "ctx-1", "taskId": "task-1", "requestId": f"apr-{name}",
                 "tool": "delete_file", "arguments": {"path": "old.txt", "options": {"force": True, "tags": ["a", "b"]}},
                 "hint": "delete_file on file-tools requires approval", "requestedAt": "2026-11-21T22:00:00Z",
                 "expiresAt": "2026-11-21T22:15:00Z", **spec},
    }


@pytest.fixture
def cluster(kube_api: RunningEmulator, kubectl: Kubectl, tmp_path: Path) -> RunningEmulator:
    kube_api.call(lambda: kube_api.emulator.seed("v1/namespaces", {"metadata": {"name": "team-b"}}))
    docs = [approval("fm-1"), approval("fm-2", tool="write_file"), approval("other-1", agent="other"),
            approval("fm-b", namespace="team-b")]
    for i, doc in enumerate(docs):
        path = tmp_path / f"ta-{i}.json"
        path.write_text(json.dumps(doc))
        kubectl("apply", "--validate=false", "-f", str(path))
    kube_api.emulator.username = "alice@example.com"
    return kube_api


def plugin(capsys: Cap, *args: str) -> tuple[int, str, str]:
    """Run ``kubectl gatehouse ARGS`` in-process: (exit code, stdout, stderr)."""
    old = sys.argv
    sys.argv = ["kubectl-gatehouse", *args]
    code = 0
    try:
        kubectl_plugin.main()
    except SystemExit as exc:
        code = int(exc.code or 0)
    finally:
        sys.argv = old
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def lines(text: str) -> list[list[str]]:
    return [line.split() for line in text.strip().splitlines()]


def test_approvals_lists_pending_ones_of_the_namespace_and_filters(cluster: RunningEmulator, capsys: Cap) -> None:
    code, out, _ = plugin(capsys, "approvals")
    assert code == 0
    rows = lines(out)
    assert rows[0] == ["NAME", "AGENT", "KIND", "TOOL", "ARGS", "PHASE", "APPROVALS", "AGE"]
    assert {r[2] for r in rows[1:]} == {"tool_approval"}
    assert sorted(r[0] for r in rows[1:]) == ["fm-1", "fm-2", "other-1"]
    assert all(r[-2] == "Pending" for r in rows[1:])

    code, out, _ = plugin(capsys, "approvals", "--agent", "file-manager")
    assert sorted(r[0] for r in lines(out)[1:]) == ["fm-1", "fm-2"]

    code, out, _ = plugin(capsys, "approvals", "-A", "--agent", "file-manager")
    rows = lines(out)
    assert rows[0][0] == "NAMESPACE" and sorted((r[0], r[1]) for r in rows[1:]) == [
        ("default", "fm-1"), ("default", "fm-2"), ("team-b", "fm-b")]

    code, out, _ = plugin(capsys, "approvals", "-n", "empty")
    assert code == 0 and "No pending approvals." in out


def test_describe_pretty_prints_the_arguments(cluster: RunningEmulator, capsys: Cap) -> None:
    code, out, _ = plugin(capsys, "describe", "fm-1")
    assert code == 0
    assert "Tool:        delete_file" in out and "Phase:       Pending" in out and "Request:     apr-fm-1" in out
    arguments = out.split("Arguments:\n", 1)[1]
    assert json.loads(arguments) == {"options": {"force": True, "tags": ["a", "b"]}, "path": "old.txt"}
    assert '\n  "options": {\n    "force": true,' in arguments  # indented, one key a line


def test_approve_writes_the_decision_with_the_callers_identity(cluster: RunningEmulator, capsys: Cap) -> None:
    code, out, err = plugin(capsys, "approve", "fm-1", "--reason", "checked", "--wait", "0")
    assert (code, err) == (0, "") and 'toolapproval "fm-1": approval sent (not waiting for the runtime to count it)' in out
    obj = cluster.emulator.get_object(TA, "default", "fm-1")
    (vote,) = obj["spec"]["votes"]
    assert (vote["by"], vote["action"], vote["reason"]) == ("alice@example.com", "Approve", "checked")
    assert vote["groups"] == [MASTERS, AUTHENTICATED]  # her groups as the API server names them (SelfSubjectReview)

    code, out, err = plugin(capsys, "approve", "fm-1")
    assert code == 1 and 'you (alice@example.com) have already voted on toolapproval "fm-1"' in err
    code, _, err = plugin(capsys, "deny", "fm-1", "--reason", "late")  # nor may she change her mind: one vote each
    assert code == 1 and 'you (alice@example.com) have already voted on toolapproval "fm-1"' in err
    assert cluster.emulator.get_object(TA, "default", "fm-1")["spec"]["votes"] == obj["spec"]["votes"]  # nothing changed


def test_an_outcome_in_status_is_already_decided_too(cluster: RunningEmulator, kubectl: Kubectl, capsys: Cap) -> None:
    status = {"status": {"phase": "Denied", "decidedBy": "a2a client", "source": "a2a", "reason": "no"}}
    kubectl("patch", "toolapproval", "fm-2", "--subresource=status", "--type=merge", "-p", json.dumps(status))
    code, _, err = plugin(capsys, "approve", "fm-2")
    assert code == 1 and 'toolapproval "fm-2" is already Denied (by a2a client); nothing changed' in err
    code, out, _ = plugin(capsys, "describe", "fm-2")
    assert "Decided by:  a2a client" in out and "Source:      a2a" in out
    code, out, _ = plugin(capsys, "approvals", "--agent", "file-manager")
    assert [r[0] for r in lines(out)[1:]] == ["fm-1"]
    code, out, _ = plugin(capsys, "approvals", "--agent", "file-manager", "--all")
    assert sorted(r[0] for r in lines(out)[1:]) == ["fm-1", "fm-2"]


def test_deny_needs_a_reason(cluster: RunningEmulator, capsys: Cap) -> None:
    code, _, err = plugin(capsys, "deny", "fm-1", "--reason", "   ")
    assert code == 1 and "--reason must not be empty" in err
    code, _, err = plugin(capsys, "deny", "fm-1")
    assert code == 2 and "--reason" in err
    assert "votes" not in cluster.emulator.get_object(TA, "default", "fm-1")["spec"]
    code, out, _ = plugin(capsys, "deny", "fm-1", "--reason", "keep it", "--wait", "0")
    assert code == 0 and 'toolapproval "fm-1": denial sent' in out
    (vote,) = cluster.emulator.get_object(TA, "default", "fm-1")["spec"]["votes"]
    assert (vote["by"], vote["action"], vote["reason"]) == ("alice@example.com", "Deny", "keep it")


def test_clear_errors_not_found_and_forbidden(cluster: RunningEmulator, capsys: Cap) -> None:
    code, _, err = plugin(capsys, "approve", "nope")
    assert code == 1 and 'toolapproval "nope" not found in namespace "default"' in err
    code, _, err = plugin(capsys, "describe", "nope", "-n", "team-b")
    assert code == 1 and 'not found in namespace "team-b"' in err
    cluster.emulator.forbid("PATCH", "/toolapprovals/")
    code, _, err = plugin(capsys, "approve", "fm-1")
    assert code == 1 and "forbidden: you may not decide toolapproval" in err and "gatehouse-approver" in err
    assert "Traceback" not in err
    cluster.emulator.forbid("GET", "/toolapprovals$")
    code, _, err = plugin(capsys, "approvals")
    assert code == 1 and "forbidden: you may not list toolapprovals" in err


def test_a_concurrent_decision_is_reported_as_decided_by_someone_else(
    cluster: RunningEmulator, kubectl: Kubectl, monkeypatch: pytest.MonkeyPatch, capsys: Cap
) -> None:
    stale = cluster.emulator.get_object(TA, "default", "fm-1")
    kubectl("label", "toolapproval", "fm-1", "touched=yes")  # someone else wrote in between: a newer resourceVersion
    monkeypatch.setattr(toolapproval_client, "_get", lambda *a, **k: stale)  # what cast_vote reads
    code, _, err = plugin(capsys, "approve", "fm-1")
    assert code == 1 and 'toolapproval "fm-1" was decided by someone else just now; nothing changed' in err
    assert "votes" not in cluster.emulator.get_object(TA, "default", "fm-1")["spec"]


def question_object(name: str) -> dict[str, Any]:
    """A ToolApproval as the runtime mirrors a hitl_request question."""
    doc = approval(name, requestId=f"hitl-{name}", tool="hitl_request", hint="Which environment?",
                   arguments={"question": "Which environment?", "options": ["staging", "production"],
                              "requireConfirmation": False})
    doc["metadata"]["labels"]["gatehouse.dev/kind"] = "hitl_request"
    return doc


def test_a_hitl_question_is_listed_with_its_kind_and_cannot_be_approved_or_denied(
    cluster: RunningEmulator, kubectl: Kubectl, tmp_path: Path, capsys: Cap
) -> None:
    path = tmp_path / "q.json"
    path.write_text(json.dumps(question_object("fm-q")))
    kubectl("apply", "--validate=false", "-f", str(path))
    code, out, _ = plugin(capsys, "approvals", "--agent", "file-manager")
    kinds = {r[0]: (r[2], r[3]) for r in lines(out)[1:]}
    assert kinds == {"fm-1": ("tool_approval", "delete_file"), "fm-2": ("tool_approval", "write_file"),
                     "fm-q": ("hitl_request", "hitl_request")}
    code, out, _ = plugin(capsys, "describe", "fm-q")
    assert code == 0 and "Kind:        hitl_request" in out
    for args in (["approve", "fm-q"], ["deny", "fm-q", "--reason", "no"]):
        code, out, err = plugin(capsys, *args)
        assert code == 1 and "this is a question from the model; answer it in the chat (A2A)" in err, err
    assert not {"decision", "votes"} & set(cluster.emulator.get_object(TA, "default", "fm-q")["spec"])
    # kubectl's own table has the KIND column too, under -o wide (the CRD's printer column on the label).
    assert {r["NAME"]: r["KIND"] for r in table(kubectl("get", "toolapprovals", "-o", "wide"))}["fm-q"] == "hitl_request"


def test_identity_errors_are_clear(cluster: RunningEmulator, capsys: Cap) -> None:
    cluster.emulator.forbid("POST", "/selfsubjectreviews$")
    code, _, err = plugin(capsys, "approve", "fm-1")
    assert code == 1 and "could not determine who you are" in err


def test_the_real_plugin_path(cluster: RunningEmulator, kubectl: Kubectl) -> None:
    bin_dir = Path(sys.executable).parent
    if not (bin_dir / "kubectl-gatehouse").exists() or not shutil.which("kubectl"):
        pytest.skip("kubectl-gatehouse is not installed in this environment")
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([kubectl.binary, "gatehouse", *args], env=env, capture_output=True, text=True, timeout=120)

    listed = run("approvals", "--agent", "file-manager")
    assert listed.returncode == 0, listed.stderr
    assert lines(listed.stdout)[1][:4] == ["fm-1", "file-manager", "tool_approval", "delete_file"]
    started = time.monotonic()
    unanswered = run("approve", "fm-1", "--wait", "1s")  # no runtime runs here
    assert unanswered.returncode == 1 and time.monotonic() - started < 10
    assert unanswered.stderr.startswith("error: no runtime acknowledged your vote within 1s: is the agent running? "
                                        "(kubectl get agent file-manager -n default; the ToolApproval stays Pending"), \
        unanswered.stderr
    again = run("approve", "fm-1")
    assert again.returncode == 1 and 'you (alice@example.com) have already voted on toolapproval "fm-1"' in again.stderr
    votes = json.loads(kubectl("get", "toolapproval", "fm-1", "-o", "jsonpath={.spec.votes}"))
    assert [(v["by"], v["action"]) for v in votes] == [("alice@example.com", "Approve")]


# -- waiting for the runtime ---------------------------------------------------------------------------------

ALICE = {"by": "alice", "action": "Approve", "via": "kubectl", "seenAs": "alice@example.com"}  # alice@example.com is alice


@contextmanager
def runtime_answers(kube: kubernetes.client.ApiClient, name: str, status: Callable[[dict[str, Any]], dict[str, Any]]
                    ) -> Iterator[None]:
    """A stand-in for the runtime: once a vote is on ``name``, it writes ``status(vote)`` into the status."""
    api = kubernetes.client.CustomObjectsApi(kube)

    def answer() -> None:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            obj = api.get_namespaced_custom_object("gatehouse.dev", "v1alpha1", "default", "toolapprovals", name)
            if votes := obj["spec"].get("votes"):
                api.patch_namespaced_custom_object_status("gatehouse.dev", "v1alpha1", "default", "toolapprovals", name,
                                                          {"status": status(votes[-1])})
                return
            time.sleep(0.05)

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    yield
    thread.join(20)


WHO = "a member of sre, not the requester carol; 2 approvals needed"
NOTE = f"alice may not decide this request; who may decide: {WHO}"


@pytest.mark.parametrize(("status", "args", "code", "said"), [
    ({"phase": "Approved", "approvals": "1/1", "required": 1, "decidedBy": "alice", "source": "kubectl",
      "votes": [{**ALICE, "counted": True, "note": ""}]},
     ["approve", "fm-1"], 0, 'toolapproval "fm-1" approved (1 of 1)'),
    ({"phase": "Denied", "approvals": "0/1", "required": 1, "decidedBy": "alice", "source": "kubectl",
      "votes": [{**ALICE, "action": "Deny", "counted": True, "note": ""}]},
     ["deny", "fm-1", "--reason", "no"], 0, 'toolapproval "fm-1" denied (by alice)'),
    ({"phase": "Pending", "approvals": "1/2", "required": 2, "waitingFor": WHO,
      "votes": [{**ALICE, "counted": True, "note": ""}]},
     ["approve", "fm-1"], 0, f'toolapproval "fm-1": approval recorded: 1 of 2 approvals, waiting for {WHO}'),
    ({"phase": "Pending", "approvals": "0/2", "required": 2, "waitingFor": WHO,
      "votes": [{"by": "alice", "action": "Approve", "via": "rest", "seenAs": "alice@example.com", "counted": True},
                {**ALICE, "counted": False, "note": NOTE}]},
     ["approve", "fm-1"], 1, f'error: your vote does not count: {NOTE} (toolapproval "fm-1" stays Pending)'),
    ({"phase": "Orphaned", "reason": "the runtime has no record of request apr-fm-1: its state was lost"},
     ["approve", "fm-1"], 1, 'error: toolapproval "fm-1" is Orphaned: the runtime has no record of request apr-fm-1: '
                             "its state was lost; your vote changes nothing"),
    ({"phase": "Expired", "decidedBy": "gatehouse (onTimeout)", "source": "timeout"},
     ["approve", "fm-1"], 1, 'error: toolapproval "fm-1" is Expired (by gatehouse (onTimeout)); your vote did not decide it'),
])
def test_approve_and_deny_wait_for_the_runtimes_verdict(
    cluster: RunningEmulator, kube: kubernetes.client.ApiClient, capsys: Cap,
    status: dict[str, Any], args: list[str], code: int, said: str,
) -> None:
    with runtime_answers(kube, "fm-1", lambda vote: status):
        got, out, err = plugin(capsys, *args, "--wait", "10s")
    assert got == code and said in (out if code == 0 else err), (out, err)


def test_a_votes_ignored_event_is_reported_at_once(
    cluster: RunningEmulator, kube: kubernetes.client.ApiClient, capsys: Cap
) -> None:
    uid = cluster.emulator.get_object(TA, "default", "fm-1")["metadata"]["uid"]
    why = ("kube: votes on fm-1 ignored: this runtime did not create that ToolApproval, or its request was changed "
           "(only objects the runtime created, unchanged, count)")
    event = {"metadata": {"generateName": "fm-1."}, "type": "Warning", "reason": "VotesIgnored", "message": why,
             "involvedObject": {"apiVersion": "gatehouse.dev/v1alpha1", "kind": "ToolApproval", "name": "fm-1",
                                "namespace": "default", "uid": uid}}
    core = kubernetes.client.CoreV1Api(kube)
    started = time.monotonic()
    with runtime_answers(kube, "fm-1", lambda vote: core.create_namespaced_event("default", event) and {}):
        got, _, err = plugin(capsys, "approve", "fm-1", "--wait", "30s")
    assert got == 1 and f'error: the runtime ignores the votes on toolapproval "fm-1": {why}' in err
    assert time.monotonic() - started < 10  # at once, not after the 30 s


def test_an_older_votes_ignored_event_does_not_hide_a_counted_vote(
    cluster: RunningEmulator, kube: kubernetes.client.ApiClient, capsys: Cap
) -> None:
    """The runtime warns once per object: an Event from before this vote (say, before the admission policy was
    reported as enforcing) says nothing about it."""
    uid = cluster.emulator.get_object(TA, "default", "fm-1")["metadata"]["uid"]
    kubernetes.client.CoreV1Api(kube).create_namespaced_event("default", {
        "metadata": {"generateName": "fm-1."}, "type": "Warning", "reason": "VotesIgnored", "message": "earlier",
        "involvedObject": {"kind": "ToolApproval", "name": "fm-1", "namespace": "default", "uid": uid}})
    counted = {"phase": "Approved", "approvals": "1/1", "required": 1, "votes": [{**ALICE, "counted": True, "note": ""}]}
    with runtime_answers(kube, "fm-1", lambda vote: (time.sleep(1.5), counted)[1]):
        code, out, err = plugin(capsys, "approve", "fm-1", "--wait", "10s")
    assert (code, err) == (0, "") and 'toolapproval "fm-1" approved (1 of 1)' in out


def test_without_a_runtime_the_vote_stays_and_the_plugin_fails(cluster: RunningEmulator, capsys: Cap) -> None:
    code, out, err = plugin(capsys, "deny", "fm-1", "--reason", "no", "--wait", "0.5")
    assert (code, out) == (1, "")
    assert err.strip() == ("error: no runtime acknowledged your vote within 0.5s: is the agent running? (kubectl get agent "
                           "file-manager -n default; the ToolApproval stays Pending, with your vote on it)")
    assert [v["by"] for v in cluster.emulator.get_object(TA, "default", "fm-1")["spec"]["votes"]] == ["alice@example.com"]


def test_an_orphaned_toolapproval_is_not_listed_and_cannot_be_voted_on(
    cluster: RunningEmulator, kubectl: Kubectl, capsys: Cap
) -> None:
    reason = "the runtime has no record of request apr-fm-2: its state was lost"
    kubectl("patch", "toolapproval", "fm-2", "--subresource=status", "--type=merge",
            "-p", json.dumps({"status": {"phase": "Orphaned", "reason": reason}}))
    code, out, _ = plugin(capsys, "approvals", "--agent", "file-manager")
    assert [r[0] for r in lines(out)[1:]] == ["fm-1"]
    code, _, err = plugin(capsys, "approve", "fm-2")
    assert code == 1 and f'toolapproval "fm-2" is Orphaned: {reason}; nothing changed' in err
    assert "votes" not in cluster.emulator.get_object(TA, "default", "fm-2")["spec"]
    code, out, _ = plugin(capsys, "describe", "fm-2")
    assert code == 0 and "Phase:       Orphaned" in out and f"Reason:      {reason}" in out


def test_a_bad_wait_is_refused(cluster: RunningEmulator, capsys: Cap) -> None:
    code, _, err = plugin(capsys, "approve", "fm-1", "--wait", "soon")
    assert code == 1 and "--wait soon" in err
    assert "votes" not in cluster.emulator.get_object(TA, "default", "fm-1")["spec"]


def test_a_gateways_held_call_is_listed_described_and_refused_once_abandoned(
    cluster: RunningEmulator, kubectl: Kubectl, tmp_path: Path, capsys: Cap,
) -> None:
    """An MCPGateway's held call (docs/gateway.md): spec.gatewayRef and the gatehouse.dev/gateway label name the
    gateway; kubectl gatehouse shows it as gateway/<name>, filters by --gateway, and refuses a vote once it is
    Abandoned (its client no longer waits, so it will never run)."""
    held = approval("gw-1")
    held["metadata"]["labels"] = {"gatehouse.dev/gateway": "files-gate"}
    held["spec"].pop("agentRef")
    held["spec"]["gatewayRef"] = "files-gate"
    (tmp_path / "held.json").write_text(json.dumps(held))
    kubectl("apply", "--validate=false", "-f", str(tmp_path / "held.json"))

    code, out, _ = plugin(capsys, "approvals", "--gateway", "files-gate")
    assert code == 0 and [r[:2] for r in lines(out)[1:]] == [["gw-1", "gateway/files-gate"]]
    code, out, _ = plugin(capsys, "approvals", "--agent", "file-manager")
    assert "gw-1" not in out
    code, out, _ = plugin(capsys, "describe", "gw-1")
    assert "Agent:       gateway/files-gate" in out

    status = {"status": {"phase": "Abandoned", "reason": "the client no longer waits"}}
    kubectl("patch", "toolapproval", "gw-1", "--subresource=status", "--type=merge", "-p", json.dumps(status))
    code, _, err = plugin(capsys, "approve", "gw-1", "--wait", "0")
    assert code == 1 and 'toolapproval "gw-1" is Abandoned' in err and "will never run" in err
    assert not cluster.emulator.get_object(TA, "default", "gw-1")["spec"].get("votes")
