"""``--real-model``: Gatehouse's pause and resume with a real model behind the gate, each split into the model's
time and the rest, to put the gate's share next to a real model's.

The model is the one ``make e2e-llm`` verifies and serves (``tests/e2e_llm/``): Qwen2.5-Coder-1.5B-Instruct Q4_K_M
on llama-server (127.0.0.1, 2 threads, greedy), reached like any OpenAI-compatible server: a ModelConfig
``provider: OpenAI`` with its ``baseUrl``, through LiteLLM. Without the model, the server or the ``litellm`` extra
the row says why and the rest of the bench runs as before.

Per conversation: ``delete real-<i>.txt`` (the pause: one model call), then ``approve`` (the resume: the tool runs,
then one model call for the reply). **Model** is what llama-server itself counts as spent on the request's model
calls (prompt reading plus generation, its ``/metrics`` counters read before and after); **rest** is the request's
wall time minus that: Gatehouse (gate, durable stores, A2A), ADK, LiteLLM and HTTP to the model, and on resume the
MCP tool call. One unrecorded warm-up conversation first: it reads the agent's whole prompt (~1,800 tokens, ~26 s
here) into the server's cache, which every later conversation shares up to its own message.
"""

from __future__ import annotations

import importlib.util
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench.gatehouse_adapter import availability, parse_metric
from bench.protocols import Protocol, StepError, approve, pause
from bench.scenarios import journal_runs, stats
from bench.targets import Target, running, tools_server

__all__ = ["measure", "not_run", "rows"]


def not_run(reason: str) -> dict[str, Any]:
    return {"available": False, "reason": reason}


@dataclass
class RealModelTarget(Target):
    """``gatehouse-runtime serve`` with the example Agent and a ModelConfig for the local OpenAI-compatible server."""

    key: str = "gatehouse_real_model"
    label: str = "Gatehouse, real model"
    protocol: Protocol = "gatehouse"
    ready_path: str = "/readyz"
    base_url: str = ""

    def command(self, port: int, state_dir: Path, tools_url: str, work: Path) -> list[str]:
        from tests.e2e_llm.agent import agent_manifests

        files = agent_manifests(work / "manifests", tools_url, self.base_url)
        cmd = [*availability().executable, "serve", "--port", str(port), "--state-dir", str(state_dir), "--host", "127.0.0.1"]
        return cmd + [arg for f in files for arg in ("-f", str(f))]

    async def model_calls(self, http: httpx.AsyncClient, url: str) -> float | None:
        response = await http.get(url + "/metrics")
        return parse_metric(response.text, "gatehouse_model_calls_total") if response.status_code == 200 else None


def _missing() -> str | None:
    from tests.e2e_llm.llama import missing

    why = missing()
    if why is not None:
        return f"not run: {why} (`make e2e-llm` fetches and builds both)"
    if importlib.util.find_spec("litellm") is None:
        return "not run: the litellm extra is not installed (pip install -e '.[litellm]')"
    if not availability().ok:
        return availability().reason
    return None


def _split(wall: list[float], model: list[float]) -> dict[str, Any]:
    return {"wall_ms": stats(wall), "model_ms": stats(model), "rest_ms": stats([w - m for w, m in zip(wall, model, strict=True)])}


async def measure(work: Path, iterations: int) -> dict[str, Any]:
    """The row's numbers (``available`` False and a ``reason`` when it cannot run here). Its own demo-tools server,
    llama-server and runtime, under ``work/real-model``."""
    reason = _missing()
    if reason is not None:
        return not_run(reason)
    from tests.e2e_llm.llama import ALIAS, llama_server

    work = work / "real-model"
    work.mkdir(parents=True, exist_ok=True)
    names = [f"real-{i}.txt" for i in range(iterations + 1)]
    walls: dict[str, list[float]] = {"pause": [], "resume": []}
    models: dict[str, list[float]] = {"pause": [], "resume": []}
    errors: list[str] = []
    with tools_server(work) as tools, llama_server(work / "llama-server.log") as llm, \
            running(RealModelTarget(base_url=llm.base_url), work, tools.url, "runtime", timeout=180) as server:
        tools.touch(names)
        async with httpx.AsyncClient(timeout=900) as http:
            calls_before: float | None = None
            for i, name in enumerate(names):
                if i == 1:
                    calls_before = await server.target.model_calls(http, server.url)
                try:
                    before = llm.model_seconds()
                    paused = await pause(http, server.endpoint, f"delete {name}")
                    between = llm.model_seconds()
                    resumed = await approve(http, server.endpoint, paused)
                    after = llm.model_seconds()
                except StepError as exc:
                    errors.append(f"{name}: {exc}")
                    continue
                if i == 0:
                    continue  # the warm-up: it fills the server's prompt cache
                walls["pause"].append(paused.seconds)
                walls["resume"].append(resumed)
                models["pause"].append(between - before)
                models["resume"].append(after - between)
            calls_after = await server.target.model_calls(http, server.url)
    approved = len(walls["pause"])
    runs = journal_runs(tools.journal)
    ran = sum(runs[n] + runs["/" + n] for n in names[1:])  # the model may write the path with a leading slash
    calls = None
    if calls_before is not None and calls_after is not None and approved:
        calls = round((calls_after - calls_before) / approved, 3)
    return {
        "available": True, "model": ALIAS, "iterations": iterations, "approved": approved, "errors": errors,
        "pause": _split(walls["pause"], models["pause"]), "resume": _split(walls["resume"], models["resume"]),
        "model_calls_per_approved_call": calls,
        "tool_runs_per_approval": round(ran / approved, 3) if approved else None,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The row in the main table's shape: the Gatehouse column holds the p50s (wall, of it the model, the rest)."""
    out = []
    for phase in ("pause", "resume"):
        for part, label in (("wall_ms", "wall"), ("model_ms", "of it the model"), ("rest_ms", "of it the rest")):
            value = result["reason"] if not result["available"] else result[phase][part]["p50"]
            out.append({"metric": f"real model: {phase} p50, {label} (ms)", "gatehouse": value, "gatehouse_local": None,
                        "adk_durable": None, "adk_memory": None, "ratio": None, "target": "—", "pass": None})
    if result["available"]:
        calls = result["model_calls_per_approved_call"]
        out.append({"metric": "real model: model calls per approved call", "gatehouse": calls, "gatehouse_local": None,
                    "adk_durable": None, "adk_memory": None, "ratio": None, "target": "2",
                    "pass": None if calls is None else ("pass" if calls == 2 else "fail")})
    return out
