"""A runtime app served in-process (httpx ASGI transport) with raw JSON-RPC helpers, for tests that also
reach into the :class:`~agent_runtime.app.factory.Runtime` (internal decisions, restarts, the mirror)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import httpx

from agent_runtime.app.factory import Runtime, build_app
from agent_runtime.app.settings import RuntimeSettings
from agent_runtime.contract.manifests import select_agent_config
from agent_runtime.rest.settings import RestSettings
from tests.support.runtime import Tools, demo_tools, write_manifests


class InProcessApp:
    def __init__(self, client: httpx.AsyncClient, runtime: Runtime, tools: Tools) -> None:
        self.client, self.runtime, self.tools = client, runtime, tools

    async def send(
        self, text: str | None = None, data: Any = None, task: dict[str, Any] | None = None, context_id: str | None = None
    ) -> dict[str, Any]:
        """``SendMessage`` with a text and/or one data part, on ``task`` (its id and context) or in ``context_id``."""
        return (await self.send_reply(text, data, task, context_id))["result"]

    async def send_reply(
        self, text: str | None = None, data: Any = None, task: dict[str, Any] | None = None, context_id: str | None = None
    ) -> dict[str, Any]:
        """:meth:`send`'s whole JSON-RPC reply: ``{"result": …}``, or ``{"error": …}`` (e.g. -32004, a finished task)."""
        parts: list[dict[str, Any]] = ([{"text": text}] if text else []) + ([{"data": data}] if data is not None else [])
        message: dict[str, Any] = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": parts}
        if task:
            message["taskId"], message["contextId"] = task["id"], task["contextId"]
        elif context_id:
            message["contextId"] = context_id
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
        reply: dict[str, Any] = (await self.client.post("/", json=body)).json()
        return reply

    async def get(self, task_id: str) -> dict[str, Any]:
        body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task_id}}
        return (await self.client.post("/", json=body)).json()["result"]


App = TypeVar("App", bound=InProcessApp)


@asynccontextmanager
async def served(
    base: Path, rest: RestSettings | None = None, app_type: type[App] = InProcessApp, **approval: Any  # type: ignore[assignment]
) -> AsyncIterator[App]:
    """The example agent (``approval``: its spec.approval fields) with real demo tools, served in-process once ready.
    Set ``GOOGLE_API_USE_CLIENT_CERTIFICATE=false`` first, as ``gatehouse-runtime serve`` does."""
    with demo_tools(base / "tools") as tools:
        config = select_agent_config(write_manifests(base / "m", tools.url, **approval))
        starlette = build_app(RuntimeSettings(config=config, state_dir=base / "state", rest=rest or RestSettings()))
        runtime: Runtime = starlette.state.runtime
        async with starlette.router.lifespan_context(starlette):
            while not runtime.ready:
                await asyncio.sleep(0.05)
            transport = httpx.ASGITransport(app=starlette)
            headers = {"A2A-Version": "1.0"}
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", headers=headers) as client:
                yield app_type(client, runtime, tools)
