"""The plain-ADK baseline: what a user would build without Gatehouse, served as its own process.

The same agent as ``examples/file-manager`` (the Scripted model from its ModelConfig, via the translator) on the
same demo-tools MCP server, gated with ADK's own tool confirmation and served with ADK's own ``to_a2a``:

    LlmAgent(ScriptedLlm, McpToolset[delete_file, write_file](require_confirmation=True) + McpToolset[list_dir, read_file])
      └─ Runner(DatabaseSessionService sqlite | InMemorySessionService)
           └─ to_a2a(agent, runner=..., task_store=DatabaseTaskStore sqlite | InMemoryTaskStore)   one uvicorn worker

A pause is ADK's ``adk_request_confirmation`` long-running call, which ``to_a2a`` maps to
``TASK_STATE_INPUT_REQUIRED``; a client resumes it with a data part holding a ``function_response`` for that call
(see ``bench/protocols.py``). The durable mode creates the A2A tasks table at start-up (a fresh database otherwise
races on "table tasks already exists"). A ``before_model_callback`` counts model calls, served as JSON at
``GET /bench/model-calls`` so the driver can compute model calls per approved call.

    python -m bench.adk_baseline --tools-url http://127.0.0.1:8765/mcp --port 8000 --state-dir D [--in-memory]
"""

from __future__ import annotations

import argparse
import asyncio
import re
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "file-manager"
GATED = ("delete_file", "write_file")
MODEL_CALLS_PATH = "/bench/model-calls"
READY = "adk-baseline ready:"


class ModelCallCounter:
    """A ``before_model_callback`` that only counts (returns ``None``: the model is still called)."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, callback_context: Any, llm_request: Any) -> None:
        self.count += 1
        return None


def build_app(tools_url: str, port: int, state_dir: Path | None) -> Any:
    """The Starlette app: ADK ``to_a2a`` over the example agent; durable on sqlite unless ``state_dir`` is None."""
    from google.adk.a2a.utils.agent_to_a2a import to_a2a
    from google.adk.agents import LlmAgent
    from google.adk.runners import Runner
    from google.adk.sessions import DatabaseSessionService, InMemorySessionService
    from google.adk.tools.mcp_tool import McpToolset, StreamableHTTPConnectionParams
    from starlette.requests import Request
    from starlette.responses import JSONResponse

    from agent_runtime.contract.manifests import select_agent_config
    from agent_runtime.models.factory import build_model

    cfg = select_agent_config([EXAMPLE / "agent.yaml", EXAMPLE / "modelconfig.yaml", EXAMPLE / "mcp-server.yaml"])
    server = cfg.mcp_servers[0]
    names = list(server.tool_names)
    # The RemoteMCPServer's timeout (30 s in the example), as Gatehouse gets it; ADK's default is 5 s.
    params = StreamableHTTPConnectionParams(url=tools_url, timeout=server.timeout_seconds)
    gated = McpToolset(connection_params=params, tool_filter=[n for n in names if n in GATED], require_confirmation=True)
    free = McpToolset(connection_params=params, tool_filter=[n for n in names if n not in GATED])
    counter = ModelCallCounter()
    agent = LlmAgent(
        name=re.sub(r"\W", "_", cfg.name),
        description=cfg.description,
        instruction=cfg.instruction,
        model=build_model(cfg.model),
        tools=[gated, free],
        before_model_callback=counter,
    )

    engine = None
    if state_dir is None:
        from a2a.server.tasks import InMemoryTaskStore

        sessions: Any = InMemorySessionService()
        task_store: Any = InMemoryTaskStore()
    else:
        from a2a.server.tasks import DatabaseTaskStore
        from sqlalchemy.ext.asyncio import create_async_engine

        state_dir.mkdir(parents=True, exist_ok=True)
        # One sqlite file per store, as each store is documented on its own.
        sessions = DatabaseSessionService(db_url=f"sqlite+aiosqlite:///{(state_dir / 'sessions.db').resolve()}")
        engine = create_async_engine(f"sqlite+aiosqlite:///{(state_dir / 'tasks.db').resolve()}")
        task_store = DatabaseTaskStore(engine)
    runner = Runner(app_name=agent.name, agent=agent, session_service=sessions)

    @asynccontextmanager
    async def lifespan(app: Any):
        if engine is not None:
            await task_store.initialize()  # create the tasks table before the first concurrent requests
        try:
            yield
        finally:
            await gated.close()
            await free.close()
            await runner.close()
            if engine is not None:
                await engine.dispose()

    app = to_a2a(agent, host="127.0.0.1", port=port, runner=runner, task_store=task_store, lifespan=lifespan)

    async def model_calls(request: Request) -> JSONResponse:
        return JSONResponse({"model_calls": counter.count})

    app.add_route(MODEL_CALLS_PATH, model_calls, methods=["GET"])
    return app


async def _serve(args: argparse.Namespace) -> None:
    import uvicorn

    app = build_app(args.tools_url, args.port, None if args.in_memory else Path(args.state_dir))
    server = uvicorn.Server(uvicorn.Config(
        app, host="127.0.0.1", port=args.port, log_level="warning", workers=1,
        loop="asyncio", http="h11",  # what `pip install google-adk` serves with (no uvloop/httptools), as before
    ))
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            await task
            raise SystemExit(1)
        await asyncio.sleep(0.02)
    mode = "in-memory" if args.in_memory else f"sqlite in {Path(args.state_dir).resolve()}"
    print(f"{READY} http://127.0.0.1:{args.port} ({mode})", flush=True)
    await task


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools-url", required=True, help="the demo-tools MCP endpoint, e.g. http://127.0.0.1:8765/mcp")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--state-dir", default=".bench-state/adk", help="where the sqlite database lives (durable mode)")
    parser.add_argument("--in-memory", action="store_true", help="InMemorySessionService + InMemoryTaskStore")
    args = parser.parse_args(argv)
    try:
        asyncio.run(_serve(args))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
