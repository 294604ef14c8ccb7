"""DNS rebinding against a real runtime on 127.0.0.1 (issue 31, item 4): a web page on ``rebind.attacker.example``
re-points its name at 127.0.0.1 and calls the runtime as its own origin (``Host`` and ``Origin`` both name it). In local
mode (no token file) every route but the probes answers 421 to such a request; a loopback name or address on any port,
the ``--public-url`` host and an ``--allowed-host`` name are answered. A runtime with credentials on loopback checks the
same by default.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_runtime.contract import wire
from tests.support.runtime import Rpc, RuntimeProcess, Tools, demo_tools, request_ids, runtime, state

pytestmark = pytest.mark.e2e

PUBLIC, ALLOWED = "agent.example.test", "gatehouse.internal"


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Tools, RuntimeProcess]]:
    base = tmp_path_factory.mktemp("rebinding")
    with demo_tools(base / "tools") as tools, runtime(base, tools, ["--public-url", f"https://{PUBLIC}/",
                                                                     "--allowed-host", f"{ALLOWED}:8443"]) as proc:
        yield tools, proc


def rebound(proc: RuntimeProcess) -> httpx.Client:
    """The attacker's page, its name pointed at 127.0.0.1: the browser sends its own Host and Origin."""
    site = f"rebind.attacker.example:{proc.port}"
    return httpx.Client(base_url=proc.url, headers={"Host": site, "Origin": f"http://{site}", "A2A-Version": "1.0"},
                        timeout=30)


def rpc(client: httpx.Client, method: str, params: dict[str, Any]) -> httpx.Response:
    return client.post("/", json={"jsonrpc": "2.0", "id": "1", "method": method, "params": params})


def votes(proc: RuntimeProcess) -> list[tuple[str, str]]:
    with closing(sqlite3.connect(proc.state_dir / "gatehouse.db")) as conn:
        return conn.execute("SELECT request_id, principal FROM gatehouse_approval_votes").fetchall()


def test_local_mode_answers_a_rebound_name_421_on_every_channel(local: tuple[Tools, RuntimeProcess]) -> None:
    tools, proc = local
    (tools.sandbox / "secret-plans.txt").write_text("x")
    task = Rpc(proc.url).send("delete secret-plans.txt")["task"]
    assert state(task) == "TASK_STATE_INPUT_REQUIRED"
    (request_id,) = request_ids(task)
    with rebound(proc) as page:
        attempts: dict[str, Callable[[], httpx.Response]] = {
            "A2A ListTasks": lambda: rpc(page, "ListTasks", {}),
            "A2A GetTask": lambda: rpc(page, "GetTask", {"id": task["id"]}),
            "A2A SendMessage (approve)": lambda: rpc(page, "SendMessage", {"message": {
                "messageId": "m-1", "role": "ROLE_USER", "taskId": task["id"], "contextId": task["contextId"],
                "parts": [{"data": wire.approve_all()}]}}),
            "REST list": lambda: page.get("/approvals"),
            "REST get": lambda: page.get(f"/approvals/{request_id}"),
            "REST decide": lambda: page.post(f"/approvals/{request_id}/decision", json={"decision": "approve"}),
            "REST events": lambda: page.get("/approvals/events"),
            "inbox page": lambda: page.get("/ui/"),
            "inbox login": lambda: page.get("/ui/login"),
            "inbox events": lambda: page.get("/ui/events"),
            "inbox decide": lambda: page.post("/ui/api/decisions", json={"ids": [request_id], "decision": "approve"}),
            "audit": lambda: page.get("/audit"),
            "metrics": lambda: page.get("/metrics"),
            "agent card": lambda: page.get("/.well-known/agent-card.json"),
        }
        for channel, attempt in attempts.items():  # one at a time: an event stream that were answered would not end
            reply = attempt()
            assert reply.status_code == 421, (channel, reply.status_code, reply.text[:200])
            assert "secret-plans" not in reply.text and request_id not in reply.text, channel
        assert page.get("/healthz").status_code == 200  # the probes: a kubelet names the pod's IP
        assert page.get("/readyz").status_code == 200
    assert votes(proc) == [] and not tools.executions("delete_file", "secret-plans.txt")

    # Names that are this machine's or were configured, on any port (a port-forward uses another local port).
    for host in (f"127.0.0.1:{proc.port}", "localhost:18080", "127.0.0.2:1", "[::1]:9999", "localhost", PUBLIC,
                 f"{PUBLIC}:443", f"{ALLOWED}:8443", ALLOWED.upper()):
        listed = httpx.post(f"{proc.url}/", headers={"Host": host, "A2A-Version": "1.0"},
                            json={"jsonrpc": "2.0", "id": "1", "method": "ListTasks", "params": {}})
        assert listed.status_code == 200 and task["id"] in listed.text, host
    Rpc(proc.url).call("CancelTask", {"id": task["id"]})


def test_with_credentials_on_loopback_the_check_is_on_by_default(tmp_path: Path) -> None:
    (tmp_path / "tokens").write_text("alice:tok-alice\n")
    serve = ["--api-token-file", str(tmp_path / "tokens")]
    with demo_tools(tmp_path / "tools") as tools, runtime(tmp_path, tools, serve) as proc, rebound(proc) as page:
        page.headers["Authorization"] = "Bearer tok-alice"
        assert rpc(page, "ListTasks", {}).status_code == 421
        assert page.get("/approvals").status_code == 421
        assert Rpc(proc.url, "tok-alice").call("ListTasks", {})["result"] is not None  # addressed to 127.0.0.1: served
