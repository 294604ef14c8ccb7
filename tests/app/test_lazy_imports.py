"""What ``gatehouse-runtime serve`` has not imported once it is ready: each part a request of a runtime without it
never uses is imported when first needed, so a start-up does not pay for it (issue 40, bar 1: cold start to ready at
most plain ADK's; figures in bench/README.md "Round three"). Also: start-up collects only the young
generation, freezes no garbage, and serves with the collector on at the serving thresholds.

The runtime runs as the operator runs it (the console script's ``runtime_main``, authentication on), in a process
of its own; a thread in that process waits for ``/readyz`` and prints what is loaded.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from typing import Any

import pytest

from tests.support.runtime import demo_tools, write_manifests

# Each is imported where it is first needed; none is needed by a runtime outside a cluster, with tokens, no UI
# page rendered yet and no tool that asks a question.
NOT_AT_START = (
    "agent_runtime.kube.bridge",  # the ToolApproval mirror: only with --kube-namespace / in a cluster
    "agent_runtime.kube.client",
    "agent_runtime.kube.objects",
    "agent_runtime.kube.token_review",
    "agent_runtime.access.jwt_tokens",  # only with a JWT issuer in the Agent's access settings
    "jwt",  # PyJWT: inbox session cookies, sub-agent tokens, JWT callers, on first use
    "jinja2",  # the inbox's templates: on the first page rendered
    "jsonschema",  # an MCP tool's question (elicitation) schema: on the first one
    "agent_runtime.slack",
    "agent_runtime.gateway",
    "litellm",  # a model provider other than the Scripted one
    "opentelemetry.sdk",  # --otel
)

_PROBE = """
import gc, json, os, sys, threading, time, urllib.request
port, modules = int(sys.argv[1]), json.loads(sys.argv[2])
def report():
    while True:
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2).status == 200:
                break
        except Exception:
            pass
        time.sleep(0.05)
    loaded, enabled, threshold = [m for m in modules if m in sys.modules], gc.isenabled(), gc.get_threshold()
    full = gc.get_stats()[2]["collections"]  # full collections start-up made
    gc.unfreeze()  # what start-up froze, back in the oldest generation: a full collection now finds its garbage
    frozen_garbage = gc.collect()
    print(json.dumps({"loaded": loaded, "gc": enabled, "threshold": threshold, "full_collections": full,
                      "frozen_garbage": frozen_garbage}), flush=True)
    os._exit(0)
threading.Thread(target=report, daemon=True).start()
sys.argv = ["gatehouse-runtime", *sys.argv[3:]]
from agent_runtime.clients.cli import runtime_main
runtime_main()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Start the runtime as the operator does; what the probe saw at its first ``/readyz`` 200."""
    tmp_path = tmp_path_factory.mktemp("ready")
    with demo_tools(tmp_path / "tools") as tools:
        files = write_manifests(tmp_path / "manifests", tools.url)
        tokens = tmp_path / "api-tokens"
        tokens.write_text("alice:a-token-of-at-least-some-length\n")
        tokens.chmod(0o600)
        port = _free_port()
        args = ["serve", "--port", str(port), "--state-dir", str(tmp_path / "state"), "--api-token-file", str(tokens)]
        for f in files:
            args += ["-f", str(f)]
        done = subprocess.run([sys.executable, "-c", _PROBE, str(port), json.dumps(NOT_AT_START), *args],
                              capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


@pytest.mark.e2e
def test_a_ready_runtime_has_not_imported_what_no_request_of_it_needs(report: dict[str, Any]) -> None:
    assert report["loaded"] == [], f"imported before any request needed them: {report['loaded']}"
    assert report["gc"] is True
    assert report["threshold"] == [50_000, 10, 10]  # the serving thresholds (cli.GC_THRESHOLDS), not start-up's


@pytest.mark.e2e
def test_start_up_makes_no_full_collection_and_freezes_no_garbage(report: dict[str, Any]) -> None:
    """Start-up collects only the young generation (a full walk of the ~280,000 objects it built cost 0.13-0.19 s
    of CPU) and yet leaves no import-time garbage (3,600 objects, 4.3 MB) frozen into the heap for good."""
    assert report["full_collections"] == 0
    assert report["frozen_garbage"] < 200, f"{report['frozen_garbage']} unreachable objects frozen at start-up"

