"""The runtime's readiness when its database goes bad after start-up (:class:`DatabaseWatch`): what the Agent's
``RuntimeReady`` reads (``Runtime.readiness``), with nobody probing ``/readyz``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent_runtime.app.factory import Runtime, build_app
from agent_runtime.app.readiness import STOPPING, DatabaseWatch, tools_unreachable
from agent_runtime.app.settings import RuntimeSettings
from agent_runtime.contract.manifests import select_agent_config
from tests.support.runtime import demo_tools, write_manifests


async def test_the_watch_reports_a_problem_once_and_clears_when_it_is_gone() -> None:
    problems: list[str | None] = ["the database file /x was removed or replaced", None]
    calls = 0

    async def check() -> str | None:
        nonlocal calls
        calls += 1
        return problems[0]

    watch = DatabaseWatch(check, max_age=60.0)
    fault = await watch.refresh()
    assert fault is not None and (fault.ready, fault.reason) == (False, "DatabaseUnavailable")
    assert fault.message == "the database file /x was removed or replaced"
    problems.pop(0)
    assert await watch.refresh() is fault and calls == 1  # within max_age: the last answer
    assert await watch.refresh(max_age=0.0) is None and watch.fault is None and calls == 2


@pytest.fixture
async def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Runtime]:
    monkeypatch.setenv("GOOGLE_API_USE_CLIENT_CERTIFICATE", "false")
    with demo_tools(tmp_path / "tools") as tools:
        config = select_agent_config(write_manifests(tmp_path / "m", tools.url))
        app = build_app(RuntimeSettings(config=config, state_dir=tmp_path / "state"))
        runtime: Runtime = app.state.runtime
        async with app.router.lifespan_context(app):
            while not runtime.ready:
                await asyncio.sleep(0.05)
            yield runtime


@pytest.mark.e2e
async def test_a_removed_database_shows_in_the_runtimes_readiness_without_a_probe(runtime: Runtime, tmp_path: Path) -> None:
    database = tmp_path / "state" / "gatehouse.db"
    for file in database.parent.glob("gatehouse.db*"):
        file.unlink()
    for _ in range(60):  # the watch checks every 2 s
        if not runtime.readiness.ready:
            break
        await asyncio.sleep(0.1)
    readiness = runtime.readiness
    assert (readiness.ready, readiness.reason) == (False, "DatabaseUnavailable")
    assert str(database) in readiness.message and runtime.problems == [readiness.message]
    runtime.readiness = tools_unreachable("x")  # a later stage does not hide it…
    assert runtime.readiness.reason == "DatabaseUnavailable"
    runtime.readiness = STOPPING  # …but stopping is said as such
    assert runtime.readiness is STOPPING
