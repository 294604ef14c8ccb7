"""REST approvals, server-sent events, webhooks and metrics over real HTTP: runtime + demo tools as processes.

One runtime serves the module, with bearer tokens on (alice, bob, a bare token), approvers ``{anyAuthenticated: true}``
(anyone signed in may decide anyone's calls), and three webhooks: a healthy receiver (signed JSON), one answering 500
and one refusing connections.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from agent_runtime.contract import wire
from agent_runtime.rest import signing
from agent_runtime.rest.models import ApprovalEventData, ApprovalList, ApprovalView, DecisionResult, ProblemDetails, StreamReset
from tests.support.processes import free_port
from tests.support.runtime import (
    Rpc,
    RuntimeProcess,
    Tools,
    demo_tools,
    ended,
    finished_explanation,
    request_ids,
    runtime,
    state,
    status_text,
    wait_for,
)
from tests.support.webhook_receiver import Receiver, webhook_receiver

pytestmark = pytest.mark.e2e

SECRET = b"webhook-secret-for-tests"
TOKENS = "# principal:token\nalice:tok-alice\nbob:tok-bob\nbare-token\n"


@dataclass
class Env:
    tools: Tools
    proc: RuntimeProcess
    receiver: Receiver


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    base = tmp_path_factory.mktemp("rest-e2e")
    (base / "tokens").write_text(TOKENS)
    (base / "secret").write_text(SECRET.decode() + "\n")
    with webhook_receiver() as receiver, demo_tools(base / "tools") as tools:
        receiver.status["/fail"] = 500
        args = [
            "--api-token-file", str(base / "tokens"), "--webhook-secret-file", str(base / "secret"),
            "--webhook", f"{receiver.url}/fail", "--webhook", f"http://127.0.0.1:{free_port()}/refused",
            "--webhook", f"{receiver.url}/ok",
        ]
        # alice asks, and bob or the bare token decide: the Agent opts in to any authenticated person deciding.
        with runtime(base / "rt", tools, serve_args=args, approvers={"anyAuthenticated": True}) as proc:
            yield Env(tools, proc, receiver)


class Rest:
    def __init__(self, url: str, token: str | None) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.client = httpx.Client(base_url=url, headers=headers, timeout=60)

    def decide(self, request_id: str, decision: str, reason: str = "", key: str | None = None) -> httpx.Response:
        return self.client.post(
            f"/approvals/{request_id}/decision", json={"decision": decision, "reason": reason},
            headers={"Idempotency-Key": key or str(uuid.uuid4())},
        )


@pytest.fixture
def rpc(env: Env) -> Rpc:
    return Rpc(env.proc.url, "tok-bob")  # bob starts the conversations; alice and others decide over REST


@pytest.fixture
def alice(env: Env) -> Rest:
    return Rest(env.proc.url, "tok-alice")


def _pause(rpc: Rpc, tools: Tools, name: str) -> dict[str, Any]:
    (tools.sandbox / name).write_text(name)
    task = rpc.send(f"delete {name}")["task"]
    assert state(task) == "TASK_STATE_INPUT_REQUIRED", task
    return task


def _finished(rpc: Rpc, task: dict[str, Any]) -> dict[str, Any]:
    return wait_for(lambda: (t := rpc.get_task(task["id"])) and ended(t) and t, 60)


def test_auth_list_get_decide_idempotency_conflicts(env: Env, rpc: Rpc, alice: Rest) -> None:
    task = _pause(rpc, env.tools, "rest-flow.txt")
    (rid,) = request_ids(task)
    # 401 without a token and with a wrong one, on REST and A2A alike; the probes and the card stay public.
    for rest in (Rest(env.proc.url, None), Rest(env.proc.url, "tok-wrong")):
        get_task = {"jsonrpc": "2.0", "id": "1", "method": "GetTask", "params": {"id": task["id"]}}
        for reply in (rest.client.get("/approvals"), rest.client.get(f"/approvals/{rid}"), rest.decide(rid, "approve"),
                      rest.client.post("/", json=get_task)):
            assert reply.status_code == 401 and reply.headers["www-authenticate"].startswith("Bearer")
            assert "Bearer" in ProblemDetails.model_validate_json(reply.content).error
    assert httpx.get(f"{env.proc.url}/readyz").status_code == 200
    assert httpx.get(f"{env.proc.url}/.well-known/agent-card.json").json()["securitySchemes"]["token"]["httpAuthSecurityScheme"]
    # List (default pending) and get: 202 + Retry-After while pending.
    listed = ApprovalList.model_validate_json(alice.client.get("/approvals").content).approvals
    mine = next(a for a in listed if a.id == rid)
    assert (mine.task_id, mine.context_id, mine.tool, mine.args) == (task["id"], task["contextId"], "delete_file",
                                                                   {"path": "rest-flow.txt"})
    assert mine.status == "pending" and mine.decided_by is None and "requireApproval" in mine.hint and mine.expires_at
    reply = alice.client.get(f"/approvals/{rid}")
    assert reply.status_code == 202 and 1 <= int(reply.headers["retry-after"]) <= 5
    assert alice.client.get("/approvals", params={"state": "bogus"}).status_code == 422
    # Unknown ids, missing key, malformed bodies.
    assert alice.client.get("/approvals/apr-nope").status_code == 404
    assert alice.decide("apr-nope", "approve").status_code == 404
    no_key = alice.client.post(f"/approvals/{rid}/decision", json={"decision": "approve"})
    assert no_key.status_code == 400 and "Idempotency-Key" in no_key.json()["error"]
    for body in (b"not json", b"[1]", json.dumps({"decision": "maybe"}).encode(), json.dumps({"reason": "x"}).encode(),
                 json.dumps({"decision": "approve", "extra": 1}).encode()):
        bad = alice.client.post(f"/approvals/{rid}/decision", content=body, headers={"Idempotency-Key": str(uuid.uuid4())})
        assert bad.status_code == 422 and '"decision": "approve"|"deny"' in bad.json()["error"], body
    assert not env.tools.executions("delete_file", "rest-flow.txt")
    # Decide as alice; the same key gives the same answer, the same key with another body 422.
    key = str(uuid.uuid4())
    first = alice.decide(rid, "approve", "looks fine", key=key)
    assert first.status_code == 200, first.text
    result = DecisionResult.model_validate_json(first.content)
    assert result.approval.status == "approved" and result.approval.decided_by == "alice"
    assert result.approval.source == "rest" and result.approval.reason == "looks fine" and result.approval.decided_at
    again = alice.decide(rid, "approve", "looks fine", key=key)
    assert (again.status_code, again.content) == (200, first.content)
    assert alice.decide(rid, "deny", "changed my mind", key=key).status_code == 422
    # Another decision after it: 409 says who decided what; bob's key replays that 409.
    bob, bob_key = Rest(env.proc.url, "tok-bob"), str(uuid.uuid4())
    conflict = bob.decide(rid, "deny", "no", key=bob_key)
    assert conflict.status_code == 409
    problem = ProblemDetails.model_validate_json(conflict.content)
    assert "Already decided" in problem.error and "approved by rest" in problem.error
    assert problem.approval is not None and problem.approval.decided_by == "alice"
    assert bob.decide(rid, "deny", "no", key=bob_key).content == conflict.content
    # The task resumed by itself; the call ran once.
    done = _finished(rpc, task)
    assert state(done) == "TASK_STATE_COMPLETED" and "Delete of rest-flow.txt" in status_text(done)
    assert done["status"]["message"]["metadata"]["decisions"][rid]["source"] == "rest"
    assert len(env.tools.executions("delete_file", "rest-flow.txt")) == 1
    decided = alice.client.get(f"/approvals/{rid}")
    assert decided.status_code == 200 and ApprovalView.model_validate_json(decided.content).decided_by == "alice"
    approved = ApprovalList.model_validate_json(alice.client.get("/approvals?state=approved").content).approvals
    assert rid in [a.id for a in approved]
    assert rid not in [a.id for a in ApprovalList.model_validate_json(alice.client.get("/approvals").content).approvals]
    # A bare token decides as "rest".
    task = _pause(rpc, env.tools, "bare.txt")
    reply = Rest(env.proc.url, "bare-token").decide(request_ids(task)[0], "deny", "bare says no")
    assert reply.status_code == 200 and reply.json()["approval"]["decided_by"] == "rest"
    assert "rejected by the user: bare says no" in status_text(_finished(rpc, task))


def test_one_request_at_a_time_resumes_when_none_is_pending(env: Env, rpc: Rpc, alice: Rest) -> None:
    for name in ("part-a.txt", "part-b.txt"):
        (env.tools.sandbox / name).write_text(name)
    task = rpc.send("clean up part-a.txt and part-b.txt")["task"]
    first, second = request_ids(task)
    assert alice.decide(first, "approve").status_code == 200
    # Still waiting for the second: nothing ran, the task is input-required, its pause lists only the second.
    paused = rpc.get_task(task["id"])
    assert state(paused) == "TASK_STATE_INPUT_REQUIRED" and request_ids(paused) == [second], status_text(paused)
    assert status_text(paused).startswith(f"Recorded: {first} (delete_file) approved via rest. Still waiting for a "
                                          f"decision on {second} (delete_file)")
    assert not env.tools.executions("delete_file", "part-a.txt")
    assert Rest(env.proc.url, "tok-bob").decide(second, "deny", "b stays").status_code == 200
    done = _finished(rpc, task)
    assert state(done) == "TASK_STATE_COMPLETED"
    assert "rejected by the user: b stays" in status_text(done)
    decisions = done["status"]["message"]["metadata"]["decisions"]
    assert {i: d["outcome"] for i, d in decisions.items()} == {first: "approved", second: "denied"}
    assert len(env.tools.executions("delete_file", "part-a.txt")) == 1
    assert not env.tools.executions("delete_file", "part-b.txt") and (env.tools.sandbox / "part-b.txt").exists()
    views = {v.id: v for v in ApprovalList.model_validate_json(alice.client.get("/approvals?state=all").content).approvals}
    assert (views[first].decided_by, views[second].decided_by) == ("alice", "bob")


def test_exactly_once_across_a2a_and_rest(env: Env, alice: Rest) -> None:
    outcomes = []
    for n in range(4):
        rpc = Rpc(env.proc.url, "tok-bob")  # bob asks; bob on A2A and alice on REST race
        name = f"race-{n}.txt"
        task = _pause(rpc, env.tools, name)
        (rid,) = request_ids(task)
        go = threading.Barrier(2)

        def by_a2a(task: dict[str, Any] = task, rpc: Rpc = rpc, go: threading.Barrier = go) -> dict[str, Any]:
            message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "taskId": task["id"],
                       "contextId": task["contextId"], "parts": [{"data": wire.approve_all()}]}
            go.wait()
            return rpc.call("SendMessage", {"message": message})

        def by_rest(rid: str = rid, go: threading.Barrier = go) -> httpx.Response:
            go.wait()
            return alice.decide(rid, "approve")

        with ThreadPoolExecutor(2) as pool:
            a2a_future, rest_future = pool.submit(by_a2a), pool.submit(by_rest)
            a2a, rest = a2a_future.result(), rest_future.result()
        if "error" in a2a:  # the task was finished by REST's resume before this message: -32004, explained
            assert a2a["error"]["code"] == -32004, a2a
            a2a_text, a2a = finished_explanation(a2a["error"]), {}
        else:
            a2a = a2a["result"]
            a2a_text = status_text(a2a["task"]) if "task" in a2a else a2a["message"]["parts"][0]["text"]
        if rest.status_code == 200:
            outcomes.append("rest")
            # The A2A loser is told: "Already decided …", or the task the REST decision finished (its resume ran
            # first, on this message), whose decisions name their source.
            decisions = a2a.get("task", {}).get("status", {}).get("message", {}).get("metadata", {}).get("decisions", {})
            assert "Already decided" in a2a_text or decisions[rid]["source"] == "rest", a2a
        else:
            outcomes.append("a2a")
            assert rest.status_code == 409 and "approved by a2a" in rest.json()["error"]
            assert "Already decided" not in a2a_text
        done = _finished(rpc, task)
        assert state(done) == "TASK_STATE_COMPLETED"
        assert len(env.tools.executions("delete_file", name)) == 1, outcomes
        assert ApprovalView.model_validate_json(alice.client.get(f"/approvals/{rid}").content).source == outcomes[-1]


def test_events_stream_then_webhooks(env: Env, rpc: Rpc, alice: Rest) -> None:
    events: list[dict[str, Any]] = []
    target: list[str] = []
    connected = threading.Event()

    def until_decided(seen: list[dict[str, str]], _last: str | None) -> bool:
        connected.set()
        return any(e["event"] == "decided" and target and target[0] in e["data"] for e in seen)

    def listen() -> None:
        events.extend(_follow(alice, until_decided)[0])

    listener = threading.Thread(target=listen, daemon=True)
    listener.start()
    assert connected.wait(30)
    task = _pause(rpc, env.tools, "streamed.txt")
    (rid,) = request_ids(task)
    target.append(rid)
    assert alice.decide(rid, "deny", "not today").status_code == 200
    listener.join(30)
    assert not listener.is_alive()
    mine = [e for e in events if ApprovalEventData.model_validate_json(e["data"]).approval.id == rid]
    assert [e["event"] for e in mine] == ["requested", "decided"]
    assert _position(mine[0]["id"])[0] == _position(mine[1]["id"])[0]  # one stream
    assert _position(mine[0]["id"])[1] < _position(mine[1]["id"])[1]
    decided = ApprovalEventData.model_validate_json(mine[1]["data"])
    assert decided.agent == "file-manager" and decided.approval.status == "denied"
    assert decided.approval.decided_by == "alice" and decided.approval.reason == "not today"
    _finished(rpc, task)

    # Webhooks: signed JSON for the request and the outcome at /ok …
    receiver = env.receiver

    def delivered(kind: str) -> list[Any]:
        return [d for d in receiver.at("/ok") if d.headers.get("x-gatehouse-event") == kind and rid.encode() in d.body]

    (requested,) = receiver.wait(lambda: delivered("requested"))
    (outcome,) = receiver.wait(lambda: delivered("decided"))
    for delivery in (requested, outcome):
        verified = signing.verify(SECRET, delivery.headers, delivery.body)  # within 300 s of now, binding the headers
        assert verified.delivery == delivery.headers["x-gatehouse-delivery"]
        assert verified.event == delivery.headers["x-gatehouse-event"]
        with pytest.raises(signing.SignatureError, match="mismatch"):
            signing.verify(b"other-secret", delivery.headers, delivery.body)
        assert delivery.headers["content-type"] == "application/json"
    assert ApprovalEventData.model_validate_json(requested.body).approval.status == "pending"
    body = ApprovalEventData.model_validate_json(outcome.body)
    assert body.event == "decided" and body.approval.decided_by == "alice" and body.approval.status == "denied"
    # … while the failing endpoint (500) is retried (the same delivery again) and never held the agent up: every
    # decision above went through while its deliveries still wait in its own queue.
    receiver.wait(lambda: max(Counter(d.headers["x-gatehouse-delivery"] for d in receiver.at("/fail")).values(), default=0) >= 3)



def _position(event_id: str) -> tuple[str, int]:
    stream, _, number = event_id.partition("-")
    return stream, int(number)


def _follow(rest: Rest, stop: Callable[[list[dict[str, str]], str | None], bool],
            last_event_id: str | None = None) -> tuple[list[dict[str, str]], str | None]:
    """Read ``/approvals/events`` (resuming after ``last_event_id``) until ``stop(events, last id seen)``."""
    headers = {"Last-Event-ID": last_event_id} if last_event_id else {}
    events: list[dict[str, str]] = []
    current: dict[str, str] = {}
    last_id = None
    deadline = time.monotonic() + 45  # keep-alive comments every 15 s: a line comes at least that often
    with rest.client.stream("GET", "/approvals/events", headers=headers, timeout=httpx.Timeout(60, read=60)) as stream:
        assert stream.status_code == 200, stream.read()
        assert stream.headers["content-type"].startswith("text/event-stream")
        for line in stream.iter_lines():
            assert time.monotonic() < deadline, f"gave up waiting; events so far: {events}"
            if line.startswith(("id:", "event:", "data:")):
                name, _, value = line.partition(":")
                current[name] = value.strip()
            elif not line:
                last_id = current.get("id", last_id)
                if "data" in current:
                    events.append(current)
                current = {}
                if stop(events, last_id):
                    break
    return events, last_id


def test_events_resume_after_a_reconnect_and_reset_when_they_cannot(env: Env, rpc: Rpc, alice: Rest) -> None:
    # Connect, take the position the stream gives at once, and leave before anything happens.
    _, position = _follow(alice, lambda events, last: last is not None)
    assert position is not None
    # Meanwhile a request is made and decided: a client that was away must not miss either event.
    task = _pause(rpc, env.tools, "missed.txt")
    (rid,) = request_ids(task)
    assert alice.decide(rid, "approve", "while you were away").status_code == 200

    def decided(events: list[dict[str, str]], _last: str | None) -> bool:
        return any(e["event"] == "decided" and rid in e["data"] for e in events)

    replayed, _ = _follow(alice, decided, last_event_id=position)
    mine = [e for e in replayed if ApprovalEventData.model_validate_json(e["data"]).approval.id == rid]
    assert [e["event"] for e in mine] == ["requested", "decided"]
    assert all(e["event"] in ("requested", "decided") for e in replayed)  # no reset: this stream kept them
    assert [_position(e["id"]) for e in replayed] == sorted(_position(e["id"]) for e in replayed)
    assert all(_position(e["id"])[1] > _position(position)[1] for e in replayed)
    assert ApprovalEventData.model_validate_json(mine[1]["data"]).approval.decided_by == "alice"

    # Ids this stream cannot resume from: another stream's (a restart, another replica), one never sent, garbage.
    stream = _position(position)[0]
    for stale, why in [("0badcafe-3", "not from this stream"), (f"{stream}-999999", "never sent"),
                       ("no-number", "not from this stream")]:
        events, last = _follow(alice, lambda events, last: bool(events), last_event_id=stale)
        assert events[0]["event"] == "reset", (stale, events)
        reset = StreamReset.model_validate_json(events[0]["data"])
        assert reset.agent == "file-manager" and why in reset.reason and "GET /approvals" in reset.reason
        assert last is not None and _position(last)[0] == stream  # a position to resume from after listing


def test_metrics_follow_requests_and_decisions(env: Env, rpc: Rpc, alice: Rest) -> None:
    requests = rpc.metric("gatehouse_approval_requests_total", agent="file-manager", tool="delete_file")
    by_rest = rpc.metric("gatehouse_decisions_total", outcome="approved", source="rest")
    latency = rpc.metric("gatehouse_decision_latency_seconds_count", outcome="approved", source="rest")
    task = _pause(rpc, env.tools, "metered.txt")
    assert rpc.metric("gatehouse_approval_requests_total", agent="file-manager", tool="delete_file") == requests + 1
    assert rpc.metric("gatehouse_pending_approvals") >= 1
    pending = rpc.metric("gatehouse_pending_approvals")
    assert alice.decide(request_ids(task)[0], "approve").status_code == 200
    assert rpc.metric("gatehouse_pending_approvals") == pending - 1
    assert rpc.metric("gatehouse_decisions_total", outcome="approved", source="rest") == by_rest + 1
    assert rpc.metric("gatehouse_decision_latency_seconds_count", outcome="approved", source="rest") == latency + 1
    _finished(rpc, task)
    text = rpc.client.get("/metrics").text
    for name in ("gatehouse_approval_timeouts_total", "gatehouse_decision_latency_seconds_bucket",
                 "gatehouse_webhook_deliveries_total"):
        assert name in text
    assert wait_for(lambda: rpc.metric("gatehouse_webhook_deliveries_total", result="ok") >= 1, 30)
    # /fail (500) and /refused (nothing listens) give up after 5 attempts, 7.5 s of backoff: dead letters.
    assert wait_for(lambda: rpc.metric("gatehouse_webhook_deliveries_total", result="dead_letter") >= 2, 60)

