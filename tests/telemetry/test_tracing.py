"""Approval waits as OpenTelemetry spans (tracing.py): on only when asked, one span per decided wait with its
outcome, channel and wait, none for a call run under a grant, and nothing of the SDK imported while off."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agent_runtime.approvals import ApprovalService, Resolution
from agent_runtime.approvals.grants import Grant
from agent_runtime.contract.authority import Vote
from agent_runtime.infra.database import Database, default_database_url
from agent_runtime.telemetry import tracing
from tests.approvals.test_audit import DAY, ROOT, Clock, record


def test_tracing_is_on_with_the_flag_or_an_endpoint_and_off_when_the_sdk_is_disabled() -> None:
    assert not tracing.enabled(False, {})
    assert tracing.enabled(True, {})
    assert tracing.enabled(False, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})
    assert tracing.enabled(False, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"})
    assert not tracing.enabled(True, {"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"})


async def test_each_decided_wait_is_one_span_with_outcome_channel_and_wait(tmp_path: Path) -> None:
    db = Database(default_database_url(tmp_path))
    clock = Clock(DAY)
    service = ApprovalService(db, clock=clock)
    await service.create_tables()
    exporter = InMemorySpanExporter()
    spans = tracing.start("file-manager", exporter)
    service.events.subscribe(spans.on_approval_event)
    await service.add_pending([record("apr-1", "t1", DAY, owner="alice"), record("apr-2", "t2", DAY)])
    clock.now = DAY + 12.5
    await service.vote("t1", {"apr-1": Vote("alice", frozenset(), "approve", "", "rest", "alice")})
    clock.now = DAY + 900
    await service.decide("t2", {"apr-2": Resolution("expired", "timeout")}, "timeout")
    grant = Grant("g1", "ctx-t1", "carol", "files", "delete_file", None, "path", "*", "", "alice", "apr-1", DAY, DAY + 3600)
    await service.record_granted(grant, task_id="t1", call_id="c9", tool="delete_file", server="files",
                                 args={"path": "z"}, hint="h")
    got = sorted(exporter.get_finished_spans(), key=lambda s: s.attributes["gatehouse.approval.request_id"])  # type: ignore[index]
    assert [s.name for s in got] == [tracing.SPAN_NAME] * 2  # the granted call did not wait: no span
    first, second = (dict(s.attributes or {}) for s in got)
    assert first == {
        "gatehouse.agent": "file-manager", "gatehouse.approval.request_id": "apr-1", "gatehouse.task.id": "t1",
        "gatehouse.approval.tool": "delete_file", "gatehouse.approval.outcome": "approved",
        "gatehouse.approval.channel": "rest", "gatehouse.approval.wait_seconds": 12.5,
    }
    assert (second["gatehouse.approval.outcome"], second["gatehouse.approval.channel"]) == ("expired", "timeout")
    assert got[0].start_time == int(DAY * 1e9) and got[0].end_time == int((DAY + 12.5) * 1e9)
    assert got[0].resource.attributes["service.name"] == "gatehouse-file-manager"
    spans.shutdown()
    await db.dispose()


def test_off_by_default_nothing_of_the_sdk_is_imported(tmp_path: Path) -> None:
    """The app with tracing off imports neither the OpenTelemetry SDK nor the exporter, and subscribes no span listener."""
    script = f"""
import sys
from pathlib import Path
from agent_runtime.app.factory import build_app
from agent_runtime.app.settings import RuntimeSettings
from tests.support.configs import files_config
app = build_app(RuntimeSettings(config=files_config(), state_dir=Path({str(tmp_path)!r})))
listeners = app.state.runtime.approvals.events._listeners
assert not [x for x in listeners if 'ApprovalSpans' in repr(x)], listeners
loaded = [m for m in sys.modules if m.startswith(('opentelemetry.sdk', 'opentelemetry.exporter'))]
assert not loaded, loaded
print('ok')
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "ok", done.stderr[-3000:]
    on = script.replace("state_dir=", "otel=True, state_dir=").replace("assert not [x", "assert [x").replace(
        "assert not loaded", "assert loaded")
    done = subprocess.run([sys.executable, "-c", on], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "ok", done.stderr[-3000:]


def test_without_the_exporter_the_flag_fails_and_an_endpoint_alone_warns(tmp_path: Path) -> None:
    """``serve --otel`` needs the otel extra; an OTLP endpoint a cluster sets for every pod must not stop the runtime."""
    script = """
import sys
sys.modules['opentelemetry.exporter.otlp.proto.http'] = None  # as if the otel extra were not installed
from agent_runtime.clients import cli
from agent_runtime.telemetry import tracing
assert not tracing.exporter_installed()
import os
os.environ['OTEL_EXPORTER_OTLP_ENDPOINT'] = 'http://collector:4318'
print(cli._otel(False))
try:
    cli._otel(True)
except cli.typer.Exit as exc:
    sys.exit(exc.exit_code)
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "False" and done.returncode == 2, done
    assert "approval spans are off" in done.stderr and "--otel: the OTLP exporter is not installed" in done.stderr
