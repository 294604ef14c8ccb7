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
Everything above those is durability, the gate, and the glue between the libraries.

**Composed, not each alone in a loop.** The floors are measured on pairs made of the libraries alone, in the order a
pause and a resume use them (a2a-sdk request, ADK pause turn; a2a-sdk reply, ADK resume turn, MCP call), so each
library's code runs once per pair between the others', as in Gatehouse or any server built on them. On this kind of
machine a library called in a tight loop is far cheaper than the same library called once every few milliseconds:
one MCP ``tools/call`` measured 1.8-2.0 ms back to back and 3.6-4.8 ms with 15 ms between calls, slept or spent on
other work, its client's CPU per call doubling with it (1.1 -> 2.2 ms); the a2a-sdk round trips and ADK turns move
the same way (2026-11-26: tight 3.8 / 6.0 ms, composed 5.3 / 8.6 ms). A floor only a tight loop reaches would count
that machine effect as Gatehouse's. Each round also measures every library alone in a tight loop (``tight``: the
same keys), printed beside the composed floors as the best case.

Bar 1 compares Gatehouse's own pause and resume with the composed floors under the same conditions: given ``ours``
(the bench passes rounds of sequential pause+approve pairs on a Gatehouse server of its own,
``scenarios.PairRounds``), each round ends with that many Gatehouse pairs, so the floors and Gatehouse take turns
through the section, each warm, none beside other servers at work (the latency section's interleaving with the ADK
targets costs each of them CPU caches: a comparison table, not a floor's conditions).
``decisions_per_second_ceiling`` is what one process (one core) could decide if a decision cost only the libraries'
CPU: the a2a-sdk server's per request, the ADK resume turn (in memory it is all CPU) and the MCP client's per call,
from the composed pairs. Each round gives a ceiling; ``decisions_per_second_ceiling`` is their median (shown, and
bar 2's denominator for results without the held section's own), ``decisions_per_second_ceiling_rounds`` each
round's, ``decisions_per_second_ceiling_pooled`` the same sum over every round at once. The floors are p50s over
every round. Bar 2 judges the ceiling rounds the held section measures right beside its own
(:meth:`Libraries.ceiling_round`, the same composed pairs): the floors run minutes before it, and the machine's speed
drifts.

    python -m bench.floors --serve-a2a --port 8000      # the do-nothing a2a-sdk server (the bench starts it)
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil

from agent_runtime.clients.cli import GC_THRESHOLDS
from bench.protocols import Protocol, send_message
from bench.scenarios import client, percentile, split_rounds
from bench.targets import ADK_CARD as AGENT_CARD
from bench.targets import Target, ToolsServer, running

__all__ = ["Libraries", "libraries", "measure"]

OURS_WARMUP = 20  # unrecorded pairs before ``ours``' first round: its server is fresh (lazy imports, first statements)


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
    from agent_runtime.clients.cli import _settle_heap

    app = _build_a2a_app()
    _settle_heap()  # the runtime's garbage-collector settings: a floor is what the libraries cost at best
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def _ms(seconds: list[float], q: float = 50) -> float:
    return round(percentile(seconds, q) * 1000, 2)


def cpu_reader(pid: int) -> Callable[[], float]:
    """A function reading the CPU seconds ``pid`` has used so far: the sum of its threads' run time in Linux's
    ``/proc/PID/task/*/schedstat`` (nanoseconds), where the kernel keeps it; psutil's user + system time (10 ms ticks,
    too coarse for a round of a few dozen requests) elsewhere. The source is chosen once, so deltas never mix them."""

    def schedstat() -> float:
        total = 0
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
            except FileNotFoundError:  # a thread that ended meanwhile
                continue
        return total / 1e9

    try:
        if schedstat() > 0:
            return schedstat
    except (OSError, ValueError, IndexError):
        pass
    process = psutil.Process(pid)
    return lambda: float(sum(process.cpu_times()[:2]))


@dataclass
class _A2aFloorTarget(Target):
    """The do-nothing a2a-sdk server, started and stopped like the measured targets (``targets.running``)."""

    key: str = "a2a_floor"
    label: str = "a2a-sdk floor"
    protocol: Protocol = "gatehouse"  # unused: the floor is driven by plain messages (``_a2a_round``)
    ready_path: str = AGENT_CARD

    def command(self, port: int, state_dir: Path, tools_url: str, work: Path) -> list[str]:
        return [sys.executable, "-m", "bench.floors", "--serve-a2a", "--port", str(port)]

    async def model_calls(self, http: httpx.AsyncClient, url: str) -> float | None:
        return None


@dataclass
class _Samples:
    """One part's samples in one round (or all rounds pooled): seconds of each step, and the CPU of the measured ones."""

    first: list[float] = field(default_factory=list)  # a2a pause / ADK pause turn / MCP call
    second: list[float] = field(default_factory=list)  # a2a reply / ADK resume turn
    cpu: float = 0.0  # the a2a server's / the MCP client's CPU seconds over the measured steps
    count: int = 0  # requests (a2a: two per iteration) or calls the CPU was spent on

    def add(self, other: _Samples) -> None:
        self.first += other.first
        self.second += other.second
        self.cpu += other.cpu
        self.count += other.count


def _a2a_message(message_id: str, text: str, task: Mapping[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]}
    if task is not None:
        message.update(taskId=task["id"], contextId=task["contextId"])
    return message


def _check_a2a(task: Mapping[str, Any], state: str) -> None:
    if task["status"]["state"] != state:
        raise RuntimeError(f"a2a-sdk floor server answered {task['status']}, not {state}")


async def _a2a_round(http: httpx.AsyncClient, url: str, cpu: Callable[[], float], start: int, count: int,
                     warmup: int) -> _Samples:
    out = _Samples()
    before = cpu()
    for i in range(start, start + warmup + count):
        if i == start + warmup:
            before = cpu()
        begin = time.perf_counter()
        task = await send_message(http, url, _a2a_message(f"p{i}", "hello"))
        paused = time.perf_counter()
        done = await send_message(http, url, _a2a_message(f"r{i}", "ok", task))
        end = time.perf_counter()
        _check_a2a(task, "TASK_STATE_INPUT_REQUIRED")
        _check_a2a(done, "TASK_STATE_COMPLETED")
        if i >= start + warmup:
            out.first.append(paused - begin)
            out.second.append(end - paused)
    out.cpu, out.count = cpu() - before, 2 * count
    return out


class _AdkTurns:
    """google-adk's Runner, in-memory session, the Scripted model and ADK's own confirmation on a local function: the
    turn that pauses conversation ``i`` (:meth:`pause`: its seconds, and what the resume needs) and the turn that
    resumes it (:meth:`resume`: the confirmation answered, the function run, the model's answer); :attr:`ran` lists
    the function's runs, :attr:`expected` what they should be."""

    def __init__(self) -> None:
        from google.adk.agents import LlmAgent
        from google.adk.runners import Runner
        from google.adk.sessions import InMemorySessionService
        from google.adk.tools import FunctionTool

        from agent_runtime.contract.agent_config import ScriptedModel, ScriptedRule, ScriptedToolCall
        from agent_runtime.models.scripted import ScriptedLlm

        self.ran: list[str] = []
        self.expected: list[str] = []

        def touch(path: str) -> str:
            """Pretend to touch a file."""
            self.ran.append(path)
            return f"touched {path}"

        script = ScriptedModel(model="floor", rules=[
            ScriptedRule(match=r"^touch (?P<path>\S+)", tool_calls=[ScriptedToolCall(name="touch", args={"path": "{path}"})],
                         reply="{result}"),
        ])
        agent = LlmAgent(name="floor", model=ScriptedLlm.from_config(script), instruction="Answer.",
                         tools=[FunctionTool(touch, require_confirmation=True)])
        self._sessions = InMemorySessionService()
        self._runner = Runner(app_name="floor", agent=agent, session_service=self._sessions)

    async def _run(self, session_id: str, parts: list[Any]) -> list[Any]:
        from google.genai import types

        content = types.Content(role="user", parts=parts)
        return [e async for e in self._runner.run_async(user_id="u", session_id=session_id, new_message=content)]

    async def pause(self, i: int) -> tuple[float, tuple[str, str]]:
        from google.genai import types

        session = await self._sessions.create_session(app_name="floor", user_id="u")
        start = time.perf_counter()
        events = await self._run(session.id, [types.Part(text=f"touch f{i}")])
        seconds = time.perf_counter() - start
        asks = [c for e in events for c in e.get_function_calls() if c.name == "adk_request_confirmation"]
        if len(asks) != 1:
            raise RuntimeError(f"ADK did not ask for one confirmation: {events}")
        self.expected.append(f"f{i}")
        return seconds, (session.id, asks[0].id)

    async def resume(self, paused: tuple[str, str]) -> float:
        from google.genai import types

        session_id, ask_id = paused
        answer = types.FunctionResponse(name="adk_request_confirmation", id=ask_id, response={"confirmed": True})
        start = time.perf_counter()
        await self._run(session_id, [types.Part(function_response=answer)])
        return time.perf_counter() - start


@contextlib.contextmanager
def _runtime_gc() -> Iterator[None]:
    """The runtime's garbage-collector settings (``cli._settle_heap``: start-up frozen, the young generation every
    ``GC_THRESHOLDS[0]`` allocations), for the parts of a round that stand for the runtime's own process."""
    threshold = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()


async def _adk_round(turns: _AdkTurns, start: int, count: int, warmup: int) -> _Samples:
    out = _Samples()
    with _runtime_gc():
        for i in range(start, start + warmup + count):
            pause_s, paused = await turns.pause(i)
            resume_s = await turns.resume(paused)
            if i >= start + warmup:
                out.first.append(pause_s)
                out.second.append(resume_s)
    return out


async def _mcp_call(session: Any) -> tuple[float, float]:
    """One ``tools/call``: its seconds, and the client's CPU seconds over it."""
    cpu, begin = time.process_time(), time.perf_counter()
    await session.call_tool("read_file", {"path": "floor.txt"})
    return time.perf_counter() - begin, time.process_time() - cpu


async def _mcp_round(session: Any, count: int, warmup: int) -> _Samples:
    out = _Samples()
    for i in range(warmup + count):
        seconds, cpu = await _mcp_call(session)
        if i >= warmup:
            out.first.append(seconds)
            out.cpu += cpu
    out.count = count
    return out


async def _composed_round(http: httpx.AsyncClient, url: str, cpu: Callable[[], float], turns: _AdkTurns, session: Any,
                          start: int, count: int) -> tuple[_Samples, _Samples, _Samples]:
    """``count`` pause+resume pairs made of the libraries alone, in the order a pause and a resume use them: a2a-sdk
    request, ADK pause turn; a2a-sdk reply, ADK resume turn, MCP call. Each library's code runs once per pair,
    between the others', as in any server built on them (see the module docstring)."""
    a2a, adk, mcp = _Samples(), _Samples(), _Samples()
    before = cpu()
    with _runtime_gc():
        for i in range(start, start + count):
            begin = time.perf_counter()
            task = await send_message(http, url, _a2a_message(f"cp{i}", "hello"))
            a2a.first.append(time.perf_counter() - begin)
            _check_a2a(task, "TASK_STATE_INPUT_REQUIRED")
            pause_s, paused = await turns.pause(i)
            adk.first.append(pause_s)
            begin = time.perf_counter()
            done = await send_message(http, url, _a2a_message(f"cr{i}", "ok", task))
            a2a.second.append(time.perf_counter() - begin)
            _check_a2a(done, "TASK_STATE_COMPLETED")
            adk.second.append(await turns.resume(paused))
            seconds, call_cpu = await _mcp_call(session)
            mcp.first.append(seconds)
            mcp.cpu += call_cpu
    a2a.cpu, a2a.count, mcp.count = cpu() - before, 2 * count, count
    return a2a, adk, mcp


def ceiling(a2a: _Samples, adk: _Samples, mcp: _Samples) -> float:
    """Decisions/s one process could reach on the libraries' CPU alone: 1000 / (the a2a-sdk server's CPU per request +
    the ADK resume turn p50 + the MCP client's CPU per call), in ms."""
    return round(1000 / (a2a.cpu / a2a.count * 1000 + _ms(adk.second) + mcp.cpu / mcp.count * 1000), 1)


def _summary(parts: Mapping[str, _Samples], ceilings: list[float]) -> dict[str, Any]:
    """The floors of one way of measuring (composed or tight), pooled over its rounds."""
    a2a, adk, mcp = parts["a2a"], parts["adk"], parts["mcp"]
    out_a2a = {"pause_ms": _ms(a2a.first), "reply_ms": _ms(a2a.second),
               "server_cpu_ms_per_request": round(a2a.cpu / a2a.count * 1000, 2)}
    out_adk = {"pause_turn_ms": _ms(adk.first), "resume_turn_ms": _ms(adk.second)}
    out_mcp = {"call_ms": _ms(mcp.first), "client_cpu_ms_per_call": round(mcp.cpu / mcp.count * 1000, 2)}
    return {
        "a2a": out_a2a, "adk": out_adk, "mcp": out_mcp,
        "pause_floor_ms": round(out_a2a["pause_ms"] + out_adk["pause_turn_ms"], 2),
        "resume_floor_ms": round(out_a2a["reply_ms"] + out_adk["resume_turn_ms"] + out_mcp["call_ms"], 2),
        "decisions_per_second_ceiling": round(statistics.median(ceilings), 1),
        "decisions_per_second_ceiling_rounds": ceilings,
        "decisions_per_second_ceiling_pooled": round(1000 / (out_a2a["server_cpu_ms_per_request"]
                                                             + out_adk["resume_turn_ms"] + out_mcp["client_cpu_ms_per_call"]), 1),
    }


@dataclass
class Libraries:
    """The libraries alone, running: the do-nothing a2a-sdk server (``url``, its CPU ``cpu``), google-adk's turns and
    an MCP session on the run's demo tools; ``start`` numbers the next conversation (each used once)."""

    http: httpx.AsyncClient
    url: str
    cpu: Callable[[], float]
    turns: _AdkTurns
    session: Any
    start: int = 0

    async def composed(self, count: int) -> tuple[_Samples, _Samples, _Samples]:
        """One round of ``count`` composed pairs (:func:`_composed_round`); :func:`ceiling` of it is that round's
        ceiling. The one way both the floors and the held section (:meth:`ceiling_round`) measure it."""
        pairs = await _composed_round(self.http, self.url, self.cpu, self.turns, self.session, self.start, count)
        self.start += count
        return pairs

    async def ceiling_round(self, count: int, warmup: int = 0) -> float:
        """The ceiling of one round of ``count`` composed pairs, after ``warmup`` unrecorded ones."""
        if warmup:
            await self.composed(warmup)
        return ceiling(*await self.composed(count))


@contextlib.asynccontextmanager
async def libraries(tools: ToolsServer, work: Path, name: str = "a2a-floor") -> AsyncIterator[Libraries]:
    """:class:`Libraries` for the block: the a2a-sdk floor server started (stopped after), a fresh ADK runner, an HTTP
    client and an MCP session; on leaving, checks ADK ran the confirmed function once per resumed turn."""
    from mcp import Client

    tools.touch(["floor.txt"])
    turns = _AdkTurns()
    with running(_A2aFloorTarget(), work, tools.url, name) as a2a_server:
        async with client() as http, Client(tools.url) as session:
            yield Libraries(http, a2a_server.url + "/", cpu_reader(a2a_server.pid), turns, session)
    if turns.ran != turns.expected:
        raise RuntimeError(f"the confirmed tool did not run once per turn: {turns.ran[:5]}...")


async def measure(tools: ToolsServer, work: Path, iterations: int, warmup: int, rounds: int = 1,
                  ours: Callable[[int, int], Awaitable[None]] | None = None) -> dict[str, Any]:
    """The composed floors (bar 1's floors and bar 2's ceiling) and, under ``tight``, the same from each library
    alone in a loop (see the module docstring).

    ``iterations`` are split into ``rounds``; each round runs a2a-sdk, google-adk and the MCP client each in a tight
    loop (the warm-up before the first), then the composed pairs, then ``ours(count, warmup)`` when given, so a slow
    stretch of the machine falls on one round of all of them. The floors are the p50s over every round; the ceilings
    the median of the rounds' ceilings (shown; bar 2 judges the ceilings the held section measures beside its rounds,
    :meth:`Libraries.ceiling_round`, when a result has them)."""
    counts = split_rounds(iterations, rounds)
    kinds = ("a2a", "adk", "mcp")
    tight: dict[str, _Samples] = {k: _Samples() for k in kinds}
    composed: dict[str, _Samples] = {k: _Samples() for k in kinds}
    tight_ceilings: list[float] = []
    composed_ceilings: list[float] = []
    async with libraries(tools, work) as libs:
        for r, count in enumerate(counts):
            warm = warmup if r == 0 else 0
            loops = (await _a2a_round(libs.http, libs.url, libs.cpu, libs.start, count, warm),
                     await _adk_round(libs.turns, libs.start, count, warm),
                     await _mcp_round(libs.session, count, warm))
            libs.start += warm + count
            pairs = await libs.composed(count)
            if ours is not None:
                await ours(count, max(warm, OURS_WARMUP) if r == 0 else 0)
            tight_ceilings.append(ceiling(*loops))
            composed_ceilings.append(ceiling(*pairs))
            for key, loop, pair in zip(kinds, loops, pairs, strict=True):
                tight[key].add(loop)
                composed[key].add(pair)
    return {**_summary(composed, composed_ceilings), "rounds": len(counts), "tight": _summary(tight, tight_ceilings)}


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
