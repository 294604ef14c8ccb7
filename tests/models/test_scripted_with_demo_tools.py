"""ScriptedLlm driving real MCP tools through an ADK runner: the example's rules end to end (no approval gate)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_runtime.contract.agent_config import ScriptedModel
from agent_runtime.models.factory import build_model
from tests.models.test_models_scripted import EXAMPLE
from tests.support.processes import GATEHOUSE_CMD, free_port, running

pytestmark = pytest.mark.e2e


@pytest.fixture
def tools_url(tmp_path: Path) -> Iterator[str]:
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "a.txt").write_text("a")
    port = free_port()
    with running([*GATEHOUSE_CMD, "demo-tools", "--sandbox", str(tmp_path), "--port", str(port)], "demo-tools ready"):
        yield f"http://127.0.0.1:{port}/mcp"


async def test_example_rules_through_adk_and_mcp(tools_url: str) -> None:
    from google.adk.agents import LlmAgent
    from google.adk.runners import Runner
    from google.adk.sessions import InMemorySessionService
    from google.adk.tools.mcp_tool import McpToolset, StreamableHTTPConnectionParams
    from google.genai import types

    from agent_runtime.contract.manifests import select_agent_config

    cfg = select_agent_config([EXAMPLE / "agent.yaml", EXAMPLE / "modelconfig.yaml", EXAMPLE / "mcp-server.yaml"])
    assert isinstance(cfg.model, ScriptedModel)
    toolset = McpToolset(
        connection_params=StreamableHTTPConnectionParams(url=tools_url), tool_filter=list(cfg.mcp_servers[0].tool_names)
    )
    agent = LlmAgent(name="files", model=build_model(cfg.model), tools=[toolset])
    runner = Runner(app_name="t", agent=agent, session_service=InMemorySessionService(), auto_create_session=True)

    async def say(text: str) -> str:
        final = ""
        message = types.Content(role="user", parts=[types.Part(text=text)])
        async for event in runner.run_async(user_id="u", session_id="s", new_message=message):
            if event.is_final_response() and event.content:
                final = "".join(p.text or "" for p in event.content.parts or [])
        return final

    try:
        assert await say("read notes.txt") == "notes.txt: hello"
        assert await say("clean up a.txt and nope.txt") == (
            "Clean-up finished: deleted /a.txt; Error executing tool delete_file: No such file: 'nope.txt'.; notes.txt"
        )
        assert await say("what can you do?") == cfg.model.no_match_reply
    finally:
        await toolset.close()
        await runner.close()
