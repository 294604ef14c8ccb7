"""Who may approve, on the kubectl channel, end to end: the Kubernetes counterpart of tests/access/test_access_e2e.py.

One stack for the module: the emulated API server over HTTPS with the chart's ValidatingAdmissionPolicy (rendered
by the real helm) loaded and enforcing, the demo MCP server and ``gatehouse-runtime serve`` as processes. The
runtime's requests reach the API under its own ServiceAccount's name (``default/file-manager``, as the operator
runs it; see the fixture for how), without ``--trust-kubectl-without-admission-policy``: it counts kubectl votes
because the Agent reports the condition
``AdmissionPolicy=True`` (as the operator does when the policy is bound with Deny). People act with the real
``/usr/bin/kubectl`` and the real plugin path ``kubectl gatehouse …``, each with a kubeconfig of their own (a
bearer token the emulator issued; kubectl and the plugin learn who they are from a SelfSubjectReview).

Tasks are started over A2A with token-file tokens: carol (no group) and dave (group sre) ask; alice (sre) also
votes over REST. On Kubernetes alice, bob and dave are ``<name>@example.com`` in group sre, mallory is in no
group; ``spec.access.identities`` folds alice@example.com into alice and dave@example.com into dave.
``delete_file`` needs two approvals from sre, never from the task's requester.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from agent_runtime.kube.objects import approval_name
from agent_runtime.rest.models import ApprovalView, DecisionResult
from tests.support import helm as helm_support
from tests.support.kube_fixtures import Kubectl, kubectl_and_plugin, table, wait_for
from tests.support.kube_server import RunningEmulator, serve
from tests.support.runtime import Rpc, RuntimeProcess, Tools, demo_tools, request_ids, state, status_text, write_manifests

pytestmark = pytest.mark.e2e

AGENT = "file-manager"
TA = "gatehouse.dev/v1alpha1/toolapprovals"
TOKENS = "alice:groups=sre:tok-alice\ncarol:tok-carol\ndave:groups=sre:tok-dave\n"
# Kubernetes users: name -> (user name, groups); the emulator adds system:authenticated to every user.
KUBE_USERS = {
    "alice": ("alice@example.com", ["sre"]),
    "bob": ("bob@example.com", ["sre"]),
    "dave": ("dave@example.com", ["sre"]),
    "mallory": ("mallory@example.com", []),
}
IDENTITIES = [{"principal": "alice", "aliases": ["alice@example.com"]},
              {"principal": "dave", "aliases": ["dave@example.com"]}]
SRE_TWO = {"groups": ["sre"], "required": 2, "allowRequester": False}
WHO_FOR = "a member of sre, not the requester {}; 2 approvals needed"  # who_may_decide() for delete_file
ADMIN = "cluster-admin"
RUNTIME_USER = f"system:serviceaccount:default:{AGENT}"
POLICY = "gh-gatehouse-toolapproval-decision"
DENIED = f"ValidatingAdmissionPolicy '{POLICY}' with binding '{POLICY}' denied request"


def chart_policy() -> list[dict[str, Any]]:
    """The chart's ValidatingAdmissionPolicy and its binding (validationActions [Deny]), rendered by the real helm."""
    return helm_support.admission_policy_documents()


def write_agent(directory: Path, mcp_url: str) -> list[Path]:
    """The example manifests with this module's approvers (``spec.approval.toolApprovers``) and identities."""
    files = write_manifests(directory, mcp_url, toolApprovers=[{"tool": "delete_file", "approvers": SRE_TWO}])
    agent_file = next(f for f in files if yaml.safe_load(f.read_text())["kind"] == "Agent")
    doc = yaml.safe_load(agent_file.read_text())
    doc["spec"]["access"] = {"identities": IDENTITIES}
    agent_file.write_text(yaml.safe_dump(doc))
    return files


@dataclass
class Stack:
    api: RunningEmulator
    admin: Kubectl  # cluster-admin, in system:masters
    tools: Tools
    runtime: RuntimeProcess
    users: dict[str, Kubectl]  # kubectl as each of KUBE_USERS
    runtime_sa: Kubectl  # kubectl as the runtime's ServiceAccount (what whoever holds its token can do)
    plugin_path: str
    base: Path

    def gatehouse(self, who: str, *args: str) -> subprocess.CompletedProcess[str]:
        """``kubectl gatehouse ARGS`` as ``who``: kubectl finds ``kubectl-gatehouse`` on PATH."""
        kubeconfig = self.users[who].kubeconfig
        env = {**os.environ, "KUBECONFIG": str(kubeconfig), "PATH": self.plugin_path}
        return subprocess.run([self.admin.binary, "gatehouse", *args], env=env, capture_output=True, text=True, timeout=120)

    def approve(self, who: str, name: str, reason: str = "") -> str:
        """``kubectl gatehouse approve`` as ``who``, which waits until the runtime counted the vote: what it said."""
        done = self.gatehouse(who, "approve", name, "--reason", reason)
        assert done.returncode == 0 and f'toolapproval "{name}"' in done.stdout, done.stderr
        return done.stdout.strip()

    def deny(self, who: str, name: str, reason: str) -> str:
        done = self.gatehouse(who, "deny", name, "--reason", reason)
        assert done.returncode == 0 and f'toolapproval "{name}" denied' in done.stdout, done.stderr
        return done.stdout.strip()

    def refused(self, who: str, *args: str) -> str:
        """``kubectl gatehouse ARGS`` as ``who``: the vote is written, the runtime does not count it; exit 1, and why."""
        done = self.gatehouse(who, *args)
        assert done.returncode == 1 and done.stderr.startswith("error: "), (done.stdout, done.stderr)
        return done.stderr.removeprefix("error: ").strip()

    def approval(self, name: str) -> dict[str, Any]:
        return self.api.emulator.get_object(TA, "default", name) or {}

    def status(self, name: str) -> dict[str, Any]:
        return self.approval(name).get("status") or {}

    def votes_shown(self, name: str, count: int) -> list[dict[str, Any]]:
        """The ToolApproval's ``status.votes`` once the runtime has judged ``count`` votes."""
        return wait_for(lambda: len(v := self.status(name).get("votes") or []) == count and v, 30,
                        f"{count} vote(s) in the status of {name}")

    def rpc(self, who: str) -> Rpc:
        return Rpc(self.runtime.url, f"tok-{who}")

    def rest(self, who: str) -> httpx.Client:
        return httpx.Client(base_url=self.runtime.url, headers={"Authorization": f"Bearer tok-{who}"}, timeout=60)

    def rest_decide(self, who: str, request_id: str, decision: str = "approve", reason: str = "") -> httpx.Response:
        with self.rest(who) as client:
            return client.post(f"/approvals/{request_id}/decision", json={"decision": decision, "reason": reason},
                               headers={"Idempotency-Key": str(uuid.uuid4())})

    def rest_view(self, who: str, request_id: str) -> ApprovalView:
        with self.rest(who) as client:
            return ApprovalView.model_validate_json(client.get(f"/approvals/{request_id}").content)

    def pause(self, requester: str, file: str) -> tuple[dict[str, Any], str, str]:
        """``requester`` asks to delete ``file``: the task waits; returns it, the request id and the ToolApproval's
        name, once the runtime has mirrored it (Pending, 0/2)."""
        (self.tools.sandbox / file).write_text(file)
        task = self.rpc(requester).send(f"delete {file}")["task"]
        assert state(task) == "TASK_STATE_INPUT_REQUIRED", task
        (rid,) = request_ids(task)
        name = approval_name(AGENT, rid)
        wait_for(lambda: self.status(name).get("phase") == "Pending", 30, f"{name} Pending")
        return task, rid, name

    def waiting(self, requester: str, task: dict[str, Any]) -> bool:
        return state(self.rpc(requester).get_task(task["id"])) == "TASK_STATE_INPUT_REQUIRED"

    def finished(self, requester: str, task: dict[str, Any]) -> dict[str, Any]:
        return wait_for(lambda: state(t := self.rpc(requester).get_task(task["id"])) == "TASK_STATE_COMPLETED" and t, 60,
                        f"task {task['id']} completed")

    def cancel(self, requester: str, task: dict[str, Any]) -> None:
        reply = self.rpc(requester).call("CancelTask", {"id": task["id"]})
        assert reply["result"]["status"]["state"] == "TASK_STATE_CANCELED", reply

    def log(self) -> str:
        return self.runtime.log.read_text() if self.runtime.log.exists() else ""

    def events(self, name: str) -> list[dict[str, Any]]:
        """The runtime's Events that mention ``name``."""
        events = json.loads(self.admin("get", "events", "-o", "json"))["items"]
        return [e for e in events if e.get("reportingComponent") == "gatehouse.dev" and name in e["message"]]

    def events_about(self, name: str) -> list[str]:
        return sorted(e["reason"] for e in self.events(name))


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    kubectl_bin, plugin = kubectl_and_plugin()
    policy = chart_policy()
    base = tmp_path_factory.mktemp("kube-access-e2e")
    (base / "tokens").write_text(TOKENS)
    with serve() as api, demo_tools(base / "tools") as tools, pytest.MonkeyPatch.context() as mp:
        # The admin is a user of its own (system:masters, over HTTPS with a token): it must not be the runtime.
        admin_config = api.kubeconfig_for(base / "kubeconfig-admin", api.emulator.add_user(ADMIN, ["system:masters"]))
        mp.setenv("KUBECONFIG", str(admin_config))
        admin = Kubectl(kubectl_bin, admin_config)
        files = write_agent(base / "manifests", tools.url)
        for f in files:
            admin("apply", "--validate=false", "-f", str(f))
        # What the operator reports when the chart's policy is bound with Deny (gatehouse_operator/admission.py).
        condition = {"type": "AdmissionPolicy", "status": "True", "reason": "Enforced",
                     "message": f"ValidatingAdmissionPolicy {POLICY!r} is bound by {POLICY!r} with validationActions "
                                "['Deny']: kubectl decisions on ToolApprovals are honoured"}
        admin("patch", "agent", AGENT, "--subresource=status", "--type=merge",
              "-p", json.dumps({"status": {"conditions": [condition]}}))
        assert api.emulator.add_admission_documents(policy) == 1
        # The runtime authenticates with its ServiceAccount's token, the one the chart's policy lets create.
        runtime_config = api.kubeconfig_for(base / "kubeconfig-runtime", api.emulator.add_service_account("default", AGENT))
        users = {who: admin.as_user(api.user_kubeconfig(base, name, groups)) for who, (name, groups) in KUBE_USERS.items()}
        proc = RuntimeProcess(
            files, base / "state", base / "runtime.log",
            extra_args=["--kubeconfig", str(runtime_config), "--kube-namespace", "default", "--log-level", "warning",
                        "--api-token-file", str(base / "tokens")],
        )
        proc.start(timeout=90)
        try:
            yield Stack(api, admin, tools, proc, users, admin.as_user(runtime_config),
                        f"{plugin.parent}{os.pathsep}{os.environ.get('PATH', '')}", base)
        finally:
            proc.stop()


def test_a_vote_from_outside_the_approvers_is_recorded_not_counted_and_names_who_may_decide(stack: Stack) -> None:
    s = stack
    task, rid, name = s.pause("carol", "outside.txt")
    note = f"mallory@example.com may not decide this request; who may decide: {WHO_FOR.format('carol')}"
    # kubectl gatehouse waits for the runtime's verdict, and fails with its note.
    assert s.refused("mallory", "approve", name, "--reason", "looks fine to me") == \
        f'your vote does not count: {note} (toolapproval "{name}" stays Pending)'
    # The vote is on the object, in mallory's name (the policy saw to that) …
    assert [(v["by"], v["action"]) for v in s.approval(name)["spec"]["votes"]] == [("mallory@example.com", "Approve")]
    # … and the runtime judged it: not counted, with a note naming who may decide.
    (vote,) = s.votes_shown(name, 1)
    assert vote == {"by": "mallory@example.com", "action": "Approve", "counted": False, "note": note, "via": "kubectl",
                    "seenAs": "mallory@example.com"}
    status = s.status(name)
    assert (status["phase"], status["approvals"], status["required"]) == ("Pending", "0/2", 2)
    assert "decidedBy" not in status
    assert s.waiting("carol", task) and not s.tools.executions("delete_file", "outside.txt")
    assert f"kube: mallory@example.com's vote on {rid} does not count: mallory@example.com may not decide" in s.log()
    s.cancel("carol", task)
    assert not s.tools.executions("delete_file", "outside.txt")


def test_two_of_two_needs_two_principals_on_kubectl_and_the_call_runs_once(stack: Stack) -> None:
    s = stack
    task, rid, name = s.pause("carol", "two.txt")
    assert s.approve("alice", name, "first") == \
        f'toolapproval "{name}": approval recorded: 1 of 2 approvals, waiting for {WHO_FOR.format("carol")}'
    (first,) = s.votes_shown(name, 1)
    assert first == {"by": "alice", "action": "Approve", "counted": True, "note": "", "via": "kubectl",
                     "seenAs": "alice@example.com"}  # alice@example.com is alice
    status = s.status(name)
    assert (status["phase"], status["approvals"]) == ("Pending", "1/2")
    (row,) = table(s.users["bob"]("get", "toolapproval", name))
    assert [row[c] for c in ("NAME", "AGENT", "TOOL", "PHASE", "APPROVALS")] == [name, AGENT, "delete_file", "Pending", "1/2"]
    assert s.waiting("carol", task) and not s.tools.executions("delete_file", "two.txt")
    assert s.approve("bob", name, "second") == f'toolapproval "{name}" approved (2 of 2)'
    assert s.status(name).get("phase") == "Approved"  # the plugin returned once the runtime said so
    status = s.status(name)
    assert (status["approvals"], status["decidedBy"], status["source"]) == ("2/2", "alice, bob@example.com", "kubectl")
    assert "waitingFor" not in status
    assert [(v["by"], v["counted"]) for v in status["votes"]] == [("alice", True), ("bob@example.com", True)]
    done = s.finished("carol", task)
    assert "Delete of two.txt: deleted" in status_text(done)
    assert done["status"]["message"]["metadata"]["decisions"][rid]["source"] == "kubectl"
    assert len(s.tools.executions("delete_file", "two.txt")) == 1 and not (s.tools.sandbox / "two.txt").exists()


def test_one_allowed_deny_denies_and_the_model_is_told_why(stack: Stack) -> None:
    s = stack
    task, rid, name = s.pause("carol", "keep.txt")
    why = s.refused("mallory", "deny", name, "--reason", "I say no")  # not an approver: recorded, denies nothing
    assert why.startswith("your vote does not count: mallory@example.com may not decide this request")
    (outsider,) = s.votes_shown(name, 1)
    assert (outsider["by"], outsider["action"], outsider["counted"]) == ("mallory@example.com", "Deny", False)
    assert s.status(name)["phase"] == "Pending" and s.waiting("carol", task)
    # one allowed deny, with no approval yet, decides
    assert s.deny("bob", name, "not during the freeze") == f'toolapproval "{name}" denied (by bob@example.com)'
    assert s.status(name).get("phase") == "Denied"
    status = s.status(name)
    assert (status["decidedBy"], status["source"], status["reason"]) == ("bob@example.com", "kubectl", "not during the freeze")
    done = s.finished("carol", task)
    assert "rejected by the user: not during the freeze" in status_text(done)
    assert done["status"]["message"]["metadata"]["decisions"][rid]["outcome"] == "denied"
    assert not s.tools.executions("delete_file", "keep.txt") and (s.tools.sandbox / "keep.txt").exists()
    assert s.events_about(name) == ["ApprovalDenied", "ApprovalRequested"]


def test_one_person_on_rest_and_kubectl_counts_once(stack: Stack) -> None:
    s = stack
    task, rid, name = s.pause("carol", "once.txt")
    first = s.rest_decide("alice", rid)
    assert first.status_code == 202, first.text
    assert DecisionResult.model_validate_json(first.content).message == \
        "recorded alice's approval: 1 of 2 approvals; the request is still pending"
    # The ToolApproval shows a vote from any channel: kubectl users see the REST vote.
    rest_shown = {"by": "alice", "action": "Approve", "counted": True, "note": "", "via": "rest", "seenAs": "alice"}
    assert s.votes_shown(name, 1) == [rest_shown]
    assert s.status(name)["approvals"] == "1/2"
    note = ("alice has already voted on this request; a person counts once; 1 of 2 approvals; "
            f"who may decide: {WHO_FOR.format('carol')}")
    assert s.refused("alice", "approve", name) == f'your vote does not count: {note} (toolapproval "{name}" stays Pending)'
    rest_vote, kubectl_vote = s.votes_shown(name, 2)  # alice@example.com: alice again
    assert rest_vote == rest_shown
    assert kubectl_vote == {"by": "alice", "action": "Approve", "counted": False, "note": note, "via": "kubectl",
                            "seenAs": "alice@example.com"}
    assert (s.status(name)["phase"], s.status(name)["approvals"]) == ("Pending", "1/2")
    view = s.rest_view("alice", rid)
    assert view.status == "pending" and view.approvers is not None
    assert [(v.by, v.via) for v in view.approvers.votes] == [("alice", "rest")]  # the uncounted vote is not a vote
    assert view.approvers.waiting_for.startswith("1 of 2 approvals")
    assert s.waiting("carol", task) and not s.tools.executions("delete_file", "once.txt")
    # A second person makes it 2 of 2; the call runs once.
    assert s.approve("bob", name) == f'toolapproval "{name}" approved (2 of 2)'
    assert s.status(name)["decidedBy"] == "alice, bob@example.com"
    assert "Delete of once.txt: deleted" in status_text(s.finished("carol", task))
    assert len(s.tools.executions("delete_file", "once.txt")) == 1


def test_the_requester_may_not_approve_on_kubectl(stack: Stack) -> None:
    s = stack
    task, rid, name = s.pause("dave", "mine.txt")  # dave is in sre: only separation of duties stops him
    note = ("dave started this task and may not decide its calls (separation of duties); "
            f"who may decide: {WHO_FOR.format('dave')}")
    assert s.refused("dave", "approve", name, "--reason", "my own call").startswith(f"your vote does not count: {note}")
    (vote,) = s.votes_shown(name, 1)  # as dave@example.com, an alias of dave
    assert vote == {"by": "dave", "action": "Approve", "counted": False, "note": note, "via": "kubectl",
                    "seenAs": "dave@example.com"}
    assert (s.status(name)["phase"], s.status(name)["approvals"]) == ("Pending", "0/2")
    assert s.waiting("dave", task) and not s.tools.executions("delete_file", "mine.txt")
    assert f"kube: dave@example.com's vote on {rid} does not count: dave started this task" in s.log()
    s.cancel("dave", task)


def test_a_toolapproval_the_runtime_did_not_create_decides_nothing(stack: Stack) -> None:
    s = stack
    task, rid, name = s.pause("carol", "planted.txt")
    mirrored = s.approval(name)

    def planted(as_name: str, *, forged: bool) -> str:
        """The runtime's ToolApproval for the same request under ``as_name``; ``forged``: with two votes in the
        names of sre members and a legacy decision already in it."""
        doc = copy.deepcopy({k: mirrored[k] for k in ("apiVersion", "kind", "spec")})
        doc["metadata"] = {"name": as_name, "namespace": "default", "labels": mirrored["metadata"]["labels"]}
        if forged:
            doc["spec"]["votes"] = [
                {"by": "ceo@example.com", "groups": ["sre"], "action": "Approve", "reason": "trust me"},
                {"by": "cfo@example.com", "groups": ["sre"], "action": "Approve", "reason": "me too"}]
            doc["spec"]["decision"] = {"action": "Approve", "decidedBy": "ceo@example.com", "reason": "trust me"}
        path = s.base / f"{as_name}-{'forged' if forged else 'bare'}.json"
        path.write_text(json.dumps(doc))
        return str(path)

    def create(who: Kubectl, path: str) -> subprocess.CompletedProcess[str]:
        return who.run("create", "--validate=false", "-f", path, check=False)

    def ignored(as_name: str) -> str:
        return (f"kube: votes on {as_name} ignored: this runtime did not create that ToolApproval, or its request was "
                "changed (only objects the runtime created, unchanged, count)")

    def still_pending() -> None:
        view = s.rest_view("alice", rid)
        assert view.status == "pending" and view.approvers is not None and view.approvers.votes == [], view
        assert view.approvers.waiting_for.startswith("0 of 2 approvals")
        assert s.waiting("carol", task) and not s.tools.executions("delete_file", "planted.txt")

    # With the policy enforcing, a user cannot create a ToolApproval, nor can the admin (system:masters bypasses
    # RBAC, not admission), and whoever holds the runtime's own ServiceAccount token cannot put votes or a decision
    # into one.
    copy_name = f"{name}-copy"
    for who in (s.users["alice"], s.admin):
        refused = create(who, planted(copy_name, forged=True))
        assert refused.returncode != 0 and "Error from server (Forbidden)" in refused.stderr, refused.stderr
        assert f"{DENIED}: ToolApprovals are created by the agent's runtime (ServiceAccount default/file-manager); " \
               "a user cannot create one" in refused.stderr
    refused = create(s.runtime_sa, planted(copy_name, forged=True))
    assert refused.returncode != 0 and "Error from server (Forbidden)" in refused.stderr, refused.stderr
    assert f"{DENIED}: a new ToolApproval carries no spec.decision and no spec.votes; people add them later" in refused.stderr
    assert not s.approval(copy_name)

    # What the policy does let through: the runtime's token plants a second ToolApproval for the same request, and
    # a real approver votes on it. The runtime counts votes only on the object whose uid it stored: ignored, logged.
    assert create(s.runtime_sa, planted(copy_name, forged=False)).returncode == 0
    # The plugin sees the runtime's Warning Event and says why at once.
    assert s.refused("alice", "approve", copy_name) == \
        f'the runtime ignores the votes on toolapproval "{copy_name}": {ignored(copy_name)}'
    wait_for(lambda: ignored(copy_name) in s.log(), 30, f"the runtime's warning about {copy_name}")
    still_pending()
    assert s.status(copy_name) == {} and s.status(name)["votes"] == []
    wait_for(lambda: "VotesIgnored" in s.events_about(copy_name), 30, f"the VotesIgnored Event on {copy_name}")

    # With the policy, not even the admin deletes the runtime's Pending object (only its runtime does).
    refused = s.admin.run("delete", "toolapproval", name, check=False)
    assert refused.returncode != 0 and f"{DENIED}: a ToolApproval is deleted by its agent's runtime only (ServiceAccount " \
        "default/file-manager), or with its Agent" in refused.stderr, refused.stderr
    # Without the policy (an admin removed its binding; the Agent's condition has not caught up yet), the admin
    # deletes the mirrored object and plants one of the same name with two forged sre votes and a forged decision.
    bindings = s.api.call(lambda: list(s.api.emulator.admission.bindings))
    s.api.call(s.api.emulator.admission.bindings.clear)
    try:
        s.admin("delete", "toolapproval", name)
        wait_for(lambda: not s.approval(name), 10, f"{name} deleted")
        made = create(s.admin, planted(name, forged=True))
        assert made.returncode == 0, made.stderr
    finally:
        s.api.call(lambda: s.api.emulator.admission.bindings.extend(bindings))
    assert s.approval(name)["metadata"]["uid"] != mirrored["metadata"]["uid"]
    wait_for(lambda: ignored(name) in s.log(), 30, f"the runtime's warning about the planted {name}")
    still_pending()
    # What a user sees: the request stays Pending, the runtime wrote no status on the planted object, and a Warning
    # Event on it (`kubectl describe toolapproval`) says why its votes do not count.
    assert s.status(name) == {}
    wait_for(lambda: "VotesIgnored" in s.events_about(name), 30, f"the VotesIgnored Event on {name}")
    (warning,) = [e for e in s.events(name) if e["reason"] == "VotesIgnored" and e["involvedObject"]["name"] == name]
    assert warning["type"] == "Warning" and warning["involvedObject"]["kind"] == "ToolApproval"
    assert warning["involvedObject"]["uid"] == s.approval(name)["metadata"]["uid"] and ignored(name) in warning["message"]
    s.cancel("carol", task)
    assert not s.tools.executions("delete_file", "planted.txt") and (s.tools.sandbox / "planted.txt").exists()
    s.runtime_sa("delete", "toolapproval", copy_name)  # it created that one: its runtime's to delete


def test_the_policy_refuses_a_forged_vote_on_update(stack: Stack) -> None:
    s = stack
    task, _, name = s.pause("carol", "forged.txt")

    def vote(who: str, *ops: dict[str, Any]) -> subprocess.CompletedProcess[str]:
        return s.users[who].run("patch", "toolapproval", name, "--type=json", "-p", json.dumps(list(ops)), check=False)

    def add(**fields: Any) -> dict[str, Any]:
        return {"op": "add", "path": "/spec/votes", "value": [{"action": "Approve", **fields}]}

    alice_groups = ["sre", "system:authenticated"]
    refused = vote("alice", add(by="ceo@example.com", groups=alice_groups))
    assert refused.returncode != 0 and "Error from server (Forbidden)" in refused.stderr, refused.stderr
    assert f"{DENIED}: a vote's by must be the name of the user who casts it (alice@example.com)" in refused.stderr
    refused = vote("mallory", add(by="mallory@example.com", groups=["sre", "system:authenticated"]))
    assert refused.returncode != 0, refused.stdout
    assert f"{DENIED}: a vote's groups must be the groups of the user who casts it" in refused.stderr
    assert "votes" not in s.approval(name)["spec"]
    # An honest vote goes in; nobody can then rewrite it (here: alice turning bob's approval into a deny).
    assert s.approve("bob", name).startswith(f'toolapproval "{name}": approval recorded: 1 of 2 approvals')
    (counted,) = s.votes_shown(name, 1)
    assert (counted["by"], counted["counted"]) == ("bob@example.com", True)
    bobs = s.approval(name)["spec"]["votes"][0]
    refused = vote("alice", {"op": "replace", "path": "/spec/votes/0", "value": {**bobs, "action": "Deny"}})
    assert refused.returncode != 0 and f"{DENIED}: spec.votes is append-only" in refused.stderr, refused.stderr
    assert [v["action"] for v in s.approval(name)["spec"]["votes"]] == ["Approve"]
    assert (s.status(name)["phase"], s.status(name)["approvals"]) == ("Pending", "1/2")
    assert s.waiting("carol", task) and not s.tools.executions("delete_file", "forged.txt")
    s.cancel("carol", task)
