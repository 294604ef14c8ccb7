"""``/metrics`` behind a token, or on a port of its own (issue 31, item 9), on a real runtime."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.support.processes import free_port
from tests.support.runtime import Rpc, demo_tools, runtime, state

pytestmark = pytest.mark.e2e

TOKEN = "metrics-token-0123456789abcdef"


def test_a_metrics_token_guards_metrics_and_nothing_else(tmp_path: Path) -> None:
    (tmp_path / "metrics.token").write_text(TOKEN + "\n")
    with demo_tools(tmp_path / "tools") as tools, runtime(tmp_path, tools, ["--metrics-token-file",
                                                                             str(tmp_path / "metrics.token")]) as proc:
        for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": TOKEN}, {"Authorization": f"Basic {TOKEN}"}):
            refused = httpx.get(f"{proc.url}/metrics", headers=headers)
            assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith("Bearer"), headers
            assert "gatehouse_" not in refused.text
        shown = httpx.get(f"{proc.url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
        assert shown.status_code == 200 and "gatehouse_pending_approvals" in shown.text
        # The agent itself is as it was (local mode here: no credential for A2A); the probes stay public.
        assert state(Rpc(proc.url).send("list /")["task"]) == "TASK_STATE_COMPLETED"
        assert httpx.get(f"{proc.url}/readyz").status_code == 200


def test_metrics_on_a_port_of_their_own(tmp_path: Path) -> None:
    (tmp_path / "metrics.token").write_text(TOKEN)
    port = free_port()
    metrics = f"http://127.0.0.1:{port}/metrics"
    serve = ["--metrics-port", str(port), "--metrics-token-file", str(tmp_path / "metrics.token")]
    with demo_tools(tmp_path / "tools") as tools, runtime(tmp_path, tools, serve) as proc:
        assert httpx.get(f"{proc.url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 404
        assert httpx.get(metrics).status_code == 401  # the token holds there too
        shown = httpx.get(metrics, headers={"Authorization": f"Bearer {TOKEN}"})
        assert shown.status_code == 200 and "gatehouse_pending_approvals" in shown.text
        assert httpx.get(f"http://127.0.0.1:{port}/readyz").status_code == 404  # /metrics alone
        # In local mode that port checks Host too (DNS rebinding).
        rebound = httpx.get(metrics, headers={"Authorization": f"Bearer {TOKEN}", "Host": f"rebind.attacker.example:{port}"})
        assert rebound.status_code == 421
        assert state(Rpc(proc.url).send("list /")["task"]) == "TASK_STATE_COMPLETED"
        proc.stop()  # SIGTERM stops both servers
        assert proc.proc is not None and proc.proc.returncode in (0, -15)
        with pytest.raises(httpx.ConnectError):
            httpx.get(metrics)
    assert "Traceback" not in (tmp_path / "runtime.log").read_text()
