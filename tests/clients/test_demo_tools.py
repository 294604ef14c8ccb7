"""The demo MCP file server, started as a real process on 127.0.0.1 and called over streamable HTTP."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from agent_runtime.clients.demo_tools import TOOL_NAMES, Sandbox, SandboxError
from tests.support.processes import GATEHOUSE_CMD, free_port, running

pytestmark = pytest.mark.e2e


class Served:
    def __init__(self, url: str, sandbox: Path, journal: Path, outside: Path) -> None:
        self.url, self.sandbox, self.journal, self.outside = url, sandbox, journal, outside

    def journal_lines(self) -> list[dict[str, Any]]:
        if not self.journal.exists():
            return []
        return [json.loads(line) for line in self.journal.read_text().splitlines()]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    base = tmp_path_factory.mktemp("demo-tools")
    sandbox, outside = base / "sandbox", base / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret")
    sandbox.mkdir()
    (sandbox / "notes.txt").write_text("hello")
    (sandbox / "out").symlink_to(outside, target_is_directory=True)
    (sandbox / "secret-link.txt").symlink_to(outside / "secret.txt")
    port = free_port()
    args = [*GATEHOUSE_CMD, "demo-tools", "--sandbox", str(sandbox), "--port", str(port), "--journal", str(base / "j.jsonl")]
    with running(args, ready="demo-tools ready"):
        yield Served(f"http://127.0.0.1:{port}/mcp", sandbox, base / "j.jsonl", outside)


async def call(url: str, tool: str, **args: Any) -> tuple[bool, str]:
    async with Client(url) as client:
        result = await client.call_tool(tool, args)
    text = "\n".join(getattr(c, "text", "") for c in result.content)
    return (not result.is_error, text)


async def test_lists_the_four_tools(served: Served) -> None:
    async with Client(served.url) as client:
        tools = await client.list_tools()
    assert sorted(t.name for t in tools.tools) == sorted(TOOL_NAMES)


async def test_write_read_list_delete(served: Served) -> None:
    before = len(served.journal_lines())
    assert await call(served.url, "write_file", path="/docs/a.txt", content="Grüße") == (True, "wrote 7 bytes to /docs/a.txt")
    assert (served.sandbox / "docs" / "a.txt").read_text() == "Grüße"
    assert await call(served.url, "read_file", path="docs/a.txt") == (True, "Grüße")
    ok, listing = await call(served.url, "list_dir", path="/")
    assert ok and listing.split(", ")[:2] == ["docs/", "notes.txt"]
    assert await call(served.url, "list_dir", path="docs") == (True, "a.txt")
    assert await call(served.url, "delete_file", path="docs/a.txt") == (True, "deleted /docs/a.txt")
    assert not (served.sandbox / "docs" / "a.txt").exists()
    ok, text = await call(served.url, "read_file", path="docs/a.txt")
    assert not ok and "No such file" in text
    lines = served.journal_lines()[before:]
    assert [(x["tool"], x["ok"]) for x in lines] == [
        ("write_file", True),
        ("read_file", True),
        ("list_dir", True),
        ("list_dir", True),
        ("delete_file", True),
        ("read_file", False),
    ]
    assert lines[0]["args"] == {"path": "/docs/a.txt", "content": "Grüße"}
    assert all(isinstance(x["ts"], str) and x["ts"].endswith("+00:00") for x in lines)


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("read_file", {"path": "../outside/secret.txt"}),
        ("read_file", {"path": "notes/../../outside/secret.txt"}),
        ("read_file", {"path": "out/secret.txt"}),
        ("read_file", {"path": "secret-link.txt"}),
        ("list_dir", {"path": "out"}),
        ("write_file", {"path": "../x", "content": "pwned"}),
        ("write_file", {"path": "out/new.txt", "content": "pwned"}),
        ("delete_file", {"path": "secret-link.txt"}),
        ("delete_file", {"path": "../outside/secret.txt"}),
    ],
)
async def test_escapes_are_refused(served: Served, tool: str, args: dict[str, Any]) -> None:
    ok, text = await call(served.url, tool, **args)
    assert not ok
    assert "outside the sandbox" in text
    assert (served.outside / "secret.txt").read_text() == "top secret"
    assert sorted(os.listdir(served.outside)) == ["secret.txt"]
    assert not (served.sandbox.parent / "x").exists()
    assert served.journal_lines()[-1] == {**served.journal_lines()[-1], "tool": tool, "args": args, "ok": False}


async def test_absolute_paths_are_relative_to_the_sandbox(served: Served) -> None:
    ok, text = await call(served.url, "read_file", path="/etc/passwd")
    assert not ok and "No such file" in text and "root:" not in text
    assert await call(served.url, "read_file", path="/notes.txt") == (True, "hello")


async def test_adk_mcp_toolset_sees_exactly_the_filtered_tools(served: Served) -> None:
    from google.adk.tools.mcp_tool import McpToolset, StreamableHTTPConnectionParams

    toolset = McpToolset(connection_params=StreamableHTTPConnectionParams(url=served.url), tool_filter=["read_file", "list_dir"])
    try:
        tools = await toolset.get_tools()
        assert sorted(t.name for t in tools) == ["list_dir", "read_file"]
    finally:
        await toolset.close()


async def test_runtime_toolset_reuses_tools_and_declarations_while_the_listing_is_cached(served: Served) -> None:
    """The runtime's toolset gives every model call the same tool objects, declared as plain ADK would declare them."""
    import asyncio

    from google.adk.tools.mcp_tool import McpTool, McpToolset, StreamableHTTPConnectionParams

    from agent_runtime.server.toolsets import CachingMcpToolset

    params = StreamableHTTPConnectionParams(url=served.url)
    names = ["read_file", "list_dir"]
    caching = CachingMcpToolset(connection_params=params, tool_filter=names, tool_list_cache_ttl_seconds=0.5)
    plain = McpToolset(connection_params=params, tool_filter=names)
    try:
        first, again = await caching.get_tools(), await caching.get_tools()
        assert [t.name for t in first] == ["list_dir", "read_file"]
        assert all(a is b and isinstance(a, McpTool) for a, b in zip(first, again, strict=True))
        reference = {t.name: t for t in await plain.get_tools()}
        for tool in first:
            assert tool._get_declaration() is tool._get_declaration()
            assert tool._build_fenced_declaration() is tool._build_fenced_declaration()
            ref = reference[tool.name]
            assert tool._get_declaration() == ref._get_declaration()
            assert tool._build_fenced_declaration() == ref._build_fenced_declaration()
        await asyncio.sleep(0.6)  # the cached listing expires: the next model call gets the server's current tools
        refreshed = await caching.get_tools()
        assert [t.name for t in refreshed] == ["list_dir", "read_file"]
        assert all(a is not b for a, b in zip(first, refreshed, strict=True))
    finally:
        await caching.close()
        await plain.close()


def test_sandbox_resolution_unit(tmp_path: Path) -> None:
    box = Sandbox(tmp_path)
    assert box.resolve("") == tmp_path.resolve()
    assert box.resolve("/") == tmp_path.resolve()
    assert box.resolve("a/../b") == tmp_path.resolve() / "b"
    for escape in ("../x", "..\\..\\x", "/../x", "a/../../x"):
        with pytest.raises(SandboxError, match="outside the sandbox"):
            box.resolve(escape)
    with pytest.raises(SandboxError, match="Is a directory"):
        box.delete_file("/")
