"""What the Slack tests of MCPGateways share: the emulated API (with the chart's admission policy), the Slack Web API
stand-in, a ``gatehouse-runtime gateway`` mirroring its held calls as ToolApprovals, and ``gatehouse slack`` as a
process, each with its own ServiceAccount's kubeconfig."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.support import helm as helm_support
from tests.support import slack_api
from tests.support.kube_fixtures import Kubectl, kubectl_and_plugin, wait_for
from tests.support.kube_server import RunningEmulator, serve
from tests.support.processes import GATEHOUSE_CMD, free_port, running

__all__ = ["RUNTIME_CMD", "SECRET", "TOKEN", "GatewayAndBridge", "gateway_and_bridge"]

RUNTIME_CMD = [sys.executable, "-c", "from agent_runtime.clients.cli import runtime_main; runtime_main()"]
SECRET = "8f742231b10e8888abcd99yyyzzz85a5"  # the Slack app's signing secret
TOKEN = "xoxb-test-token"


@dataclass
class GatewayAndBridge:
    api: RunningEmulator
    slack: slack_api.SlackStandIn
    port: int  # the gateway's
    bridge_url: str
    bridge_log: Path

    def first_pending(self, token: str) -> str | None:
        """The id of the first pending request the bearer of ``token`` sees over REST (a requester sees her own)."""
        listed = httpx.get(f"http://127.0.0.1:{self.port}/approvals", params={"state": "pending"},
                           headers={"Authorization": f"Bearer {token}"}, timeout=10).json()["approvals"]
        return str(listed[0]["id"]) if listed else None


@contextlib.contextmanager
def gateway_and_bridge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, gateway: str, docs: list[dict[str, Any]], tokens: str,
    users: dict[str, Any], channels: dict[str, str], ready: str, upstream: list[str] | None = None,
) -> Iterator[GatewayAndBridge]:
    """``docs`` (the MCPGateway and what it names) applied; the gateway (callers' ``tokens``) up once it printed
    ``ready`` (``{port}`` in it: the gateway's port), after the ``upstream`` command if any; the bridge (Slack
    ``users``) answering ``/healthz``."""
    kubectl_bin, _ = kubectl_and_plugin()
    (tmp_path / "tokens").write_text(tokens)
    (tmp_path / "users.yaml").write_text(yaml.safe_dump(users))
    (tmp_path / "gateway.yaml").write_text(yaml.safe_dump_all(docs))
    port, bridge_port = free_port(), free_port()
    with serve() as api, slack_api.serve(channels=channels) as slack, contextlib.ExitStack() as stack:
        admin_config = api.kubeconfig_for(tmp_path / "kubeconfig-admin",
                                          api.emulator.add_user("cluster-admin", ["system:masters"]))
        monkeypatch.setenv("KUBECONFIG", str(admin_config))
        Kubectl(kubectl_bin, admin_config)("apply", "--validate=false", "-f", str(tmp_path / "gateway.yaml"))
        assert api.emulator.add_admission_documents(helm_support.admission_policy_documents()) == 1
        gateway_config = api.kubeconfig_for(tmp_path / "kubeconfig-gateway",
                                            api.emulator.add_service_account("default", gateway))
        bridge_config = api.kubeconfig_for(tmp_path / "kubeconfig-bridge",
                                           api.emulator.add_service_account("gatehouse-system", "gatehouse-slack"))
        command = [*RUNTIME_CMD, "gateway", "-f", str(tmp_path / "gateway.yaml"), "--port", str(port),
                   "--api-token-file", str(tmp_path / "tokens"), "--state-dir", str(tmp_path / "state"),
                   "--kubeconfig", str(gateway_config), "--kube-namespace", "default",
                   "--trust-kubectl-without-admission-policy"]  # the emulator enforces the chart's policy anyway
        bridge = [*GATEHOUSE_CMD, "slack", "-n", "default", "--host", "127.0.0.1", "--port", str(bridge_port),
                  "--kubeconfig", str(bridge_config), "--users-file", str(tmp_path / "users.yaml"),
                  "--slack-api-url", slack.url, "--replay-namespace", "gatehouse-system"]
        env = {**os.environ, "SLACK_BOT_TOKEN": TOKEN, "SLACK_SIGNING_SECRET": SECRET, "KUBECONFIG": str(bridge_config)}
        if upstream is not None:
            stack.enter_context(running(upstream, ready="demo-tools ready"))
        stack.enter_context(running(command, ready=ready.format(port=port), timeout=60))
        log_path = tmp_path / "bridge.log"
        log = stack.enter_context(log_path.open("ab"))
        proc = subprocess.Popen(bridge, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            bridge_url = f"http://127.0.0.1:{bridge_port}"
            wait_for(lambda: _up(bridge_url), 60, "the bridge's /healthz")
            yield GatewayAndBridge(api, slack, port, bridge_url, log_path)
        finally:
            proc.terminate()
            proc.wait(10)


def _up(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False
