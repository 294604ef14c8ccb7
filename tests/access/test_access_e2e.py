"""Who may call, whose task it is, and who may decide: over real HTTP, one runtime + demo tools as processes.

Tokens: alice, bob and dave (group sre), carol (no group), and ``al``, an alias of alice (``access.identities``).
``delete_file`` needs two approvals from sre, never from the task's requester; ``write_file`` two from sre, the
requester allowed. Every other gated call has no approvers block.
"""

from __future__ import annotations

import base64
import contextlib
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_runtime.contract import wire
from agent_runtime.contract.agent_config import AgentConfig
from agent_runtime.contract.manifests import select_agent_config
from agent_runtime.rest.models import ApprovalList, ApprovalView, DecisionResult, ProblemDetails
from tests.support.runtime import (
    Rpc,
    RuntimeProcess,
    Tools,
    demo_tools,
    ended,
    interrupt,
    request_ids,
    state,
    status_text,
    wait_for,
    write_manifests,
)

pytestmark = pytest.mark.e2e

TOKENS = """\
alice:groups=sre:tok-alice
al:groups=sre:tok-al
bob:groups=sre:tok-bob
dave:groups=sre:tok-dave
carol:tok-carol
"""
SRE_TWO = {"groups": ["sre"], "required": 2, "allow_requester": False}
WHO_FOR = "a member of sre, not the requester {}; 2 approvals needed"  # who_may_decide() for delete_file
NOT_FOUND = "TASK_NOT_FOUND"


def write_config(base: Path, tools: Tools, **access: Any) -> Path:
    """The example agent (rendered from its manifests) with this module's approvers and ``access`` fields."""
    config = select_agent_config(write_manifests(base / "manifests", tools.url)).model_dump()
    config["approval"]["tool_approvers"] = {"delete_file": SRE_TWO, "write_file": {**SRE_TWO, "allow_requester": True}}
    config["access"].update(access)
    path = base / "config.json"
    path.write_text(AgentConfig.model_validate(config).to_json())
    return path


@dataclass
class Env:
    tools: Tools
    proc: RuntimeProcess


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    base = tmp_path_factory.mktemp("access-e2e")
    (base / "tokens").write_text(TOKENS)
    with demo_tools(base / "tools") as tools:
        config = write_config(base, tools, identities=[{"principal": "alice", "aliases": ["al"]}])
        proc = RuntimeProcess([], base / "state", base / "runtime.log", ["--config", str(config)],
                              ["--api-token-file", str(base / "tokens")])
        proc.start()
        try:
            yield Env(tools, proc)
        finally:
            proc.stop()


class Rest:
    def __init__(self, url: str, token: str | None) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.client = httpx.Client(base_url=url, headers=headers, timeout=60)

    def decide(self, request_id: str, decision: str = "approve", reason: str = "") -> httpx.Response:
        return self.client.post(f"/approvals/{request_id}/decision", json={"decision": decision, "reason": reason},
                                headers={"Idempotency-Key": str(uuid.uuid4())})

    def pending_ids(self) -> list[str]:
        return [a.id for a in ApprovalList.model_validate_json(self.client.get("/approvals?state=all").content).approvals]


def rpc(env: Env, who: str) -> Rpc:
    return Rpc(env.proc.url, f"tok-{who}")


def rest(env: Env, who: str) -> Rest:
    return Rest(env.proc.url, f"tok-{who}")


def pause(caller: Rpc, tools: Tools, name: str, text: str | None = None) -> tuple[dict[str, Any], str]:
    (tools.sandbox / name).write_text(name)
    task = caller.send(text or f"delete {name}")["task"]
    assert state(task) == "TASK_STATE_INPUT_REQUIRED", task
    (rid,) = request_ids(task)
    return task, rid


def error_of(reply: dict[str, Any]) -> str:
    """A JSON-RPC error as one string (code, message and reasons), or fail if the call succeeded."""
    assert "error" in reply, reply
    return json.dumps(reply["error"])


def finished(caller: Rpc, task: dict[str, Any]) -> dict[str, Any]:
    return wait_for(lambda: (t := caller.get_task(task["id"])) and ended(t) and t, 60)


def answer(env: Env, verb: str, path: str, headers: Any, body: Any = None) -> tuple[int, httpx.Headers, str]:
    """One HTTP exchange: status, headers and the body, or, from an event stream (which stays open), its first event."""
    with httpx.stream(verb, f"{env.proc.url}{path}", json=body, headers=headers, timeout=httpx.Timeout(30, read=5)) as reply:
        if not reply.headers.get("content-type", "").startswith("text/event-stream"):
            return reply.status_code, reply.headers, reply.read().decode()
        lines: list[str] = []
        with contextlib.suppress(httpx.ReadTimeout):  # a stream with nothing to say yet
            for line in reply.iter_lines():
                lines.append(line)
                if line.startswith("data:"):
                    break
        return reply.status_code, reply.headers, "\n".join(lines)


def approvers_part(task: dict[str, Any]) -> dict[str, Any]:
    (request,) = interrupt(task)["action_requests"]
    return request["approvers"]


def test_anonymous_and_unknown_callers_get_401_everywhere_but_the_public_routes(env: Env) -> None:
    task, rid = pause(rpc(env, "bob"), env.tools, "anon.txt")
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": "list /"}]}
    into = {**message, "taskId": task["id"], "contextId": task["contextId"], "parts": [{"data": wire.approve_all()}]}
    calls = [
        ("SendMessage", {"message": message}), ("SendMessage", {"message": into}), ("GetTask", {"id": task["id"]}),
        ("ListTasks", {}), ("CancelTask", {"id": task["id"]}),
    ]
    streaming = [("SendStreamingMessage", {"message": message}), ("SubscribeToTask", {"id": task["id"]})]
    rest_calls = [("GET", "/approvals", None), ("GET", f"/approvals/{rid}", None),
                  ("POST", f"/approvals/{rid}/decision", {"decision": "approve"}), ("GET", "/approvals/events", None)]
    # No header, an unknown token, a known token under another scheme or none.
    for authorization in (None, "Bearer tok-wrong", f"Basic {base64.b64encode(b'alice:tok-alice').decode()}", "tok-alice"):
        headers = {"A2A-Version": "1.0", "Idempotency-Key": str(uuid.uuid4()),
                   **({"Authorization": authorization} if authorization else {})}
        replies = [(m, answer(env, "POST", "/", headers, {"jsonrpc": "2.0", "id": "1", "method": m, "params": p}))
                   for m, p in calls]
        replies += [(m, answer(env, "POST", "/", {**headers, "Accept": "text/event-stream"},
                               {"jsonrpc": "2.0", "id": "1", "method": m, "params": p})) for m, p in streaming]
        replies += [(f"{verb} {path}", answer(env, verb, path, headers, body)) for verb, path, body in rest_calls]
        for what, (status, reply_headers, text) in replies:
            assert status == 401, (authorization, what, status, text)
            assert reply_headers["www-authenticate"].startswith("Bearer"), (authorization, what)
            assert "Authorization: Bearer" in json.loads(text)["error"], (authorization, what)
    # Nothing an anonymous caller sent had any effect: the task still waits, nothing ran, no vote was recorded.
    bob = rpc(env, "bob")
    assert state(bob.get_task(task["id"])) == "TASK_STATE_INPUT_REQUIRED"
    assert approvers_part(bob.get_task(task["id"]))["votes"] == []
    assert not env.tools.executions("delete_file", "anon.txt")
    # The probes, the metrics and the agent card are public; the card says how to authenticate.
    for path in ("/healthz", "/readyz", "/metrics"):
        assert httpx.get(f"{env.proc.url}{path}").status_code == 200, path
    card = httpx.get(f"{env.proc.url}/.well-known/agent-card.json").json()
    assert card["securitySchemes"]["token"]["httpAuthSecurityScheme"]["scheme"] == "Bearer"
    assert {"schemes": {"token": {}}} in card["securityRequirements"]
    assert bob.call("CancelTask", {"id": task["id"]})["result"]["status"]["state"] == "TASK_STATE_CANCELED"


def test_a_task_belongs_to_its_creator_and_nobody_else_finds_it(env: Env) -> None:
    bob, carol, alice = rpc(env, "bob"), rpc(env, "carol"), rpc(env, "alice")
    task, rid = pause(bob, env.tools, "bobs.txt")
    # carol (and alice, though she may vote on it over REST) cannot read, cancel, decide or follow bob's task.
    for other in (carol, alice):
        assert NOT_FOUND in error_of(other.call("GetTask", {"id": task["id"]}))
        assert NOT_FOUND in error_of(other.call("CancelTask", {"id": task["id"]}))
        into = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "taskId": task["id"], "contextId": task["contextId"],
                "parts": [{"data": wire.approve_all()}]}
        assert NOT_FOUND in error_of(other.call("SendMessage", {"message": into}))
        body = {"jsonrpc": "2.0", "id": "1", "method": "SubscribeToTask", "params": {"id": task["id"]}}
        _, _, streamed = answer(env, "POST", "/", {**other.client.headers, "Accept": "text/event-stream"}, body)
        assert NOT_FOUND in streamed and "TASK_STATE" not in streamed, streamed
        assert task["id"] not in [t["id"] for t in other.call("ListTasks", {})["result"].get("tasks", [])]
    assert task["id"] in [t["id"] for t in bob.call("ListTasks", {})["result"]["tasks"]]
    # carol's REST view does not show bob's request either (she neither asked for it nor may decide it).
    assert rid not in rest(env, "carol").pending_ids()
    assert rest(env, "carol").client.get(f"/approvals/{rid}").status_code == 404
    assert rest(env, "carol").decide(rid).status_code == 404
    # A message from carol with bob's context id is carol's own new task: bob's pending request stays out of sight.
    reply = carol.send("list /", context_id=task["contextId"])
    assert state(reply["task"]) == "TASK_STATE_COMPLETED" and "Here is what I found" in status_text(reply["task"])
    assert task["id"] not in json.dumps(reply) and rid not in json.dumps(reply)
    mine = carol.call("ListTasks", {"contextId": task["contextId"]})["result"]["tasks"]
    assert [t["id"] for t in mine] == [reply["task"]["id"]]
    assert [t["id"] for t in bob.call("ListTasks", {"contextId": task["contextId"]})["result"]["tasks"]] == [task["id"]]
    # Nothing carol did touched bob's task; bob can still cancel it himself.
    assert state(bob.get_task(task["id"])) == "TASK_STATE_INPUT_REQUIRED"
    assert approvers_part(bob.get_task(task["id"]))["votes"] == []
    assert bob.call("CancelTask", {"id": task["id"]})["result"]["status"]["state"] == "TASK_STATE_CANCELED"
    assert not env.tools.executions("delete_file", "bobs.txt")


def test_separation_of_duties_two_of_sre_and_one_deny(env: Env) -> None:
    alice_a2a, al_a2a = rpc(env, "alice"), rpc(env, "al")
    task, rid = pause(alice_a2a, env.tools, "sod.txt")
    who = WHO_FOR.format("alice")
    assert approvers_part(task)["requested_by"] == "alice" and approvers_part(task)["waiting_for"] == f"0 of 2 approvals; {who}"
    # The requester's own approval, over A2A: not counted, the task still waits and says who may decide.
    for caller in (alice_a2a, al_a2a):  # al is alice: her task, and her separation of duties
        after = caller.send(data=wire.approve_all(), task=task)["task"]
        assert state(after) == "TASK_STATE_INPUT_REQUIRED"
        text = status_text(after)
        assert f"Not counted: {rid} (delete_file): alice started this task and may not decide its calls" in text
        assert f"(separation of duties); who may decide: {who}" in text
        assert approvers_part(after)["votes"] == []
    # … and over REST, as alice or as al: 403 naming who may decide.
    for name in ("alice", "al"):
        refused = rest(env, name).decide(rid)
        assert refused.status_code == 403, refused.text
        problem = ProblemDetails.model_validate_json(refused.content)
        assert "your vote does not count: alice started this task" in problem.error and f"who may decide: {who}" in problem.error
    # carol is not in sre: the request is not hers to see, and alice's task is not hers to reach.
    assert rest(env, "carol").decide(rid).status_code == 404
    assert NOT_FOUND in error_of(rpc(env, "carol").call("SendMessage", {"message": {
        "messageId": str(uuid.uuid4()), "role": "ROLE_USER", "taskId": task["id"], "contextId": task["contextId"],
        "parts": [{"data": wire.approve_all()}]}}))
    # bob's approval counts: 202, 1 of 2; a second vote by bob does not.
    counted = rest(env, "bob").decide(rid, "approve", "fine by me")
    assert counted.status_code == 202, counted.text
    result = DecisionResult.model_validate_json(counted.content)
    assert not result.applied and result.counted and result.approval.status == "pending"
    assert result.message == "recorded bob's approval: 1 of 2 approvals; the request is still pending"
    again = rest(env, "bob").decide(rid, "deny", "changed my mind")
    assert again.status_code == 403 and "bob has already voted on this request; a person counts once" in again.json()["error"]
    assert who in again.text  # the body names who may decide
    view = ApprovalView.model_validate_json(rest(env, "bob").client.get(f"/approvals/{rid}").content)
    assert view.status == "pending" and view.approvers is not None
    assert [(v.by, v.vote, v.via) for v in view.approvers.votes] == [("bob", "approve", "rest")]
    assert view.approvers.waiting_for == f"1 of 2 approvals; {who}"
    # The task says the same to its owner over A2A; nothing has run.
    waiting = alice_a2a.get_task(task["id"])
    assert state(waiting) == "TASK_STATE_INPUT_REQUIRED" and not env.tools.executions("delete_file", "sod.txt")
    # One deny from an allowed principal denies, and its reason reaches the task's final text.
    denied = rest(env, "dave").decide(rid, "deny", "not on a Friday")
    assert denied.status_code == 200, denied.text
    decided = DecisionResult.model_validate_json(denied.content).approval
    assert (decided.status, decided.decided_by, decided.reason) == ("denied", "dave", "not on a Friday")
    done = finished(alice_a2a, task)
    assert state(done) == "TASK_STATE_COMPLETED" and "rejected by the user: not on a Friday" in status_text(done)
    assert done["status"]["message"]["metadata"]["decisions"][rid]["outcome"] == "denied"
    assert not env.tools.executions("delete_file", "sod.txt") and (env.tools.sandbox / "sod.txt").exists()


def test_an_alias_counts_once_and_two_of_sre_run_the_call_once(env: Env) -> None:
    carol = rpc(env, "carol")
    task, rid = pause(carol, env.tools, "twice.txt")
    who = WHO_FOR.format("carol")
    # The requester (carol, not in sre anyway) is refused with who may decide: she sees her own request on REST.
    assert rid in rest(env, "carol").pending_ids()
    refused = rest(env, "carol").decide(rid)
    assert refused.status_code == 403 and f"who may decide: {who}" in refused.json()["error"]
    # alice approves over REST: 1 of 2. Then al (alice) again: refused, still 1 of 2.
    first = rest(env, "alice").decide(rid)
    assert first.status_code == 202 and "1 of 2 approvals" in first.json()["message"], first.text
    second = rest(env, "al").decide(rid)
    assert second.status_code == 403 and "alice has already voted on this request; a person counts once" in second.json()["error"]
    assert who in second.text
    # Over A2A neither alice nor al can reach carol's task at all.
    assert NOT_FOUND in error_of(rpc(env, "al").call("GetTask", {"id": task["id"]}))
    view = ApprovalView.model_validate_json(rest(env, "bob").client.get(f"/approvals/{rid}").content)
    assert view.approvers is not None and [v.by for v in view.approvers.votes] == ["alice"]
    assert view.approvers.waiting_for.startswith("1 of 2 approvals")
    assert state(carol.get_task(task["id"])) == "TASK_STATE_INPUT_REQUIRED"
    assert not env.tools.executions("delete_file", "twice.txt")
    # bob's approval makes it 2 of 2: decided, and the task runs on by itself, the call exactly once.
    last = rest(env, "bob").decide(rid, "approve")
    assert last.status_code == 200, last.text
    decided = DecisionResult.model_validate_json(last.content).approval
    assert (decided.status, decided.decided_by) == ("approved", "alice, bob")
    done = finished(carol, task)
    assert state(done) == "TASK_STATE_COMPLETED" and "Delete of twice.txt" in status_text(done)
    assert len(env.tools.executions("delete_file", "twice.txt")) == 1
    assert not (env.tools.sandbox / "twice.txt").exists()
    # A late vote changes nothing: 409, and the call is not run again.
    late = rest(env, "dave").decide(rid)
    assert late.status_code == 409 and "Already decided" in late.json()["error"]
    assert len(env.tools.executions("delete_file", "twice.txt")) == 1


def test_an_alias_counts_once_across_a2a_and_rest(env: Env) -> None:
    al, alice = rpc(env, "al"), rpc(env, "alice")
    task, rid = pause(al, env.tools, "w.txt", text="write hello to w.txt")  # write_file: the requester may approve
    assert approvers_part(task)["requested_by"] == "alice"  # al is alice: the task is alice's …
    assert state(alice.get_task(task["id"])) == "TASK_STATE_INPUT_REQUIRED"  # … whichever name she uses
    first = rest(env, "alice").decide(rid)
    assert first.status_code == 202 and "recorded alice's approval: 1 of 2 approvals" in first.json()["message"], first.text
    after = al.send(data=wire.approve_all(), task=task)["task"]
    assert state(after) == "TASK_STATE_INPUT_REQUIRED"
    assert f"Not counted: {rid} (write_file): alice has already voted on this request; a person counts once" in status_text(after)
    part = approvers_part(after)
    assert [(v["by"], v["via"]) for v in part["votes"]] == [("alice", "rest")]
    assert part["waiting_for"].startswith("1 of 2 approvals")
    assert not env.tools.executions("write_file", "w.txt")
    # bob's vote completes it; the write runs once.
    assert rest(env, "bob").decide(rid).status_code == 200
    done = finished(alice, task)
    assert state(done) == "TASK_STATE_COMPLETED" and "Write of w.txt" in status_text(done)
    assert len(env.tools.executions("write_file", "w.txt")) == 1
    assert (env.tools.sandbox / "w.txt").read_text() == "hello"


def test_a_rest_vote_answer_shows_the_votes_so_far(env: Env) -> None:
    """The 202, 403 and 200 bodies show the request as GET /approvals/{id} does: the votes so far, with their
    channel, and how many approvals are still needed (nothing once decided)."""
    carol = rpc(env, "carol")
    task, rid = pause(carol, env.tools, "tally.txt")
    counted = rest(env, "bob").decide(rid)
    assert counted.status_code == 202, counted.text
    refused = rest(env, "carol").decide(rid)
    assert refused.status_code == 403, refused.text
    fetched = ApprovalView.model_validate_json(rest(env, "bob").client.get(f"/approvals/{rid}").content).approvers
    assert fetched is not None and fetched.waiting_for == f"1 of 2 approvals; {WHO_FOR.format('carol')}"
    assert [(v.by, v.vote, v.via) for v in fetched.votes] == [("bob", "approve", "rest")]
    decided = rest(env, "dave").decide(rid)
    assert decided.status_code == 200, decided.text
    shown = []
    for reply in (DecisionResult.model_validate_json(counted.content).approval,
                  ProblemDetails.model_validate_json(refused.content).approval,
                  DecisionResult.model_validate_json(decided.content).approval):
        assert reply is not None and reply.approvers is not None
        shown.append(([(v.by, v.vote, v.via) for v in reply.approvers.votes], reply.approvers.waiting_for))
    bob, dave = ("bob", "approve", "rest"), ("dave", "approve", "rest")
    assert shown == [([bob], fetched.waiting_for), ([bob], fetched.waiting_for), ([bob, dave], "")], shown
    assert state(finished(carol, task)) == "TASK_STATE_COMPLETED"
    assert len(env.tools.executions("delete_file", "tally.txt")) == 1


def test_a_session_grant_covers_the_approved_arguments_or_a_glob_and_every_use_is_recorded(env: Env) -> None:
    """``read_file`` of a ``.env`` file is gated with no approvers block: carol's own approvals decide."""
    carol, bob = rpc(env, "carol"), rpc(env, "bob")
    for name in (".env", ".env.a", ".env.b"):
        (env.tools.sandbox / name).write_text(f"SECRET={name}")
    task = carol.send("read .env")["task"]
    (rid,) = request_ids(task)
    approved = carol.send(data={"decision_type": "approve", "scope": "session"}, task=task)["task"]
    assert state(approved) == "TASK_STATE_COMPLETED", approved
    context = task["contextId"]
    # The same call again in carol's conversation runs at once; with other arguments it asks again.
    again = carol.send("read .env", context_id=context)["task"]
    assert state(again) == "TASK_STATE_COMPLETED" and "SECRET=.env" in status_text(again), again
    assert len(env.tools.executions("read_file", ".env")) == 2
    other = carol.send("read .env.a", context_id=context)["task"]
    assert state(other) == "TASK_STATE_INPUT_REQUIRED", other
    # Nobody else rides on carol's grant, not even by sending into her context id.
    bobs = bob.send("read .env", context_id=context)["task"]
    assert state(bobs) == "TASK_STATE_INPUT_REQUIRED"
    # A glob must cover the call being approved; then it covers later matching paths, and nothing else.
    wrong = carol.send(data={"decision_type": "approve", "scope": "session", "grant": {"argument": "path", "glob": "*.txt"}},
                       task=other)["task"]
    assert state(wrong) == "TASK_STATE_INPUT_REQUIRED"
    assert "does not cover the approved call's path='.env.a'" in status_text(wrong)
    glob = carol.send(data={"decision_type": "approve", "scope": "session", "grant": {"argument": "path", "glob": ".env.*"}},
                      task=other)["task"]
    assert state(glob) == "TASK_STATE_COMPLETED", glob
    assert state(carol.send("read .env.b", context_id=context)["task"]) == "TASK_STATE_COMPLETED"
    assert state(carol.send("read ../.env.b", context_id=context)["task"]) == "TASK_STATE_INPUT_REQUIRED"
    # Every call run under a grant is an approval record: source grant, decided by who granted it.
    views = ApprovalList.model_validate_json(rest(env, "carol").client.get("/approvals?state=all").content).approvals
    granted = sorted((v.args["path"], v.decided_by) for v in views if v.source == "grant")
    assert granted == [(".env", "carol"), (".env.b", "carol")], granted
    assert all(v.status == "approved" for v in views if v.id == rid)


def test_the_event_stream_carries_only_what_the_caller_may_see(env: Env) -> None:
    """carol is neither an approver (sre) nor the requester of bob's delete: her stream stays silent about it, as her
    list does; alice's (sre) shows it. carol's own request reaches her stream."""
    import threading

    seen: dict[str, list[str]] = {"alice": [], "carol": []}
    opened = {who: threading.Event() for who in seen}
    stop = threading.Event()

    def follow(who: str) -> None:
        headers = {"Authorization": f"Bearer tok-{who}"}
        with httpx.stream("GET", f"{env.proc.url}/approvals/events", headers=headers,
                          timeout=httpx.Timeout(30, read=1)) as reply:
            opened[who].set()
            while not stop.is_set():
                with contextlib.suppress(httpx.ReadTimeout):
                    for line in reply.iter_lines():
                        if line.startswith("data:"):
                            seen[who].append(json.loads(line[5:])["approval"]["id"])
                        if stop.is_set():
                            return

    threads = [threading.Thread(target=follow, args=(who,), daemon=True) for who in seen]
    for thread in threads:
        thread.start()
    try:
        assert all(o.wait(30) for o in opened.values())
        _, bobs = pause(rpc(env, "bob"), env.tools, "events-bob.txt")
        _, carols = pause(rpc(env, "carol"), env.tools, "events-carol.txt")
        wait_for(lambda: bobs in seen["alice"] and carols in seen["alice"] and carols in seen["carol"], 30)
        assert bobs not in seen["carol"]
    finally:
        stop.set()
        for thread in threads:
            thread.join(10)
