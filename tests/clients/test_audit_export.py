"""``gatehouse audit export`` (audit_export.py): formats that read back to the same entries, progress on long
exports, and one-line errors for options that cannot work."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent_runtime.approvals.audit import MAX_PAGE, AuditEntry
from agent_runtime.clients.audit_export import export, make_filters, read_csv, read_jsonl
from agent_runtime.clients.cli import app


def entry(n: int) -> AuditEntry:
    return AuditEntry(id=f"v{n}", at=f"2026-11-02T00:00:{n % 60:02d}.000000Z", event="voted", agent="a", request_id=f"apr-{n}",
                      principal="alice, bob" if n % 2 else 'o"neil', channel="rest", outcome="approve", counted=n % 3 == 0,
                      reason="line one\nline two, with a comma", wait_seconds=None)


async def pages_of(*sizes: int) -> AsyncIterator[list[AuditEntry]]:
    n = 0
    for size in sizes:
        yield [entry(n + i) for i in range(size)]
        n += size


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
async def test_each_format_reads_back_to_the_same_entries_and_long_exports_say_how_far(fmt: str) -> None:
    out, said = io.StringIO(), []
    count = await export(pages_of(MAX_PAGE, MAX_PAGE, 7), fmt, out, progress=said.append)  # type: ignore[arg-type]
    assert count == 2 * MAX_PAGE + 7
    back = read_csv(out.getvalue()) if fmt == "csv" else read_jsonl(out.getvalue())
    assert back == [entry(n) for n in range(count)]
    assert said == [f"{MAX_PAGE} entries so far (up to {entry(MAX_PAGE - 1).at})",
                    f"{2 * MAX_PAGE} entries so far (up to {entry(2 * MAX_PAGE - 1).at})"]


async def test_an_empty_log_exports_a_header_only() -> None:
    out = io.StringIO()
    assert await export(pages_of(0), "csv", out) == 0
    assert out.getvalue().startswith("id,at,event,agent,request_id,") and out.getvalue().count("\n") == 1


def test_filters_take_dates_times_and_durations() -> None:
    f = make_filters(since="2026-11-01", until="1h", agent=None, tool="t", principal=None, requested_by=None, event="voted",
                     now=1_800_000_000.0)
    assert (f.since, f.until) == (1_793_491_200.0, 1_799_996_400.0)
    assert f.params() == {"since": "2026-11-01T00:00:00.000000Z", "until": "2027-01-15T07:00:00.000000Z", "tool": "t",
                          "event": "voted"}


@pytest.mark.parametrize(("args", "error"), [
    ([], "give one source"),
    (["--url", "http://x", "--state-dir", "."], "give one source"),
    (["--state-dir", "a", "--database-url", "sqlite:///b"], "give one source"),
    (["--url", "http://x", "--format", "xml"], "--format must be jsonl or csv"),
    (["--url", "http://x", "--event", "deleted"], "--event must be one of"),
    (["--url", "http://x", "--since", "last week"], "invalid time 'last week'"),
    (["--state-dir", "/nonexistent/state"], "no runtime state in /nonexistent/state"),
    (["--url", "http://127.0.0.1:9"], "http://127.0.0.1:9/audit: ConnectError"),
])
def test_options_that_cannot_work_are_one_line_errors(args: list[str], error: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["audit", "export", *args])
    assert result.exit_code == 2 and error in result.output, result.output
