"""Approved calls after a quiet spell, against the real demo-tools server: none may fail because the server closed
an idle HTTP connection, and none may run twice.

The bench saw every in-flight ``delete_file`` of a round fail with "Connection closed" after the runtime sat idle
about as long as uvicorn's keep-alive (5 s, httpx's default expiry too): a request written to a pooled connection
just as the server closed it fails, and the MCP SDK then ended the whole session, failing every call on it. That
race is made deterministic here: the real ``demo-tools`` app runs under uvicorn with a 2 s keep-alive behind
:class:`LateFinProxy`, which tells the runtime that the server closed a connection only when the next request
arrives on it (as if the server's close and the request crossed), and drops that request unsent.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_runtime.app.factory import Runtime, build_app
from agent_runtime.app.settings import RuntimeSettings
from agent_runtime.approvals.audit import AuditLog, AuditQuery
from agent_runtime.contract import wire
from agent_runtime.contract.manifests import select_agent_config
from agent_runtime.rest.settings import RestSettings
from agent_runtime.server import toolsets
from tests.support.inprocess import InProcessApp
from tests.support.processes import free_port, running
from tests.support.runtime import Tools, request_ids, state, status_text, write_manifests

pytestmark = pytest.mark.e2e

KEEP_ALIVE = 2.0  # the tools server's (uvicorn's timeout_keep_alive): shorter than httpx's default expiry (5 s)
UNKNOWN = "whether the server acted on it is unknown"

SERVE = """
import asyncio, sys
from pathlib import Path
import uvicorn
from agent_runtime.clients.demo_tools import build_app

async def main(sandbox, journal, port, keep_alive):
    config = uvicorn.Config(build_app(Path(sandbox), Path(journal)), host="127.0.0.1", port=port, log_level="warning",
                            lifespan="on", timeout_keep_alive=keep_alive)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.02)
    print("demo-tools ready", flush=True)
    await task

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])))
"""


class LateFinProxy:
    """TCP to the tools server; once the server has closed a connection, the runtime learns it only from its next
    request on it, which is dropped (never forwarded) and answered by closing the connection."""

    def __init__(self, port: int) -> None:
        self.upstream = port
        self.dropped = 0  # requests written to a connection the server had closed

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[int]:
        server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        try:
            yield server.sockets[0].getsockname()[1]
        finally:
            server.close()

    async def _relay(self, client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter) -> None:
        server_in, server_out = await asyncio.open_connection("127.0.0.1", self.upstream)
        server_closed = asyncio.Event()

        async def down() -> None:
            try:
                while data := await server_in.read(65536):
                    client_out.write(data)
                    await client_out.drain()
            except OSError:
                pass
            server_closed.set()  # not passed on: the runtime's next request finds out

        relay_down = asyncio.create_task(down())
        try:
            while data := await client_in.read(65536):
                if server_closed.is_set():
                    self.dropped += 1
                    break
                server_out.write(data)
                await server_out.drain()
        except OSError:
            pass
        finally:
            relay_down.cancel()
            client_out.close()
            server_out.close()


@contextmanager
def tools_server(base: Path) -> Iterator[tuple[Tools, int]]:
    sandbox, journal = base / "sandbox", base / "journal.jsonl"
    sandbox.mkdir(parents=True)
    port = free_port()
    with running([sys.executable, "-c", SERVE, str(sandbox), str(journal), str(port), str(KEEP_ALIVE)], "demo-tools ready"):
        yield Tools(f"http://127.0.0.1:{port}/mcp", sandbox, journal), port


@asynccontextmanager
async def runtime_behind_proxy(base: Path) -> AsyncIterator[tuple[InProcessApp, LateFinProxy]]:
    with tools_server(base / "tools") as (tools, port):
        proxy = LateFinProxy(port)
        async with proxy.serving() as proxy_port:
            config = select_agent_config(write_manifests(base / "m", f"http://127.0.0.1:{proxy_port}/mcp"))
            starlette = build_app(RuntimeSettings(config=config, state_dir=base / "state", rest=RestSettings()))
            runtime: Runtime = starlette.state.runtime
            async with starlette.router.lifespan_context(starlette):
                while not runtime.ready:
                    await asyncio.sleep(0.05)
                transport = httpx.ASGITransport(app=starlette)
                async with httpx.AsyncClient(
                    transport=transport, base_url="http://127.0.0.1", headers={"A2A-Version": "1.0"}, timeout=60
                ) as client:
                    yield InProcessApp(client, runtime, tools), proxy


async def paused_deletes(app: InProcessApp, names: list[str]) -> list[dict[str, Any]]:
    for name in names:
        (app.tools.sandbox / name).write_text("x")
    return [(await app.send(f"delete {name}"))["task"] for name in names]


async def approve_at_once(app: InProcessApp, tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r["task"] for r in await asyncio.gather(*(app.send(data=wire.approve_all(), task=t) for t in tasks))]


async def quiet_spell_then_rounds(
    app: InProcessApp, first: int, second: int
) -> tuple[list[str], list[dict[str, Any]], list[dict[str, Any]]]:
    """``first`` approvals at once, a quiet spell past the server's keep-alive, ``second`` approvals at once: the
    files, their paused tasks and their finished tasks."""
    names = [f"f{i}.txt" for i in range(first + second)]
    paused = await paused_deletes(app, names)  # pausing calls no tool: nothing goes to the tools server
    done = await approve_at_once(app, paused[:first])
    await asyncio.sleep(KEEP_ALIVE + 0.5)  # every pooled connection is now one the server has closed
    done += await approve_at_once(app, paused[first:])
    assert {state(t) for t in done} == {"TASK_STATE_COMPLETED"}
    return names, paused, done


@pytest.fixture(autouse=True)
def _no_client_certificate(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_API_USE_CLIENT_CERTIFICATE", "false")  # as `gatehouse-runtime serve` does


async def test_approved_calls_after_a_quiet_spell_longer_than_the_servers_keep_alive_all_run_once(tmp_path: Path) -> None:
    async with runtime_behind_proxy(tmp_path) as (app, proxy):
        names, _, done = await quiet_spell_then_rounds(app, 10, 10)
        replies = [status_text(t) for t in done]
        assert [r for r in replies if "deleted" not in r] == []
        assert [len(app.tools.executions("delete_file", n)) for n in names] == [1] * len(names)
        assert proxy.dropped == 0  # no request was written to a connection the server had closed


async def test_a_connection_closed_as_a_call_goes_out_fails_that_call_alone_and_it_is_not_sent_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A server (or a proxy on the way) that closes idle connections sooner than this client expires them.
    monkeypatch.setattr(toolsets, "KEEPALIVE_SECONDS", 60.0, raising=False)
    async with runtime_behind_proxy(tmp_path) as (app, proxy):
        names, paused, done = await quiet_spell_then_rounds(app, 5, 10)  # 5 pooled connections, each found closed once
        failed = {n for n, t in zip(names, done, strict=True) if UNKNOWN in status_text(t)}
        assert 1 <= len(failed) == proxy.dropped < 10  # one failure per dropped request: no other call failed with it
        for name, task in zip(names, done, strict=True):
            ran = len(app.tools.executions("delete_file", name))
            if name in failed:  # the model and the user are told the outcome is unknown; it was not sent again
                assert ran == 0 and (app.tools.sandbox / name).exists(), name
                assert "MCP tool execution failed: the connection to the MCP server failed after the request was sent" \
                    in status_text(task)
            else:
                assert ran == 1 and f"Delete of {name}: deleted /{name}" in status_text(task), status_text(task)
        executed = {e.request_id: e.outcome for e in await AuditLog(app.runtime.db).entries(AuditQuery(event="executed"))}
        by_request = {request_ids(t)[0]: n for n, t in zip(names, paused, strict=True)}
        assert {by_request[r]: o for r, o in executed.items()} == {n: "unknown" if n in failed else "ran" for n in names}
