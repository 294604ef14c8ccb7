"""``gatehouse audit export``: the audit log as JSON lines or CSV, from a runtime's ``GET /audit`` or its database.

Two sources, the same entries (:class:`~agent_runtime.approvals.audit.AuditEntry`, parsed by the one model):

- a runtime's URL (``--url``, with an auditor's bearer token): the clean way; the runtime checks the auditor;
- its database (``--state-dir`` or ``--database-url``): for a runtime that is stopped or gone, by whoever can
  read the file (which holds everything anyway).

Pages of 1,000 entries are written as they arrive, so a long export holds one page in memory; progress goes to
stderr once an export passes a page, and a summary line at the end.
"""

from __future__ import annotations

import csv
import io
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TextIO

import httpx

from agent_runtime.approvals.audit import (
    EVENTS,
    FIELDS,
    MAX_PAGE,
    AuditEntry,
    AuditLog,
    AuditPage,
    AuditQuery,
    csv_row,
    iso_micro,
    parse_time,
)
from agent_runtime.infra.database import default_database_url

Format = Literal["jsonl", "csv"]


class ExportError(Exception):
    """The export cannot go on; ``str(exc)`` says why in one line."""


@dataclass(frozen=True)
class Filters:
    """What to export: times as epoch seconds, the rest as ``GET /audit`` takes them."""

    since: float | None = None
    until: float | None = None
    agent: str | None = None
    tool: str | None = None
    principal: str | None = None
    requested_by: str | None = None
    event: str | None = None

    def params(self) -> dict[str, str]:
        times = {k: iso_micro(v) for k, v in (("since", self.since), ("until", self.until)) if v is not None}
        words = {k: v for k, v in (("agent", self.agent), ("tool", self.tool), ("principal", self.principal),
                                   ("requested_by", self.requested_by), ("event", self.event)) if v is not None}
        return {**times, **words}

    def query(self) -> AuditQuery:
        return AuditQuery(since=self.since, until=self.until, tool=self.tool, principal=self.principal,
                          requested_by=self.requested_by, event=self.event)


def make_filters(*, since: str | None, until: str | None, agent: str | None, tool: str | None, principal: str | None,
                 requested_by: str | None, event: str | None, now: float) -> Filters:
    """The command's options as :class:`Filters`; ``ValueError`` names a time or an event that cannot be used."""
    if event is not None and event not in EVENTS:
        raise ValueError(f"--event must be one of {', '.join(EVENTS)}, not {event!r}")
    return Filters(since=parse_time(since, now) if since else None, until=parse_time(until, now) if until else None,
                   agent=agent, tool=tool, principal=principal, requested_by=requested_by, event=event)


def pages(*, url: str | None, token: str | None, state_dir: Path | None, database_url: str | None, agent: str | None,
          filters: Filters) -> AsyncIterator[list[AuditEntry]]:
    """The pages of the one source given: a runtime's URL, its state directory or its database URL."""
    if (url is None) == (state_dir is None and database_url is None) or (state_dir is not None and database_url):
        raise ValueError("give one source: --url (a running runtime), --state-dir or --database-url")
    if url is not None:
        return from_url(url, token, filters)
    if state_dir is not None and not (state_dir / "gatehouse.db").is_file():
        raise FileNotFoundError(f"no runtime state in {state_dir} (gatehouse.db)")
    return from_database(database_url or default_database_url(state_dir or Path(".")), agent or "", filters)


async def from_url(url: str, token: str | None, filters: Filters) -> AsyncIterator[list[AuditEntry]]:
    """Pages of ``GET {url}/audit``."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(base_url=url.rstrip("/"), headers=headers, timeout=60) as client:
        cursor: str | None = None
        while True:
            params = {**filters.params(), "limit": str(MAX_PAGE), **({"cursor": cursor} if cursor else {})}
            try:
                reply = await client.get("/audit", params=params)
            except httpx.HTTPError as exc:
                raise ExportError(f"{url}/audit: {type(exc).__name__}: {exc}") from None
            if reply.status_code != 200:
                raise ExportError(f"{url}/audit answered {reply.status_code}: {_error_of(reply)}")
            page = AuditPage.model_validate_json(reply.content)
            yield page.entries
            if page.next_cursor is None:
                return
            cursor = page.next_cursor


def _error_of(reply: httpx.Response) -> str:
    try:
        error = reply.json().get("error")
    except ValueError:
        error = None
    hint = {401: " (give an auditor's token: --token or $GATEHOUSE_TOKEN)",
            403: " (the token's principal is not in the Agent's spec.audit.auditors)"}.get(reply.status_code, "")
    return f"{error or reply.text[:200]}{hint}"


async def from_database(database_url: str, agent: str, filters: Filters) -> AsyncIterator[list[AuditEntry]]:
    """Pages read from the runtime's database directly (``agent``: the name the entries carry)."""
    from agent_runtime.infra.database import Database  # (the engine's own imports only when a database is read)

    if filters.agent is not None and filters.agent != agent:
        return
    db = Database(database_url)
    try:
        audit = AuditLog(db, agent)
        cursor: str | None = None
        while True:
            try:
                page = await audit.page(filters.query(), cursor, MAX_PAGE)
            except Exception as exc:  # no such table, no such file: the database is not a runtime's
                raise ExportError(f"cannot read the audit log from {database_url}: {type(exc).__name__}: {exc}") from None
            yield page.entries
            if page.next_cursor is None:
                return
            cursor = page.next_cursor
    finally:
        await db.dispose()


async def export(pages: AsyncIterator[list[AuditEntry]], fmt: Format, out: TextIO,
                 progress: Callable[[str], None] = lambda _: None) -> int:
    """Write every entry of ``pages`` to ``out`` (CSV with a header row); returns how many were written."""
    writer = csv.writer(out, lineterminator="\n") if fmt == "csv" else None
    if writer is not None:
        writer.writerow(FIELDS)
    count = 0
    async for entries in pages:
        for entry in entries:
            if writer is not None:
                writer.writerow(csv_row(entry))
            else:
                out.write(entry.model_dump_json() + "\n")
        count += len(entries)
        if len(entries) == MAX_PAGE:  # a full page: more may follow
            progress(f"{count} entries so far (up to {entries[-1].at})")
    out.flush()
    return count


def read_jsonl(text: str) -> list[AuditEntry]:
    """Entries back from a JSON-lines export."""
    return [AuditEntry.model_validate_json(line) for line in text.splitlines() if line.strip()]


def read_csv(text: str) -> list[AuditEntry]:
    """Entries back from a CSV export (empty cells: the field's default)."""
    rows = list(csv.DictReader(io.StringIO(text, newline="")))  # a quoted cell may hold line breaks
    entries = []
    for row in rows:
        values: dict[str, object] = {k: v for k, v in row.items() if v != ""}
        if "counted" in values:
            values["counted"] = values["counted"] == "true"
        entries.append(AuditEntry.model_validate(values))
    return entries


__all__ = [
    "ExportError", "Filters", "Format", "export", "from_database", "from_url", "make_filters", "pages", "read_csv", "read_jsonl",
]
