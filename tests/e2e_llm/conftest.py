"""Fixtures for the real-model tests: llama-server with the local model (one per session), the demo MCP tools, and
``gatehouse-runtime serve`` running the example Agent with a ModelConfig that points at the local server.

Without the verified model or the built server the tests are skipped with the reason; under ``make e2e-llm``
(``GATEHOUSE_E2E_LLM=1``, set after it fetched and built both) that is a failure instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e_llm.agent import agent_manifests
from tests.e2e_llm.llama import LlamaServer, llama_server, missing
from tests.support.runtime import Rpc, RuntimeProcess, Tools, demo_tools

# What the sandbox holds at the start of every test; NOTES is what an ungated read must bring back.
NOTES = "The quarterly review moved to Thursday at 10:00."
SEED = {"old.txt": "a draft nobody needs", "notes.txt": NOTES, "a.txt": "first", "b.txt": "second"}


@pytest.fixture(scope="session")
def llm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    why = missing()
    if why is not None:
        if os.environ.get("GATEHOUSE_E2E_LLM"):
            pytest.fail(f"{why}; `python -m tests.e2e_llm.prepare` should have provided it")
        pytest.skip(f"{why}: `make e2e-llm` fetches and verifies the model and builds llama-server into .cache/llm/")
    with llama_server(tmp_path_factory.mktemp("llama") / "llama-server.log") as server:
        yield server


@pytest.fixture(scope="module")
def tools(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tools]:
    with demo_tools(tmp_path_factory.mktemp("tools")) as served:
        yield served


@pytest.fixture(autouse=True)
def seeded(request: pytest.FixtureRequest) -> None:
    """Every test starts from the same sandbox files and an empty tool journal (a test without tools is left alone)."""
    if "tools" not in request.fixturenames:
        return
    tools: Tools = request.getfixturevalue("tools")
    tools.journal.unlink(missing_ok=True)
    for name, text in SEED.items():
        (tools.sandbox / name).write_text(text)


def start_runtime(base: Path, tools: Tools, llm: LlamaServer, **approval: object) -> RuntimeProcess:
    files = agent_manifests(base / "manifests", tools.url, llm.base_url, **approval)
    # OPENAI_API_KEY unset: the test shows a keyless OpenAI-compatible server works without one
    env_key = os.environ.pop("OPENAI_API_KEY", None)
    try:
        proc = RuntimeProcess(files, base / "state", base / "runtime.log")
        proc.start()
    finally:
        if env_key is not None:
            os.environ["OPENAI_API_KEY"] = env_key
    return proc


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory, tools: Tools, llm: LlamaServer) -> Iterator[RuntimeProcess]:
    proc = start_runtime(tmp_path_factory.mktemp("runtime"), tools, llm)
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def rpc(runtime: RuntimeProcess) -> Rpc:
    client = Rpc(runtime.url)
    client.client.timeout = 600  # the first prompt (~1,300 tokens) takes ~30 s here; on a loaded machine, several times that
    return client
