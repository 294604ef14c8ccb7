"""``llama-server`` on 127.0.0.1 with the verified local model: an OpenAI-compatible endpoint for the tests and the bench.

What is particular to this small model stays here, in how the server is started, never in what the runtime sends
to every model (see ``template.jinja`` beside this file):

- ``--chat-template-file template.jinja``: a variant of the model's own chat template. The model writes its tool
  calls as a fenced ```json block, and llama-server parses that into OpenAI ``tool_calls`` only when the template
  renders earlier tool calls the same way; after the last tool result the variant also says that the call is
  done and a plain-text reply is due (without it the 1.5B model calls the same tool again);
- ``--temp 0``: greedy sampling for every request, as no ModelConfig field sets a temperature;
- ``-np 1``: one slot, so the whole 8,192-token context serves the one conversation in flight, and every request
  reuses the prompt prefix already read (the agent's ~1,300-token system message and tools: ~30 s the first time);
- ``--metrics``: ``/metrics`` counts the seconds spent reading prompts and generating (``bench --real-model``).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from agent_runtime.clients import processes
from tests.e2e_llm.prepare import MODEL_PATH, SERVER_PATH, model_ready, server_ready
from tests.support.processes import free_port

TEMPLATE = Path(__file__).with_name("template.jinja")
ALIAS = "qwen2.5-coder-1.5b-instruct"  # the name the server answers to: the `model` of the tests' ModelConfig
SECONDS_COUNTERS = ("llamacpp:prompt_seconds_total ", "llamacpp:tokens_predicted_seconds_total ")


@dataclass(frozen=True)
class LlamaServer:
    url: str  # http://127.0.0.1:PORT
    log: Path

    @property
    def base_url(self) -> str:
        """What a ModelConfig's ``baseUrl`` names: the OpenAI-compatible API root."""
        return f"{self.url}/v1"

    def model_seconds(self) -> float:
        """Seconds the server has spent on the model so far: reading prompts plus generating tokens."""
        text = httpx.get(f"{self.url}/metrics", timeout=10).text
        return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(SECONDS_COUNTERS))


def missing() -> str | None:
    """Why the server cannot start here, or None."""
    if not model_ready():
        return f"no verified model at {MODEL_PATH}"
    if not server_ready():
        return f"no llama-server at {SERVER_PATH}"
    return None


@contextmanager
def llama_server(log: Path, timeout: float = 300.0) -> Iterator[LlamaServer]:
    """Start the server, wait until ``/health`` answers 200 (it answers 503 while the model loads), stop it on exit."""
    port = free_port()
    args = [
        str(SERVER_PATH), "-m", str(MODEL_PATH), "--alias", ALIAS, "--host", "127.0.0.1", "--port", str(port),
        "--jinja", "--chat-template-file", str(TEMPLATE), "-c", "8192", "-t", "2", "-np", "1", "--temp", "0", "--metrics",
    ]
    url = f"http://127.0.0.1:{port}"
    with log.open("ab") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"llama-server exited {proc.returncode}:\n{log.read_text()[-4000:]}")
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"llama-server not healthy after {timeout:.0f} s:\n{log.read_text()[-4000:]}")
            time.sleep(0.25)
        yield LlamaServer(url, log)
    finally:
        processes.stop(proc)


__all__ = ["ALIAS", "TEMPLATE", "LlamaServer", "llama_server", "missing"]
