"""REST, ``decide_one`` and webhooks on the runtime app in-process (ASGI) against a real demo MCP server.

Cheaper than a subprocess, so the variants live here: auth off, Slack-format webhooks, timeouts in the
metrics, and a task decided partly by REST and finished by an A2A message.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_runtime.approvals import AlreadyDecided, Resolution, deciders
from agent_runtime.contract import wire
from agent_runtime.contract.authority import Vote
from agent_runtime.rest import RestSettings
from agent_runtime.server.decide_one import UnknownRequest
from tests.support.inprocess import InProcessApp, served
from tests.support.runtime import ended, request_ids, state, status_text
from tests.support.webhook_receiver import Receiver, webhook_receiver

pytestmark = pytest.mark.e2e


class App(InProcessApp):
    async def pause(self, *names: str) -> dict[str, Any]:
        for name in names:
            (self.tools.sandbox / name).write_text(name)
        text = f"delete {names[0]}" if len(names) == 1 else f"clean up {names[0]} and {names[1]}"
        task = (await self.send(text))["task"]
        assert state(task) == "TASK_STATE_INPUT_REQUIRED", task
        return task

    async def decide(self, request_id: str, decision: str, reason: str = "") -> httpx.Response:
        return await self.client.post(f"/approvals/{request_id}/decision", json={"decision": decision, "reason": reason},
                                      headers={"Idempotency-Key": str(uuid.uuid4())})

    def metric(self, name: str, **labels: str) -> float:
        value = self.runtime.metrics.registry.get_sample_value(name, labels)
        return value or 0.0


@pytest.fixture
def make_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Any]:
    monkeypatch.setenv("GOOGLE_API_USE_CLIENT_CERTIFICATE", "false")

    @asynccontextmanager
    async def make(rest: RestSettings | None = None, **approval: Any) -> AsyncIterator[App]:
        async with served(tmp_path, rest, App, **approval) as app:
            yield app

    return make


async def _finished(app: App, task: dict[str, Any]) -> dict[str, Any]:
    for _ in range(600):
        current = await app.get(task["id"])
        if ended(current):
            return current
        await asyncio.sleep(0.05)
    raise AssertionError("the task did not finish")


async def test_auth_off_rest_decides_one_and_a2a_finishes_the_pause(make_app: Callable[..., Any]) -> None:
    async with make_app() as app:
        task = await app.pause("mix-a.txt", "mix-b.txt")
        first, second = request_ids(task)
        reply = await app.decide(first, "deny", "a stays")  # no token needed when none is configured
        assert reply.status_code == 200 and reply.json()["approval"]["decided_by"] == "anonymous"
        # GetTask (already when the REST answer came): the pause lists only what is still pending.
        paused = await app.get(task["id"])
        assert state(paused) == "TASK_STATE_INPUT_REQUIRED" and request_ids(paused) == [second]
        assert status_text(paused).startswith(f"Recorded: {first} (delete_file) denied via rest. Still waiting")
        # The A2A client decides what is left; the resumed turn answers both calls of the pause.
        stale = await app.send(data=wire.batch({first: True, second: True}), task=task)
        assert state(stale["task"]) == "TASK_STATE_INPUT_REQUIRED" and "Already decided" in status_text(stale["task"])
        assert request_ids(stale["task"]) == [second]
        done = (await app.send(data=wire.approve_all(), task=task))["task"]
        assert state(done) == "TASK_STATE_COMPLETED"
        assert "rejected by the user: a stays" in status_text(done)
        outcomes = {i: d["outcome"] for i, d in done["status"]["message"]["metadata"]["decisions"].items()}
        assert outcomes == {first: "denied", second: "approved"}
        assert not app.tools.executions("delete_file", "mix-a.txt")
        assert len(app.tools.executions("delete_file", "mix-b.txt")) == 1


async def test_an_idempotency_key_is_forgotten_after_its_ttl(make_app: Callable[..., Any]) -> None:
    async with make_app(RestSettings(idempotency_ttl=1.0)) as app:
        task = await app.pause("ttl.txt")
        (rid,) = request_ids(task)
        body, key = {"decision": "approve", "reason": "once"}, {"Idempotency-Key": "ttl-key"}
        first = await app.client.post(f"/approvals/{rid}/decision", json=body, headers=key)
        again = await app.client.post(f"/approvals/{rid}/decision", json=body, headers=key)
        assert first.status_code == 200 and (again.status_code, again.text) == (200, first.text)
        await asyncio.sleep(1.1)
        late = await app.client.post(f"/approvals/{rid}/decision", json=body, headers=key)
        assert late.status_code == 409 and "Already decided" in late.json()["error"]  # a new request: handled afresh
        assert state(await _finished(app, task)) == "TASK_STATE_COMPLETED"
        assert len(app.tools.executions("delete_file", "ttl.txt")) == 1


async def test_decide_one_directly(make_app: Callable[..., Any]) -> None:
    async with make_app(approvers={"users": ["alice"]}) as app:  # alice decides anyone's calls (anonymous asks)
        with pytest.raises(UnknownRequest):
            await app.runtime.decide_one("apr-missing", Vote("alice", frozenset(), "approve", "", "kubernetes"))
        task = await app.pause("direct.txt")
        (rid,) = request_ids(task)
        decided = await app.runtime.decide_one(rid, Vote("alice", frozenset(), "approve", "", "kubernetes"), wait=True)
        assert decided.record.status == "approved" and decided.resume is not None and decided.resume.done()
        assert state(await app.get(task["id"])) == "TASK_STATE_COMPLETED"
        with pytest.raises(AlreadyDecided, match="approved by kubernetes"):
            await app.runtime.decide_one(rid, Vote("bob", frozenset(), "deny", "", "rest"))
        view = (await app.client.get(f"/approvals/{rid}")).json()
        assert (view["decided_by"], view["source"]) == ("alice", "kubernetes")
        assert len(app.tools.executions("delete_file", "direct.txt")) == 1


async def test_a_session_grant_made_through_decide_one_lasts_the_agents_grant_ttl(make_app: Callable[..., Any]) -> None:
    """The inbox's (and REST's) "approve for the session" goes through DecideOne: its grant lasts spec.approval.grantTTL,
    what the inbox's card says, not a fixed hour."""
    from sqlalchemy import select

    from agent_runtime.approvals.tables import grants

    async with make_app(grantTTL="20m") as app:
        task = await app.pause("grant.txt")
        (rid,) = request_ids(task)
        one = await app.runtime.decide_one(rid, Vote("anonymous", frozenset(), "approve", "", "inbox"), scope="session",
                                           wait=True)  # auth off: the requester, anonymous, decides
        assert one.record.status == "approved", one.judgement
        rows = await app.runtime.db.run(lambda conn: conn.execute(select(grants.c.created_at, grants.c.expires_at)).all(),
                                        write=False)
        assert [round(expires - created) for created, expires in rows] == [20 * 60]


async def test_slack_webhook_and_timeouts_in_metrics(make_app: Callable[..., Any]) -> None:
    receiver: Receiver
    with webhook_receiver() as receiver:
        rest = RestSettings(webhooks=(f"{receiver.url}/slack",), webhook_format="slack")
        async with make_app(rest, timeout="1s") as app:
            task = await app.pause("slow.txt")
            (rid,) = request_ids(task)
            done = await _finished(app, task)
            assert "timeout: no decision within 1s" in status_text(done)
            assert app.metric("gatehouse_approval_timeouts_total", agent="file-manager", tool="delete_file") == 1
            assert app.metric("gatehouse_decision_latency_seconds_count", outcome="timeout", source="timeout") == 1
            assert app.metric("gatehouse_decision_latency_seconds_sum", outcome="timeout", source="timeout") >= 1
            assert app.metric("gatehouse_pending_approvals") == 0
            texts = await asyncio.to_thread(
                receiver.wait, lambda: (t := [json.loads(d.body)["text"] for d in receiver.at("/slack")]) and len(t) >= 2 and t
            )
            assert texts[0].startswith("Approval needed: file-manager wants to run `delete_file(path='slow.txt')`")
            assert rid in texts[0] and "(requireApproval)" in texts[0]
            call = "`delete_file(path='slow.txt')`"
            assert texts[1] == f"file-manager: {call} [{rid}] was timed out: timeout: no decision within 1s"
            assert "x-gatehouse-signature" not in receiver.at("/slack")[0].headers  # no secret, no signature


async def test_a_decision_recorded_before_a_restart_is_resumed_at_start_up(make_app: Callable[..., Any]) -> None:
    async with make_app() as app:
        task = await app.pause("restart.txt")
        (rid,) = request_ids(task)
        # As if the runtime stopped right after decide_one's transaction, before the resume.
        await app.runtime.approvals.decide(
            task["id"], {rid: Resolution("approved")}, "rest", also=lambda conn, at: deciders.record(conn, rid, "alice", at)
        )
        assert state(await app.get(task["id"])) == "TASK_STATE_INPUT_REQUIRED"
        assert await app.runtime.decide_one.resume_recorded() == 1
        done = await app.get(task["id"])
        assert state(done) == "TASK_STATE_COMPLETED" and "Delete of restart.txt" in status_text(done)
        assert await app.runtime.decide_one.resume_recorded() == 0
        assert len(app.tools.executions("delete_file", "restart.txt")) == 1


async def test_listing_pages_newest_first_with_a_cursor_and_loses_nothing(make_app: Callable[..., Any]) -> None:
    async with make_app() as app:
        tasks = [await app.pause(f"p{i}.txt") for i in range(5)]
        everyone = [i for t in reversed(tasks) for i in request_ids(t)]  # newest first
        seen: list[str] = []
        cursor: str | None = None
        pages = 0
        while True:
            params = {"limit": "2", **({"cursor": cursor} if cursor else {})}
            page = (await app.client.get("/approvals", params=params)).json()
            seen += [a["id"] for a in page["approvals"]]
            pages += 1
            cursor = page["next_cursor"]
            if cursor is None:
                break
            if pages == 1:  # decided between two pages: the next page neither skips nor repeats anything
                assert (await app.decide(everyone[-1], "deny", "not now")).status_code == 200
        assert seen == everyone[:-1] and pages == 2  # 5 pending, one decided after the first page: 2 + 2
        whole = (await app.client.get("/approvals", params={"state": "all", "limit": "5"})).json()
        assert [a["id"] for a in whole["approvals"]] == everyone and whole["next_cursor"] is None
        for bad in ({"limit": "0"}, {"limit": "501"}, {"limit": "x"}, {"cursor": "not-a-cursor"}, {"cursor": "WzEsMl0"}):
            reply = await app.client.get("/approvals", params=bad)
            assert reply.status_code == 422, (bad, reply.text)
