"""Library floors: what the stack costs on this machine before Gatehouse does anything of its own.

A pause or a resume can never be cheaper than the libraries it runs through, so each run of the bench measures
them alone, with the same client, scripted model and demo-tools server as the targets:

- ``a2a``: an a2a-sdk 1.x JSON-RPC server (served like the runtime: uvicorn, one worker) whose executor does
  nothing but answer: a new message gets ``input-required``, a reply on that task ``completed``. In-memory
  task store. Round trip p50 of each, and the server's CPU per request.
- ``adk``: google-adk's ``Runner`` in this process, in-memory session, the Scripted model, ADK's own confirmation
  on a local function: the turn that pauses (one model call, the confirmation asked) and the turn that resumes
  (the confirmation answered, the function run, the model's answer). p50 of each.
- ``mcp``: one ``tools/call`` on the demo-tools server with the MCP SDK's streamable HTTP client, p50, and the
  client's CPU per call.

``pause_floor_ms`` = a2a pause + ADK pause turn; ``resume_floor_ms`` = a2a reply + ADK resume turn + MCP call.
Everything above those is durability, the gate, and the glue between the libraries. ``decisions_per_second_ceiling``
is what one process (one core) could decide if a decision cost only the libraries' CPU: the a2a-sdk server's per
request, the ADK resume turn (in memory it is all CPU) and the MCP client's per call.

    python -m bench.floors --serve-a2a --port 8000      # the do-nothing a2a-sdk server (the bench starts it)
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil

from bench.protocols import Protocol, send_message
from bench.scenarios import client, percentile
from bench.targets import ADK_CARD as AGENT_CARD
from bench.targets import Target, ToolsServer, running

__all__ = ["measure"]


def _build_a2a_app() -> Any:
    from a2a.helpers import new_task_from_user_message
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.events import EventQueue
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
    from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
    from a2a.types import AgentCapabilities, AgentCard, AgentInterface
    from starlette.applications import Starlette

    class Answering(AgentExecutor):
        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
            if context.current_task is None and context.message is not None:
                await event_queue.enqueue_event(new_task_from_user_message(context.message))
                await updater.requires_input()
            else:
                await updater.complete()

        async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
            return None

    card = AgentCard(
        name="a2a-floor", description="answers at once", version="1", capabilities=AgentCapabilities(streaming=False),
        supported_interfaces=[AgentInterface(url="http://127.0.0.1/", protocol_binding="JSONRPC")],
        default_input_modes=["text"], default_output_modes=["text"],
    )
    handler = DefaultRequestHandler(agent_executor=Answering(), task_store=InMemoryTaskStore(), agent_card=card)
    return Starlette(routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, rpc_url="/")])


def serve_a2a(port: int) -> None:
    # As the runtime is served (cli.serve): no a2a-sdk spans without a tracer (read when a2a-sdk is imported).
    os.environ.setdefault("OTEL_INSTRUMENTATION_A2A_SDK_ENABLED", "false")
    import uvicorn

    import agent_runtime.app.factory  # noqa: F401  # before a2a-sdk's server: imported without grpc, as the runtime does
    from agent_runtime.cli import _settle_heap

    app = _build_a2a_app()
    _settle_heap()  # the runtime's garbage-collector settings: a floor is what the libraries cost at best
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


async def _timed(step: Callable[[int], Awaitable[Any]], iterations: int, warmup: int) -> list[float]:
    seconds = []
    for i in range(warmup + iterations):
        start = time.perf_counter()
        await step(i)
        if i >= warmup:
            seconds.append(time.perf_counter() - start)
    return seconds


def _ms(seconds: list[float], q: float = 50) -> float:
    return round(percentile(seconds, q) * 1000, 2)


@dataclass
class _A2aFloorTarget(Target):
    """The do-nothing a2a-sdk server, started and stopped like the measured targets (``targets.running``)."""

    key: str = "a2a_floor"
    label: str = "a2a-sdk floor"
    protocol: Protocol = "gatehouse"  # unused: the floor is driven by plain messages (``_a2a``)
    ready_path: str = AGENT_CARD

    def command(self, port: int, state_dir: Path, tools_url: str, work: Path) -> list[str]:
        return [sys.executable, "-m", "bench.floors", "--serve-a2a", "--port", str(port)]

    async def model_calls(self, http: httpx.AsyncClient, url: str) -> float | None:
        return None


async def _a2a(tools: ToolsServer, work: Path, iterations: int, warmup: int) -> dict[str, Any]:
    with running(_A2aFloorTarget(), work, tools.url, "a2a-floor") as target:
        url = target.url + "/"
        server = psutil.Process(target.pid)
        pauses: list[float] = []
        replies: list[float] = []
        async with client() as http:
            cpu_before = sum(server.cpu_times()[:2])
            for i in range(warmup + iterations):
                msg = {"messageId": f"p{i}", "role": "ROLE_USER", "parts": [{"text": "hello"}]}
                start = time.perf_counter()
                task = await send_message(http, url, msg)
                paused = time.perf_counter()
                reply = {"messageId": f"r{i}", "role": "ROLE_USER", "parts": [{"text": "ok"}],
                         "taskId": task["id"], "contextId": task["contextId"]}
                done = await send_message(http, url, reply)
                end = time.perf_counter()
                if task["status"]["state"] != "TASK_STATE_INPUT_REQUIRED" or done["status"]["state"] != "TASK_STATE_COMPLETED":
                    raise RuntimeError(f"a2a-sdk floor server answered {task['status']} then {done['status']}")
                if i >= warmup:
                    pauses.append(paused - start)
                    replies.append(end - paused)
            cpu = sum(server.cpu_times()[:2]) - cpu_before
    requests = 2 * (warmup + iterations)
    return {"pause_ms": _ms(pauses), "reply_ms": _ms(replies), "server_cpu_ms_per_request": round(cpu / requests * 1000, 2)}


async def _adk(iterations: int, warmup: int) -> dict[str, Any]:
    from google.adk.agents import LlmAgent
    from google.adk.runners import Runner
    from google.adk.sessions import InMemorySessionService
    from google.adk.tools import FunctionTool
    from google.genai import types

    from agent_runtime.agent_config import ScriptedModel, ScriptedRule, ScriptedToolCall
    from agent_runtime.models.scripted import ScriptedLlm

    ran: list[str] = []

    def touch(path: str) -> str:
        """Pretend to touch a file."""
        ran.append(path)
        return f"touched {path}"

    script = ScriptedModel(model="floor", rules=[
        ScriptedRule(match=r"^touch (?P<path>\S+)", tool_calls=[ScriptedToolCall(name="touch", args={"path": "{path}"})],
                     reply="{result}"),
    ])
    agent = LlmAgent(name="floor", model=ScriptedLlm.from_config(script), instruction="Answer.",
                     tools=[FunctionTool(touch, require_confirmation=True)])
    sessions = InMemorySessionService()
    runner = Runner(app_name="floor", agent=agent, session_service=sessions)

    async def run(session_id: str, parts: list[types.Part]) -> list[Any]:
        content = types.Content(role="user", parts=parts)
        return [e async for e in runner.run_async(user_id="u", session_id=session_id, new_message=content)]

    pauses: list[float] = []
    resumes: list[float] = []

    async def pause_and_resume(i: int) -> None:
        session = await sessions.create_session(app_name="floor", user_id="u")
        start = time.perf_counter()
        events = await run(session.id, [types.Part(text=f"touch f{i}")])
        paused = time.perf_counter()
        asks = [c for e in events for c in e.get_function_calls() if c.name == "adk_request_confirmation"]
        if len(asks) != 1:
            raise RuntimeError(f"ADK did not ask for one confirmation: {events}")
        answer = types.FunctionResponse(name="adk_request_confirmation", id=asks[0].id, response={"confirmed": True})
        start_resume = time.perf_counter()
        await run(session.id, [types.Part(function_response=answer)])
        end = time.perf_counter()
        if i >= warmup:
            pauses.append(paused - start)
            resumes.append(end - start_resume)

    threshold = gc.get_threshold()
    gc.collect()
    gc.freeze()  # the runtime's garbage-collector settings (cli._settle_heap), for this part only
    gc.set_threshold(10_000, 10, 10)
    try:
        for i in range(warmup + iterations):
            await pause_and_resume(i)
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()
    if ran != [f"f{i}" for i in range(warmup + iterations)]:
        raise RuntimeError(f"the confirmed tool did not run once per turn: {ran[:5]}...")
    return {"pause_turn_ms": _ms(pauses), "resume_turn_ms": _ms(resumes)}


async def _mcp(tools: ToolsServer, iterations: int, warmup: int) -> dict[str, Any]:
    from mcp import Client

    tools.touch(["floor.txt"])
    async with Client(tools.url) as session:
        cpu_before = time.process_time()
        seconds = await _timed(lambda i: session.call_tool("read_file", {"path": "floor.txt"}), iterations, warmup)
        cpu = time.process_time() - cpu_before
    return {"call_ms": _ms(seconds), "client_cpu_ms_per_call": round(cpu / (warmup + iterations) * 1000, 2)}


async def measure(tools: ToolsServer, work: Path, iterations: int, warmup: int) -> dict[str, Any]:
    """The three floors and the pause/resume floors they add up to (see the module docstring)."""
    a2a = await _a2a(tools, work, iterations, warmup)
    adk = await _adk(iterations, warmup)
    mcp = await _mcp(tools, iterations, warmup)
    return {
        "a2a": a2a, "adk": adk, "mcp": mcp,
        "pause_floor_ms": round(a2a["pause_ms"] + adk["pause_turn_ms"], 2),
        "resume_floor_ms": round(a2a["reply_ms"] + adk["resume_turn_ms"] + mcp["call_ms"], 2),
        "decisions_per_second_ceiling": round(
            1000 / (a2a["server_cpu_ms_per_request"] + adk["resume_turn_ms"] + mcp["client_cpu_ms_per_call"]), 1),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.floors", description=__doc__.splitlines()[0])
    p.add_argument("--serve-a2a", action="store_true", help="serve the do-nothing a2a-sdk server")
    p.add_argument("--port", type=int, default=8000)
    args = p.parse_args(argv)
    if not args.serve_a2a:
        p.error("nothing to do: the bench measures the floors itself (python -m bench.run); --serve-a2a serves one")
    serve_a2a(args.port)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
