"""``GET /audit`` (rest/audit.py) in-process: only auditors read it, every parameter is checked, nothing but GET
is routed, pages reproduce the whole stream, and the retention loop prunes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware

from agent_runtime.access.authenticator import Authenticator
from agent_runtime.access.methods import TokenFileMethod
from agent_runtime.access.middleware import RequirePrincipal
from agent_runtime.access.tokens import parse_tokens
from agent_runtime.approvals import ApprovalService, Resolution
from agent_runtime.approvals.audit import AuditPage, AuditQuery
from agent_runtime.contract.agent_config import AuditConfig, AuditorsConfig
from agent_runtime.infra.database import Database, default_database_url
from agent_runtime.rest.audit import AuditApi, parse_query
from tests.approvals.test_audit import DAY, Clock, record

TOKENS = "ivy:tok-ivy\nola:groups=compliance,sre:tok-ola\nmallory:groups=sre:tok-mallory\n"
AUDITORS = AuditorsConfig(users=["ivy"], groups=["compliance"])


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    database = Database(default_database_url(tmp_path))
    service = ApprovalService(database, clock=Clock(DAY + 100))
    await service.create_tables()
    await service.add_pending([record(f"apr-{i}", f"t{i}", DAY + i) for i in range(5)], {"apr-0": "spec.approval.rules[0]"})
    for i in range(3):
        await service.decide(f"t{i}", {f"apr-{i}": Resolution("expired", "timeout")}, "timeout")
    yield database
    await database.dispose()


def client(api: AuditApi, token: str | None) -> httpx.AsyncClient:
    authenticator = Authenticator([TokenFileMethod(parse_tokens(TOKENS, "nobody"))])
    app = Starlette(routes=api.routes, middleware=[Middleware(RequirePrincipal, authenticator=authenticator)])
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1", headers=headers)


async def test_only_auditors_read_it(db: Database) -> None:
    api = AuditApi(AuditConfig(auditors=AUDITORS), db=db, agent="file-manager")
    async with client(api, None) as anonymous:
        assert (await anonymous.get("/audit")).status_code == 401
    async with client(api, "tok-mallory") as mallory:
        reply = await mallory.get("/audit")
        assert reply.status_code == 403 and "mallory is not an auditor" in reply.json()["error"]
    for token in ("tok-ivy", "tok-ola"):  # by name, by group
        async with client(api, token) as auditor:
            page = AuditPage.model_validate_json((await auditor.get("/audit")).content)
            assert [e.event for e in page.entries] == ["requested"] * 5 + ["timed_out"] * 3 and page.next_cursor is None
            assert page.entries[0].rule == "spec.approval.rules[0]" and page.entries[0].agent == "file-manager"
    nobody = AuditApi(AuditConfig(), db=db, agent="file-manager")  # no auditors named: nobody reads it over the API
    async with client(nobody, "tok-ivy") as ivy:
        assert (await ivy.get("/audit")).status_code == 403


async def test_parameters_paging_and_no_method_but_get(db: Database) -> None:
    api = AuditApi(AuditConfig(auditors=AUDITORS), db=db, agent="file-manager")
    async with client(api, "tok-ivy") as ivy:
        everything = AuditPage.model_validate_json((await ivy.get("/audit")).content).entries
        paged, cursor = [], None
        while True:
            params = {"limit": "3", **({"cursor": cursor} if cursor else {})}
            page = AuditPage.model_validate_json((await ivy.get("/audit", params=params)).content)
            paged += page.entries
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        assert paged == everything
        one = await ivy.get("/audit", params={"request_id": "apr-1", "event": "timed_out", "tool": "delete_file",
                                              "requested_by": "carol", "principal": "gatehouse:internal",
                                              "since": "2026-11-02", "until": "2026-11-03T00:00:00Z"})
        assert [e.id for e in AuditPage.model_validate_json(one.content).entries] == [everything[6].id]
        other = await ivy.get("/audit", params={"agent": "another-agent"})
        assert other.status_code == 200 and AuditPage.model_validate_json(other.content).entries == []
        for params, error in (({"princpal": "alice"}, "unknown parameter 'princpal'"), ({"limit": "0"}, "limit must be"),
                              ({"limit": "many"}, "limit must be"), ({"event": "deleted"}, "event must be one of"),
                              ({"since": "last tuesday"}, "invalid time"), ({"cursor": "abc"}, "not a cursor")):
            reply = await ivy.get("/audit", params=params)
            assert reply.status_code == 422 and error in reply.json()["error"], (params, reply.text)
        for method in ("POST", "PUT", "PATCH", "DELETE"):
            assert (await ivy.request(method, "/audit", json={"entries": []})).status_code == 405
        assert (await ivy.delete(f"/audit/{everything[0].id}")).status_code == 404
    assert [r.methods for r in api.routes] == [{"GET", "HEAD"}]


def test_parse_query_reads_durations_back_from_now() -> None:
    query, cursor, limit, agent = parse_query({"since": "1h", "limit": "5", "agent": "a"}, now=10_000.0)
    assert (query, cursor, limit, agent) == (AuditQuery(since=6_400.0), None, 5, "a")


async def test_the_retention_loop_prunes(db: Database) -> None:
    clock = Clock(DAY + 100 + 4)  # requests at DAY+0..4, timeouts at DAY+100: a 4s retention keeps the newest
    api = AuditApi(AuditConfig(auditors=AUDITORS, retention_seconds=4.0), db=db, agent="a", clock=clock)
    assert api.retention._interval == 1.0
    await api.start()
    try:
        for _ in range(100):
            left = await api.log.entries()
            if len(left) == 5:
                break
            await asyncio.sleep(0.05)
        # The decided requests' requested events are gone; the pending requests' stay, however old.
        assert [e.event for e in left] == ["requested"] * 2 + ["timed_out"] * 3
        assert [e.request_id for e in await api.log.entries(AuditQuery(event="requested"))] == ["apr-3", "apr-4"]
    finally:
        await api.stop()
