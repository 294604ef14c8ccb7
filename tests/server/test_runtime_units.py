"""Pure parts of the runtime: records, gate results, settings, toolsets, the agent card."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.adk.tools.mcp_tool.mcp_session_manager import SseConnectionParams, StreamableHTTPConnectionParams

from agent_runtime.app.factory import agent_card
from agent_runtime.app.settings import RuntimeSettings, load_config
from agent_runtime.approvals import ApprovalRecord, Resolution, args_hash, iso_utc
from agent_runtime.contract import wire
from agent_runtime.contract.agent_config import AgentConfig, HeaderRef, McpServerConfig, SecretEnvRef
from agent_runtime.contract.manifests import select_agent_config
from agent_runtime.infra.database import default_database_url, is_sqlite
from agent_runtime.server import gate
from agent_runtime.server.toolsets import MissingHeaderSecret, build_toolset

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "file-manager"
FILES = [EXAMPLE / "agent.yaml", EXAMPLE / "modelconfig.yaml", EXAMPLE / "mcp-server.yaml"]


def test_args_hash_is_canonical() -> None:
    assert args_hash("t", {"a": 1, "b": [1, 2]}) == args_hash("t", {"b": [1, 2], "a": 1})
    assert args_hash("t", {"a": 1}) != args_hash("t", {"a": 2})
    assert args_hash("t", {"a": 1}) != args_hash("u", {"a": 1})


def test_record_becomes_the_wire_action_request() -> None:
    r = ApprovalRecord(
        id="apr-1", task_id="t", context_id="c", confirmation_id="x", call_id="call-1", tool="delete_file", server="files",
        args={"path": "a"}, args_hash="h", hint="why", created_at=0.0, expires_at=900.0,
    )
    assert r.action_request() == wire.ActionRequest(
        id="apr-1", name="delete_file", args={"path": "a"}, call_id="call-1", hint="why", expires_at="1970-01-01T00:15:00Z"
    )
    assert iso_utc(0) == "1970-01-01T00:00:00Z"
    assert Resolution.from_verdict(wire.Verdict(True, "", "session")) == Resolution("approved", "", "session")
    assert Resolution.from_verdict(wire.Verdict(False, "r")) == Resolution("denied", "r")


def test_what_the_model_is_told() -> None:
    assert gate.rejection_error("too risky") == {"error": "rejected by the user: too risky"}
    assert gate.rejection_error("  ") == {"error": "rejected by the user: no reason given"}
    assert gate.timeout_error(900.0) == {"error": "timeout: no decision within 900s; the call was not run"}
    assert gate.timeout_error(1.5) == {"error": "timeout: no decision within 1.5s; the call was not run"}


def test_load_config_from_manifests_or_json(tmp_path: Path) -> None:
    from_manifests = load_config(None, FILES)
    assert from_manifests.name == "file-manager"
    path = tmp_path / "config.json"
    path.write_text(from_manifests.to_json())
    assert load_config(path, []) == from_manifests
    with pytest.raises(ValueError):
        load_config(path, FILES)
    with pytest.raises(ValueError):
        load_config(None, [])


def test_settings_default_to_sqlite_in_the_state_dir(tmp_path: Path) -> None:
    settings = RuntimeSettings(config=select_agent_config(FILES), state_dir=tmp_path, port=9999)
    assert settings.db_url == default_database_url(tmp_path) and is_sqlite(settings.db_url)
    assert settings.db_url.startswith("sqlite+aiosqlite:///") and settings.db_url.endswith("gatehouse.db")
    assert settings.url == "http://127.0.0.1:9999/"
    assert not is_sqlite("postgresql+asyncpg://u:p@db/gatehouse")


def test_agent_card_from_config() -> None:
    card = agent_card(select_agent_config(FILES), "http://x/")
    assert card.name == "file-manager" and card.capabilities.streaming
    assert [s.id for s in card.skills] == ["files"]
    assert card.supported_interfaces[0].url == "http://x/"


def _server(**kw: object) -> McpServerConfig:
    return McpServerConfig(name="files", url="http://127.0.0.1:1/mcp", tool_names=["read_file"], **kw)  # type: ignore[arg-type]


def test_toolset_per_server_with_headers_from_env() -> None:
    header = HeaderRef(name="Authorization", value_from=SecretEnvRef(env="TOKEN", secret="s", key="k"))
    toolset = build_toolset(_server(headers=[header]), env={"TOKEN": "Bearer x"})
    params = toolset._connection_params
    assert isinstance(params, StreamableHTTPConnectionParams) and params.headers == {"Authorization": "Bearer x"}
    assert toolset.tool_filter == ["read_file"]
    assert isinstance(build_toolset(_server(protocol="SSE"), env={})._connection_params, SseConnectionParams)
    with pytest.raises(MissingHeaderSecret, match="TOKEN"):
        build_toolset(_server(headers=[header]), env={})


def test_config_is_the_contract() -> None:
    config = select_agent_config(FILES)
    assert isinstance(config, AgentConfig)
    assert config.approval.allow_session_grants and config.approval.timeout_seconds == 900


def test_the_server_imports_a2a_without_grpc_and_leaves_grpc_importable() -> None:
    """grpcio (~15 MB resident) is not loaded by the JSON-RPC server; a2a-sdk's gRPC parts are placeholders."""
    import subprocess
    import sys

    code = (
        "import sys, agent_runtime.app.factory\n"
        "assert 'grpc' not in sys.modules, 'grpc loaded'\n"
        "from a2a.server.request_handlers import GrpcHandler\n"
        "import grpc\n"
        "print('ok', grpc.__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok grpc", out.stderr[-2000:]
