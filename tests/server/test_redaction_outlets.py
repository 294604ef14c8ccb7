"""A secret in a tool call's arguments, followed through every outlet of the runtime in-process (ASGI, demo tools):
REST lists and single views, a decision's answer, the event stream's data, webhook bodies (JSON and Slack) and the
logs show it redacted, with the arguments' hash and the redacted paths; the task's owner gets it in the A2A pause,
and the approved call runs with the real arguments. The Kubernetes outlets (ToolApproval, Events, kubectl votes):
tests/kube/test_redaction_mirror.py.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from agent_runtime.approvals import args_hash
from agent_runtime.rest import RestSettings
from agent_runtime.rest.models import ApprovalEventData, ApprovalView
from agent_runtime.rest.stream import EventStream
from tests.support.inprocess import InProcessApp, served
from tests.support.runtime import ended, request_ids, state
from tests.support.webhook_receiver import webhook_receiver

pytestmark = pytest.mark.e2e

SECRET = "sk-live-4eC39HqLyjWDarjtT1zdp7dc"
SHOWN = {"path": "creds.txt", "content": "«redacted»"}


@pytest.fixture
def make_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Any]:
    monkeypatch.setenv("GOOGLE_API_USE_CLIENT_CERTIFICATE", "false")

    @asynccontextmanager
    async def make(rest: RestSettings, **approval: Any) -> AsyncIterator[InProcessApp]:
        async with served(tmp_path, rest, **approval) as app:
            yield app

    return make


async def _decide(app: InProcessApp, request_id: str, decision: str) -> dict[str, Any]:
    reply = await app.client.post(f"/approvals/{request_id}/decision", json={"decision": decision},
                                  headers={"Idempotency-Key": f"key-{request_id}"})
    assert reply.status_code == 200, reply.text
    return dict(reply.json())


async def _finished(app: InProcessApp, task_id: str) -> dict[str, Any]:
    for _ in range(600):
        current = await app.get(task_id)
        if ended(current):
            return current
        await asyncio.sleep(0.05)
    raise AssertionError("the task did not finish")


def _pause_args(task: dict[str, Any]) -> list[dict[str, Any]]:
    return [r["args"] for r in task["status"]["message"]["parts"][1]["data"]["action_requests"]]


async def test_a_secret_reaches_no_outlet_but_the_owners_pause_and_the_tool(
    make_app: Callable[..., Any], caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)  # every logger from INFO (at DEBUG, a2a-sdk and mcp log whole messages: docs/security.md)
    caplog.set_level(logging.DEBUG, logger="agent_runtime")  # the runtime's own at every level
    real = {"path": "creds.txt", "content": SECRET}
    with webhook_receiver() as receiver:
        async with make_app(RestSettings(webhooks=(f"{receiver.url}/json",))) as app:
            stream = EventStream(app.runtime.db, "file-manager")  # the event stream's own rendering, in-process
            unsubscribe = app.runtime.approvals.events.subscribe(stream.on_approval_event)
            events = stream.response().body_iterator
            await anext(events)  # the stream's position

            task = (await app.send(f"write {SECRET} to creds.txt"))["task"]
            assert _pause_args(task) == [real]  # the owner sees their own pause unredacted
            (rid,) = request_ids(task)

            def check(view: dict[str, Any]) -> None:
                assert view["args"] == SHOWN and view["redacted"] == ["$.content"]
                assert view["args_hash"] == args_hash("write_file", real)  # bound to the real arguments

            (listed,) = [v for v in (await app.client.get("/approvals?state=all")).json()["approvals"] if v["id"] == rid]
            check(listed)
            check((await app.client.get(f"/approvals/{rid}")).json())
            requested = ApprovalEventData.model_validate_json((await asyncio.wait_for(anext(events), 10)).data)
            check(requested.approval.model_dump())

            answer = await _decide(app, rid, "approve")
            check(answer["approval"])
            done = await _finished(app, task["id"])
            assert state(done) == "TASK_STATE_COMPLETED"
            assert (app.tools.sandbox / "creds.txt").read_text() == SECRET  # the approved call ran as asked
            decided = ApprovalEventData.model_validate_json((await asyncio.wait_for(anext(events), 10)).data)
            assert decided.event == "decided"
            check(decided.approval.model_dump())
            check((await app.client.get(f"/approvals/{rid}")).json())

            bodies = await asyncio.to_thread(
                receiver.wait, lambda: len(receiver.at("/json")) >= 2 and [d.body for d in receiver.at("/json")]
            )
            for body in bodies:
                assert SECRET.encode() not in body
                check(ApprovalEventData.model_validate_json(body).approval.model_dump())
            unsubscribe()
    leaked = [r.getMessage() for r in caplog.records if SECRET in r.getMessage() or SECRET in (r.exc_text or "")]
    assert leaked == []


async def test_the_agents_own_rules_are_kept_with_the_request(make_app: Callable[..., Any]) -> None:
    """``spec.approval.redact`` paths and patterns, the built-in shapes off: fixed on the request, shown everywhere."""
    rules = {"paths": ["PATH"], "patterns": ["acct-[0-9]{4}"], "builtins": False}
    with webhook_receiver() as receiver:
        async with make_app(RestSettings(webhooks=(f"{receiver.url}/slack",), webhook_format="slack"), redact=rules) as app:
            task = (await app.send(f"write acct-1234 and {SECRET} to hidden-name.txt"))["task"]
            (rid,) = request_ids(task)
            assert _pause_args(task) == [{"path": "hidden-name.txt", "content": f"acct-1234 and {SECRET}"}]
            view = ApprovalView.model_validate((await app.client.get(f"/approvals/{rid}")).json())
            assert view.args == {"path": "«redacted»", "content": f"«redacted» and {SECRET}"}  # builtins: false
            assert sorted(view.redacted) == ["$.content", "$.path"]
            (record,) = await app.runtime.approvals.for_task(task["id"])
            assert record.redact is not None and record.redact.paths == ["PATH"]  # stored with the request
            (text,) = await asyncio.to_thread(
                receiver.wait, lambda: [json.loads(d.body)["text"] for d in receiver.at("/slack")]
            )
            assert "`write_file(content='«redacted» and sk-live-" in text
            assert "hidden-name" not in text and "acct-1234" not in text
