"""Per-target request headers: the default Gatehouse target (authentication on, as the product is configured by
default) writes its token file, starts the runtime with ``--api-token-file`` and its client sends ``Authorization:
Bearer``; the others (Gatehouse in local mode, the ADK baselines) send the A2A headers only. No
process is started: ``gatehouse-runtime serve --help`` is faked, the HTTP server is an httpx mock transport."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench import gatehouse_adapter, run
from bench.gatehouse_adapter import AUTH_PRINCIPAL, Availability, GatehouseTarget, gatehouse_targets
from bench.protocols import A2A_HEADERS, Endpoint, approve, bearer_headers, pause
from bench.targets import adk_targets


@pytest.fixture
def runtime_here(monkeypatch: pytest.MonkeyPatch) -> None:
    def fake() -> Availability:
        return Availability(True, ["gatehouse-runtime"], help_text="--host <str>")

    monkeypatch.setattr(gatehouse_adapter, "availability", fake)  # what the target's command asks
    monkeypatch.setattr(run, "availability", fake)  # what choosing the targets asks


def test_gatehouse_targets_default_is_authenticated_local_mode_for_comparison() -> None:
    auth, local = gatehouse_targets()
    assert (auth.key, auth.label, local.key) == ("gatehouse", "Gatehouse (default)", "gatehouse_local")
    assert local.api_token == "" and len(auth.api_token) >= 32
    assert gatehouse_targets()[0].api_token != auth.api_token  # a fresh random token per run
    assert auth.api_token not in repr(auth)
    assert local.request_headers() == dict(A2A_HEADERS)
    assert auth.request_headers() == {**A2A_HEADERS, "Authorization": f"Bearer {auth.api_token}"}
    assert all(t.request_headers() == dict(A2A_HEADERS) for t in adk_targets())
    assert bearer_headers(None) == bearer_headers("") == dict(A2A_HEADERS)


@pytest.mark.usefixtures("runtime_here")
def test_authenticated_target_serves_with_a_token_file(tmp_path: Path) -> None:
    local_dir, auth_dir = tmp_path / "local", tmp_path / "auth"
    local_dir.mkdir()
    auth_dir.mkdir()
    auth, local = gatehouse_targets()
    assert "--api-token-file" not in local.command(8080, local_dir / "state", "http://127.0.0.1:9/mcp", local_dir)
    assert not (local_dir / "api-tokens").exists()

    cmd = auth.command(8081, auth_dir / "state", "http://127.0.0.1:9/mcp", auth_dir)
    token_file = Path(cmd[cmd.index("--api-token-file") + 1])
    assert token_file.parent == auth_dir
    assert token_file.read_text() == f"{AUTH_PRINCIPAL}:{auth.api_token}\n"  # principal:token, one line
    assert stat.S_IMODE(token_file.stat().st_mode) & 0o077 == 0  # readable by the bench's user only
    assert cmd[cmd.index("--host") + 1] == "127.0.0.1"


@pytest.mark.usefixtures("runtime_here")
def test_default_targets_include_both_gatehouse_configurations() -> None:
    assert run.parse_args([]).targets == ["gatehouse", "gatehouse_local", "adk_durable", "adk_memory"]
    targets, reasons = run.choose_targets(["gatehouse", "adk_memory"])
    assert [t.key for t in targets] == ["gatehouse", "adk_memory"]
    assert isinstance(targets[0], GatehouseTarget) and targets[0].api_token  # authenticates, as the product does
    assert reasons["gatehouse_local"] == reasons["adk_durable"] == "not run (--targets)" and reasons["gatehouse"] == ""


def test_unavailable_runtime_marks_both_gatehouse_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run, "availability", lambda: Availability(False, [], reason="gatehouse runtime not available yet"))
    targets, reasons = run.choose_targets(list(run.ALL))
    assert [t.key for t in targets] == ["adk_durable", "adk_memory"]
    assert reasons["gatehouse"] == reasons["gatehouse_local"] == "gatehouse runtime not available yet"


async def test_pause_and_approve_send_the_endpoints_headers() -> None:
    seen: list[dict[str, Any]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append({"authorization": request.headers.get("authorization"), "a2a": request.headers.get("a2a-version")})
        decision = "taskId" in body["params"]["message"]
        status: dict[str, Any] = {"state": "TASK_STATE_COMPLETED"} if decision else {
            "state": "TASK_STATE_INPUT_REQUIRED",
            "message": {"parts": [{"data": {"interrupt_type": "tool_approval", "action_requests": [{"id": "apr-1"}]}}]},
        }
        return httpx.Response(200, json={"jsonrpc": "2.0", "id": body["id"],
                                         "result": {"task": {"id": "t1", "contextId": "c1", "status": status}}})

    auth = GatehouseTarget(key="gatehouse", api_token="s3cret")
    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as http:
        for endpoint in (Endpoint("http://gh-auth/", "gatehouse", auth.request_headers()),
                         Endpoint("http://gh/", "gatehouse")):
            paused = await pause(http, endpoint, "delete x.txt")
            assert paused.token == "apr-1"
            assert await approve(http, endpoint, paused) >= 0
    assert seen == [{"authorization": "Bearer s3cret", "a2a": "1.0"}] * 2 + [{"authorization": None, "a2a": "1.0"}] * 2
