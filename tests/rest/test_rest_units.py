"""Pure parts of REST, webhooks and metrics: tokens, bodies, views, settings, drop-when-full, latency."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import pytest

from agent_runtime.approvals import ApprovalRecord
from agent_runtime.approvals.events import ApprovalEvent
from agent_runtime.infra.database import Database
from agent_runtime.rest import idempotency
from agent_runtime.rest.idempotency import IdempotencyKeys, scoped
from agent_runtime.rest.models import ApprovalEventData, ApprovalView, BodyError, DecisionBody
from agent_runtime.rest.settings import RestSettings, load_rest_settings
from agent_runtime.rest.webhooks import Webhooks, render, slack_text
from agent_runtime.server.batches import with_decided_siblings
from agent_runtime.telemetry.metrics import Metrics


def _record(rid: str = "apr-1", created: float = 1_000.0, position: int = 0, **changes: object) -> ApprovalRecord:
    record = ApprovalRecord(
        id=rid, task_id="t1", context_id="c1", confirmation_id=f"conf-{rid}", call_id=f"call-{rid}", tool="delete_file",
        server="files", args={"path": "a.txt"}, args_hash="h", hint="gated", created_at=created,
        expires_at=created + 900, position=position,
    )
    return replace(record, **changes)  # type: ignore[arg-type]


# --- webhook bodies (signing and delivery: test_rest_webhooks.py) ---------------------------------


def test_webhook_bodies_json_and_slack() -> None:
    pending = ApprovalView.of(_record())
    data = ApprovalEventData.model_validate_json(render("json", "requested", "files-agent", pending))
    assert (data.event, data.agent, data.approval.id, data.approval.status) == ("requested", "files-agent", "apr-1", "pending")
    slack = json.loads(render("slack", "requested", "files-agent", pending))
    assert list(slack) == ["text"]
    assert slack["text"] == ("Approval needed: files-agent wants to run `delete_file(path='a.txt')` [apr-1], "
                             "expires 1970-01-01T00:31:40Z. gated")
    denied = ApprovalView.of(_record(status="denied", reason="keep it", source="rest", decided_at=1_010.0), "alice")
    expected = "files-agent: `delete_file(path='a.txt')` [apr-1] was denied by alice: keep it"
    assert slack_text("decided", "files-agent", denied) == expected
    expired = ApprovalView.of(_record(status="expired", source="timeout", decided_at=1_900.0))
    assert slack_text("decided", "a", expired) == "a: `delete_file(path='a.txt')` [apr-1] was timed out"


async def test_a_full_webhook_queue_drops_and_counts_without_waiting() -> None:
    metrics = Metrics("a")
    hooks = Webhooks(None, "a", RestSettings(webhooks=("http://127.0.0.1:9/x",), webhook_queue=1), metrics)  # type: ignore[arg-type]
    hooks.on_approval_event(ApprovalEvent("requested", (_record("apr-1"), _record("apr-2"))))  # workers not started
    assert metrics.registry.get_sample_value("gatehouse_webhook_deliveries_total", {"result": "dropped"}) == 1


def test_rest_settings_from_options_and_environment(tmp_path: Path) -> None:
    (tmp_path / "secret").write_text("from-file\n")
    from_env = load_rest_settings(env={"GATEHOUSE_WEBHOOKS": "http://a http://b", "GATEHOUSE_WEBHOOK_SECRET": "env-secret"})
    assert from_env.webhooks == ("http://a", "http://b")
    assert from_env.webhook_secret == b"env-secret"
    from_files = load_rest_settings(webhooks=["http://c"], webhook_format="slack", webhook_secret_file=tmp_path / "secret",
                                    env={"GATEHOUSE_WEBHOOK_SECRET": "ignored"})
    assert from_files.webhooks == ("http://c",)
    assert from_files.webhook_format == "slack" and from_files.webhook_secret == b"from-file"
    with pytest.raises(ValueError, match="json or slack"):
        load_rest_settings(webhook_format="xml", env={})
    assert from_env.idempotency_ttl == 24 * 3600 and load_rest_settings(idempotency_ttl="90m", env={}).idempotency_ttl == 5400
    with pytest.raises(ValueError, match="--idempotency-ttl: invalid duration"):
        load_rest_settings(idempotency_ttl="forever", env={})


# --- bodies -----------------------------------------------------------------------------------


def test_decision_body_parser() -> None:
    assert DecisionBody.parse(b'{"decision": "approve"}') == DecisionBody(decision="approve")
    assert DecisionBody.parse(b'{"decision": "deny", "reason": "no"}') == DecisionBody(decision="deny", reason="no")
    cases = {
        b"": "must be a JSON object", b"nope": "not JSON", b"[]": "must be a JSON object",
        b'{"decision": "yes"}': "decision: Input should be 'approve' or 'deny'",
        b'{"reason": "x"}': "decision: Field required",
        b'{"decision": "approve", "scope": "session"}': "scope: Extra inputs are not permitted",
        b'{"decision": "approve", "reason": 3}': "reason: Input should be a valid string",
    }
    for raw, message in cases.items():
        with pytest.raises(BodyError, match=message.replace("(", r"\(")):
            DecisionBody.parse(raw)


def test_fingerprint_binds_the_request_and_the_decision() -> None:
    approve = DecisionBody(decision="approve")
    assert approve.fingerprint("apr-1") == DecisionBody.parse(b'{"reason": "", "decision": "approve"}').fingerprint("apr-1")
    assert approve.fingerprint("apr-1") != approve.fingerprint("apr-2")
    assert approve.fingerprint("apr-1") != DecisionBody(decision="approve", reason="x").fingerprint("apr-1")
    assert approve.fingerprint("apr-1") != DecisionBody(decision="deny").fingerprint("apr-1")


def test_approval_view() -> None:
    pending = ApprovalView.of(_record(), "ignored while pending")
    assert (pending.status, pending.decided_by, pending.decided_at) == ("pending", None, None)
    assert pending.created_at == "1970-01-01T00:16:40Z" and pending.expires_at == "1970-01-01T00:31:40Z"
    by_source = ApprovalView.of(_record(status="approved", source="a2a", decided_at=1_001.0))
    assert (by_source.decided_by, by_source.decided_at) == ("a2a", "1970-01-01T00:16:41Z")
    assert ApprovalView.of(_record(status="approved", source="rest", decided_at=1_001.0), "alice").decided_by == "alice"


async def _first_events(response: object, count: int) -> list[object]:
    """The first ``count`` server-sent events of an ``EventSourceResponse`` (as objects, before encoding)."""
    out = []
    async for event in response.body_iterator:  # type: ignore[attr-defined]
        out.append(event)
        if len(out) == count:
            break
    await response.body_iterator.aclose()  # type: ignore[attr-defined]
    return out


async def test_the_event_stream_replays_what_it_kept_and_resets_beyond(tmp_path: Path) -> None:
    from agent_runtime.rest.models import StreamReset
    from agent_runtime.rest.stream import EventStream

    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'events.db'}")  # pending records: no decider to look up
    stream = EventStream(db, "file-manager", keep=2)  # keeps the last two events
    (start,) = await _first_events(stream.response(), 1)
    for rid in ("apr-1", "apr-2", "apr-3"):
        stream.on_approval_event(ApprovalEvent("requested", (_record(rid),)))
    token = start.id.partition("-")[0]
    assert start.id == f"{token}-0" and start.data is None  # a position to resume from, before any event

    position, two, three = await _first_events(stream.response(f"{token}-1"), 3)
    assert position.id == f"{token}-3"
    assert [(e.id, ApprovalEventData.model_validate_json(e.data).approval.id) for e in (two, three)] == [
        (f"{token}-2", "apr-2"), (f"{token}-3", "apr-3")]

    position, reset = await _first_events(stream.response(f"{token}-0"), 2)  # apr-1 is no longer kept
    assert reset.event == "reset" and reset.id == f"{token}-3"
    assert "no longer kept" in StreamReset.model_validate_json(reset.data).reason
    await db.dispose()


async def test_idempotency_keys_keep_the_first_answer(tmp_path: Path) -> None:
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'keys.db'}")
    keys = IdempotencyKeys(db)
    await keys.create_tables()
    assert await keys.get("alice", "k") is None
    first = await keys.put("alice", "k", "apr-1", "f1", 409, '{"error": "x"}')
    assert await keys.put("alice", "k", "apr-1", "f2", 200, "{}") == first == await keys.get("alice", "k")
    await db.dispose()


async def test_idempotency_keys_are_the_principals_own(tmp_path: Path) -> None:
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'keys.db'}")
    keys = IdempotencyKeys(db)
    await keys.create_tables()
    alices = await keys.put("alice", "k", "apr-1", "f", 200, '{"by": "alice"}')
    assert await keys.get("bob", "k") is None  # the same key from bob is another key
    bobs = await keys.put("bob", "k", "apr-1", "f", 409, '{"by": "bob"}')
    assert (await keys.get("alice", "k"), await keys.get("bob", "k")) == (alices, bobs) and alices != bobs
    # One principal's name and key never make another's: the stored key is a digest of both, always 64 characters.
    assert scoped("a", "b:c") != scoped("a:b", "c") and len(scoped("p" * 256, "k" * 256)) == 64
    # A key written before keys had a principal (state version 2) answers nobody.
    await db.run(lambda conn: conn.execute(idempotency.keys.insert().values(
        key="old", principal="", request_id="apr-1", fingerprint="f", status_code=200, response_json="{}",
        created_at=time.time())))
    assert [await keys.get(who, "old") for who in ("alice", "bob", "")] == [None, None, None]
    await db.dispose()


async def test_idempotency_keys_expire_after_the_ttl(tmp_path: Path) -> None:
    now = [1_000.0]
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'keys.db'}")
    keys = IdempotencyKeys(db, ttl=60.0, clock=lambda: now[0])
    await keys.create_tables()
    first = await keys.put("alice", "k", "apr-1", "f", 200, "{}")
    now[0] += 59.0
    assert await keys.get("alice", "k") == first
    now[0] += 1.0
    assert await keys.get("alice", "k") is None  # expired: unknown again
    second = await keys.put("alice", "k", "apr-2", "g", 409, '{"again": true}')  # the expired row makes way
    assert await keys.get("alice", "k") == second
    await keys.put("bob", "other", "apr-3", "f", 200, "{}")
    now[0] += 60.0
    assert await keys.purge() == 2 and await keys.get("alice", "k") is None
    assert await db.run(lambda conn: conn.execute(idempotency.keys.select()).all(), write=False) == []
    await db.dispose()


# --- the executor's pause bookkeeping and the metrics ------------------------------------------


def test_with_decided_siblings_completes_the_pause_in_call_order() -> None:
    earlier_pause = _record("apr-0", created=500.0, status="approved")
    a = _record("apr-a", position=0, status="denied", source="rest")
    b = _record("apr-b", position=1)
    c = _record("apr-c", position=2, status="approved", source="kubernetes")
    decided_b = replace(b, status="approved", source="a2a")
    resumed = with_decided_siblings([earlier_pause, a, b, c], [decided_b])
    assert [r.id for r in resumed] == ["apr-a", "apr-b", "apr-c"]
    assert resumed[1] is decided_b


def test_metrics_latency_and_timeouts_from_events() -> None:
    metrics = Metrics("files-agent")
    metrics.on_approval_event(ApprovalEvent("requested", (_record(),)))
    metrics.on_approval_event(ApprovalEvent("decided", (_record(status="approved", decided_at=1_030.0),), "rest"))
    metrics.on_approval_event(ApprovalEvent("decided", (_record("apr-2", status="expired", decided_at=1_900.0),), "timeout"))
    value = metrics.registry.get_sample_value
    assert value("gatehouse_decision_latency_seconds_sum", {"outcome": "approved", "source": "rest"}) == 30.0
    assert value("gatehouse_decision_latency_seconds_bucket", {"outcome": "approved", "source": "rest", "le": "60.0"}) == 1
    assert value("gatehouse_decision_latency_seconds_count", {"outcome": "timeout", "source": "timeout"}) == 1
    assert value("gatehouse_approval_timeouts_total", {"agent": "files-agent", "tool": "delete_file"}) == 1


def test_public_surface() -> None:
    import agent_runtime.rest as rest
    import agent_runtime.server.decide_one as decide_one

    assert rest.__all__ == ["RestSettings", "load_rest_settings"]
    assert decide_one.__all__ == ["DecideOne", "OneDecided", "UnknownRequest", "wait_for_resumes"]
