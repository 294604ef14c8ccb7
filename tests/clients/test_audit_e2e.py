"""A scripted day of approvals through a real runtime over HTTP, then ``gatehouse audit export`` says who decided what.

carol asks for every call; the Agent lets ``delete_file`` run only with two approvals from carol and alice, lets
anyone who reaches a ``write_file`` request decide it alone, and names the group ``compliance`` (ivy) as auditors.
The day: one deletion approved by two channels (carol over A2A, alice over REST), one denied (alice, REST), a write
approved for the session (carol, A2A) and the same write again under that grant, a write whose task carol cancels,
and a deletion nobody decides (timed out). The runtime exports each wait as an OpenTelemetry span to a receiver.
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from agent_runtime.approvals.audit import AuditEntry, AuditPage
from agent_runtime.clients.audit_export import read_csv, read_jsonl
from agent_runtime.contract import wire
from agent_runtime.contract.principals import INTERNAL
from tests.support.processes import GATEHOUSE_CMD
from tests.support.runtime import Rpc, RuntimeProcess, Tools, demo_tools, ended, request_ids, state, wait_for, write_manifests
from tests.support.webhook_receiver import Receiver, webhook_receiver

pytestmark = pytest.mark.e2e

TOKENS = "carol:tok-carol\nalice:tok-alice\nivy:groups=compliance:tok-ivy\nmallory:tok-mallory\n"
RULES = [
    {"tool": "read_file", "when": {"arg": "path", "glob": "**/.env*"}, "action": "require"},
    {"tool": "delete_file", "action": "require", "approvers": {"users": ["carol", "alice"], "required": 2}},
]
DELETE_RULE = "spec.approval.rules[1]"
WRITE_RULE = "spec.tools[file-tools].mcpServer.requireApproval"


@dataclass
class Day:
    proc: RuntimeProcess
    tools: Tools
    state_dir: Path
    spans: Receiver
    since: str
    requests: dict[str, str]  # name in the script → request id


def _manifests(base: Path, tools: Tools) -> list[Path]:
    files = write_manifests(base / "manifests", tools.url, timeout="20s", allowSessionGrants=True, rules=RULES)
    agent_file = next(f for f in files if f.name == "agent.yaml")
    agent = yaml.safe_load(agent_file.read_text())
    agent["spec"]["audit"] = {"auditors": {"groups": ["compliance"]}, "retention": "30d"}
    agent_file.write_text(yaml.safe_dump(agent))
    return files


def _rest_vote(proc: RuntimeProcess, token: str, request_id: str, decision: str, reason: str) -> httpx.Response:
    return httpx.post(f"{proc.url}/approvals/{request_id}/decision", json={"decision": decision, "reason": reason},
                      headers={"Authorization": f"Bearer {token}", "Idempotency-Key": str(uuid.uuid4())}, timeout=60)


def _finished(rpc: Rpc, task: dict[str, Any], timeout: float = 60) -> dict[str, Any]:
    return wait_for(lambda: (t := rpc.get_task(task["id"])) and ended(t) and t, timeout)


def _paused(rpc: Rpc, text: str, context_id: str | None = None) -> tuple[dict[str, Any], str]:
    task = rpc.send(text, context_id=context_id)["task"]
    assert state(task) == "TASK_STATE_INPUT_REQUIRED", task
    (request_id,) = request_ids(task)
    return task, request_id


@pytest.fixture(scope="module")
def day(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Day]:
    base = tmp_path_factory.mktemp("audit-day")
    (base / "tokens").write_text(TOKENS)
    since = datetime.now(UTC).date().isoformat()
    with webhook_receiver() as spans, demo_tools(base / "tools") as tools, pytest.MonkeyPatch.context() as env:
        for name in ("a.txt", "b.txt", "late.txt"):
            (tools.sandbox / name).write_text(name)
        proc = RuntimeProcess(_manifests(base, tools), base / "state", base / "runtime.log",
                              serve_args=["--api-token-file", str(base / "tokens")])
        env.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", spans.url)  # the runtime's own environment: spans on
        env.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
        proc.start()
        env.undo()
        try:
            yield Day(proc, tools, base / "state", spans, since, _script(proc, tools))
        finally:
            proc.stop()


def _script(proc: RuntimeProcess, tools: Tools) -> dict[str, str]:
    carol = Rpc(proc.url, "tok-carol")
    late, late_id = _paused(carol, "delete late.txt")  # nobody decides it: it times out at the end of the script
    # Approved by two channels: carol over A2A (1 of 2), then alice over REST (2 of 2); the call runs.
    task, both = _paused(carol, "delete a.txt")
    waiting = carol.send(data=wire.approve_all(), task=task)["task"]
    assert state(waiting) == "TASK_STATE_INPUT_REQUIRED" and "1 of 2" in str(waiting)
    assert _rest_vote(proc, "tok-alice", both, "approve", "cleanup ticket 42").status_code == 200
    assert state(_finished(carol, task)) == "TASK_STATE_COMPLETED" and not (tools.sandbox / "a.txt").exists()
    # Denied by alice over REST: one allowed deny denies.
    task, denied = _paused(carol, "delete b.txt")
    assert _rest_vote(proc, "tok-alice", denied, "deny", "b.txt is still needed").status_code == 200
    assert "rejected" in str(_finished(carol, task)) and (tools.sandbox / "b.txt").exists()
    # A write approved for the session over A2A, then the same write again: it runs under the grant.
    task, session = _paused(carol, "write hello to c.txt")
    assert state(carol.send(data=wire.approve_all(scope="session"), task=task)["task"]) == "TASK_STATE_COMPLETED"
    again = carol.send("write hello to c.txt", context_id=task["contextId"])["task"]
    assert state(again) == "TASK_STATE_COMPLETED"
    # A write whose task carol cancels.
    task, canceled = _paused(carol, "write bye to d.txt")
    assert carol.call("CancelTask", {"id": task["id"]})["result"]["status"]["state"] == "TASK_STATE_CANCELED"
    # The first deletion times out (20s after it was asked for).
    assert "timeout" in str(_finished(carol, late, 90)) and (tools.sandbox / "late.txt").exists()
    return {"late": late_id, "both": both, "denied": denied, "session": session, "canceled": canceled}


def _export(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*GATEHOUSE_CMD, "audit", "export", *args], capture_output=True, text=True, timeout=120)


def _who_decided_what(entries: list[AuditEntry]) -> dict[str, tuple[str, str, str, str]]:
    final = ("decided", "timed_out", "canceled", "granted")
    return {e.request_id: (e.event, e.principal, e.channel, e.outcome) for e in entries if e.event in final}


def test_the_export_reproduces_who_decided_what(day: Day, tmp_path: Path) -> None:
    done = _export("--url", day.proc.url, "--token", "tok-ivy", "--since", day.since, "--format", "jsonl")
    assert done.returncode == 0, done.stderr
    entries = read_jsonl(done.stdout)
    assert f"exported {len(entries)} entries" in done.stderr
    r = day.requests
    granted = next(e.request_id for e in entries if e.event == "granted")
    assert _who_decided_what(entries) == {
        r["both"]: ("decided", "carol, alice", "rest", "approved"),
        r["denied"]: ("decided", "alice", "rest", "denied"),
        r["session"]: ("decided", "carol", "a2a", "approved"),
        granted: ("granted", "carol", "grant", "approved"),
        r["canceled"]: ("canceled", "carol", "cancel", "denied"),
        r["late"]: ("timed_out", INTERNAL, "timeout", "expired"),
    }
    votes = [(e.request_id, e.principal, e.channel, e.outcome, e.counted) for e in entries if e.event == "voted"]
    assert votes == [
        (r["both"], "carol", "a2a", "approve", True), (r["both"], "alice", "rest", "approve", True),
        (r["denied"], "alice", "rest", "deny", True), (r["session"], "carol", "a2a", "approve", True),
    ]
    life = {rid: [e.event for e in entries if e.request_id == rid] for rid in [*r.values(), granted]}
    assert life == {
        r["late"]: ["requested", "timed_out"],
        r["both"]: ["requested", "voted", "voted", "decided", "started", "executed"],
        r["denied"]: ["requested", "voted", "decided"],
        r["session"]: ["requested", "voted", "decided", "started", "executed"],
        granted: ["granted", "executed"],
        r["canceled"]: ["requested", "canceled"],
    }
    by_id = {(e.request_id, e.event): e for e in entries}
    assert by_id[r["both"], "requested"].rule == DELETE_RULE and by_id[r["session"], "requested"].rule == WRITE_RULE
    assert by_id[granted, "granted"].rule == WRITE_RULE and "session grant" in by_id[granted, "granted"].reason
    assert by_id[r["denied"], "decided"].reason == "b.txt is still needed"
    assert all(by_id[rid, "executed"].outcome == "ran" for rid in (r["both"], r["session"], granted))
    assert {e.agent for e in entries} == {"file-manager"} and {e.requested_by for e in entries} == {"carol"}
    assert by_id[r["session"], "decided"].args_hash == by_id[granted, "granted"].args_hash  # the same call, approved once
    assert entries == sorted(entries, key=lambda e: e.at)
    # CSV says the same; so does the database read directly (the runtime's state directory).
    out = tmp_path / "day.csv"
    done = _export("--url", day.proc.url, "--since", day.since, "--format", "csv", "-o", str(out), "--token", "tok-ivy")
    assert done.returncode == 0, done.stderr
    assert out.read_text().splitlines()[0].startswith("id,at,event,agent,request_id")
    assert read_csv(out.read_text()) == entries
    done = _export("--state-dir", str(day.state_dir), "--agent", "file-manager", "--since", day.since)
    assert done.returncode == 0, done.stderr
    assert read_jsonl(done.stdout) == entries


def test_only_auditors_read_it_filters_and_pages(day: Day) -> None:
    url = f"{day.proc.url}/audit"
    assert httpx.get(url).status_code == 401
    assert httpx.get(url, headers={"Authorization": "Bearer tok-alice"}).status_code == 403
    denied = _export("--url", day.proc.url, "--token", "tok-mallory")
    assert denied.returncode == 2 and "403" in denied.stderr and "spec.audit.auditors" in denied.stderr
    ivy = httpx.Client(headers={"Authorization": "Bearer tok-ivy"}, timeout=60)
    everything = AuditPage.model_validate_json(ivy.get(url, params={"limit": "1000"}).content).entries
    paged, cursor = [], None
    while True:
        params = {"limit": "4", **({"cursor": cursor} if cursor else {})}
        page = AuditPage.model_validate_json(ivy.get(url, params=params).content)
        paged += page.entries
        if not (cursor := page.next_cursor):
            break
    assert paged == everything
    alice = AuditPage.model_validate_json(ivy.get(url, params={"principal": "alice"}).content).entries
    assert [(e.event, e.request_id) for e in alice] == [
        ("voted", day.requests["both"]), ("voted", day.requests["denied"]), ("decided", day.requests["denied"])]
    writes = AuditPage.model_validate_json(ivy.get(url, params={"tool": "write_file"}).content).entries
    assert {e.tool for e in writes} == {"write_file"} and len({e.request_id for e in writes}) == 3
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        assert ivy.request(method, url).status_code == 405


def test_each_wait_is_an_opentelemetry_span(day: Day) -> None:
    def spans() -> dict[str, dict[str, Any]]:
        found = {}
        for delivery in day.spans.at("/v1/traces"):
            request = ExportTraceServiceRequest.FromString(delivery.body)
            for resource in request.resource_spans:
                for scope in resource.scope_spans:
                    for span in scope.spans:
                        attrs = {a.key: getattr(a.value, a.value.WhichOneof("value")) for a in span.attributes}
                        found[attrs["gatehouse.approval.request_id"]] = {"name": span.name, **attrs}
        return found

    r = day.requests
    got = wait_for(lambda: (s := spans()) and len(s) >= 5 and s, 30)
    assert set(got) == set(r.values())  # the granted call did not wait: no span
    assert {rid: (s["gatehouse.approval.outcome"], s["gatehouse.approval.channel"]) for rid, s in got.items()} == {
        r["both"]: ("approved", "rest"), r["denied"]: ("denied", "rest"), r["session"]: ("approved", "a2a"),
        r["canceled"]: ("denied", "cancel"), r["late"]: ("expired", "timeout"),
    }
    assert got[r["late"]]["gatehouse.approval.wait_seconds"] >= 20 and {s["name"] for s in got.values()} == {
        "gatehouse.approval.wait"}
