"""The demo MCP file server behind ``gatehouse demo-tools``: five file tools confined to one sandbox directory.

Tools: ``list_dir(path="")``, ``read_file(path)``, ``write_file(path, content)``, ``delete_file(path)``, served
over MCP streamable HTTP at ``/mcp`` by mcp 2.x's ``MCPServer``; and ``put_file(path, content)``, which asks the user
(MCP elicitation) before it overwrites a file that exists: on the 2026-07-28 protocol the question comes back as an
``input_required`` result and the call is retried with the answer (docs/wire-contract.md, "Elicitation").

Request state: the server seals its ``requestState`` with a fixed key (``--state-key-file``, else the built-in demo
key; :data:`STATE_TTL_SECONDS`), not the SDK's per-process default, so an answer given after this server restarted
still completes the call. A real MCP server that elicits must do likewise (a shared key, a TTL at least the agent's
``approval.timeout``) for a restart between the question and the answer.

Confinement: every path is taken relative to the sandbox root (``/etc/passwd`` means ``<sandbox>/etc/passwd``)
and resolved with symlinks followed; a path that then lies outside the sandbox (``../x``, a symlink pointing
out) is refused with a tool error and nothing is touched.

Journal: with ``journal`` set, every tool call appends one JSON line ``{"tool", "args", "ok", "ts"}`` after it
ran, flushed and fsync-ed, so a test can count executions even after a ``kill -9`` of the agent runtime.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, TypeVar

from mcp.server.elicitation import AcceptedElicitation, ElicitationResult
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.resolve import Elicit, Resolve
from mcp.server.request_state import RequestStateSecurity
from pydantic import BaseModel, Field
from starlette.applications import Starlette

__all__ = ["DEMO_STATE_KEY", "TOOL_NAMES", "Journal", "Sandbox", "SandboxError", "build_app", "build_server", "serve"]

TOOL_NAMES = ("list_dir", "read_file", "write_file", "delete_file", "put_file")
MCP_PATH = "/mcp"
# The demo's request-state key: public, so only for the demo. A deployment passes its own (--state-key-file).
DEMO_STATE_KEY = b"gatehouse-demo-tools-request-state-key-v1"[:32]
STATE_TTL_SECONDS = 24 * 3600.0  # at least any approval.timeout the demo or the tests use


class Overwrite(BaseModel):
    """What ``put_file`` asks before replacing a file (the elicitation's requested schema)."""

    overwrite: bool = Field(description="Replace the existing file")
_T = TypeVar("_T")


class SandboxError(ToolError):
    """A refused or failed file operation; its message is what the model reads."""


class Sandbox:
    """File operations confined to ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root).resolve()

    def resolve(self, path: str) -> Path:
        """The real location ``path`` names inside the sandbox, or :class:`SandboxError` if it leaves it."""
        candidate = self.root / path.replace("\\", "/").lstrip("/")
        resolved = candidate.resolve(strict=False)
        if not resolved.is_relative_to(self.root):
            raise SandboxError(f"Refused: {path!r} resolves outside the sandbox; only paths inside it are allowed.")
        return resolved

    def list_dir(self, path: str = "") -> str:
        target = self.resolve(path)
        if not target.exists():
            raise SandboxError(f"No such directory: {path!r}.")
        if not target.is_dir():
            raise SandboxError(f"Not a directory: {path!r}.")
        names = sorted(p.name + ("/" if p.is_dir() else "") for p in target.iterdir())
        return ", ".join(names) if names else "(empty)"

    def read_file(self, path: str) -> str:
        target = self.resolve(path)
        if not target.is_file():
            raise SandboxError(f"{'Is a directory' if target.is_dir() else 'No such file'}: {path!r}.")
        try:
            return target.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise SandboxError(f"{path!r} is not a UTF-8 text file.") from None

    def write_file(self, path: str, content: str) -> str:
        target = self.resolve(path)
        if target == self.root or target.is_dir():
            raise SandboxError(f"Is a directory: {path!r}.")
        target.parent.mkdir(parents=True, exist_ok=True)
        data = content.encode("utf-8")
        target.write_bytes(data)
        return f"wrote {len(data)} bytes to {self.display(target)}"

    def delete_file(self, path: str) -> str:
        target = self.resolve(path)
        if target.is_dir():
            raise SandboxError(f"Is a directory (only files can be deleted): {path!r}.")
        if not target.exists():
            raise SandboxError(f"No such file: {path!r}.")
        target.unlink()
        return f"deleted {self.display(target)}"

    def display(self, target: Path) -> str:
        return "/" + target.relative_to(self.root).as_posix()


class Journal:
    """Append-only JSON lines, one per executed tool call, durable before the call returns."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()

    def record(self, tool: str, args: dict[str, Any], ok: bool) -> None:
        line = json.dumps(
            {"tool": tool, "args": args, "ok": ok, "ts": datetime.now(UTC).isoformat(timespec="microseconds")},
            sort_keys=True,
        )
        with self._lock, self.path.open("a", encoding="utf-8") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())


def build_server(sandbox: Path, journal: Path | None = None, state_key: bytes = DEMO_STATE_KEY) -> MCPServer:
    """The ``MCPServer`` with the five file tools bound to ``sandbox`` (created if missing)."""
    Path(sandbox).mkdir(parents=True, exist_ok=True)
    box = Sandbox(sandbox)
    log = Journal(journal) if journal is not None else None
    server: MCPServer = MCPServer(
        name="gatehouse-demo-tools",
        instructions="File tools confined to one sandbox directory.",
        log_level="WARNING",
        request_state_security=RequestStateSecurity(keys=[state_key], ttl=STATE_TTL_SECONDS),
    )

    def run(tool: str, args: dict[str, Any], fn: Callable[[], _T]) -> _T:
        try:
            result = fn()
        except Exception:
            if log is not None:
                log.record(tool, args, ok=False)
            raise
        if log is not None:
            log.record(tool, args, ok=True)
        return result

    @server.tool(structured_output=False)
    def list_dir(path: str = "") -> str:
        """List the entries of a directory in the sandbox ("" or "/" is the sandbox root); directories end with /."""
        return run("list_dir", {"path": path}, lambda: box.list_dir(path))

    @server.tool(structured_output=False)
    def read_file(path: str) -> str:
        """Read a UTF-8 text file in the sandbox."""
        return run("read_file", {"path": path}, lambda: box.read_file(path))

    @server.tool(structured_output=False)
    def write_file(path: str, content: str) -> str:
        """Write (create or replace) a text file in the sandbox, creating parent directories."""
        return run("write_file", {"path": path, "content": content}, lambda: box.write_file(path, content))

    @server.tool(structured_output=False)
    def delete_file(path: str) -> str:
        """Delete a file in the sandbox."""
        return run("delete_file", {"path": path}, lambda: box.delete_file(path))

    def ask_overwrite(path: str) -> Elicit[Overwrite] | Overwrite:
        # Runs on every round (the SDK's Resolve): asks only when there is something to overwrite.
        if box.resolve(path).is_file():
            return Elicit(f"{path} exists. Overwrite it?", Overwrite)
        return Overwrite(overwrite=True)  # nothing to overwrite, nothing to ask (the SDK passes it on as accepted)

    def put_file(path: str, content: str, confirm: Any) -> str:
        """Write a text file in the sandbox; if it exists, the user is asked first whether to overwrite it."""
        # The body runs once, on the final round (after the answer): only then is anything written or journaled.
        if not (isinstance(confirm, AcceptedElicitation) and confirm.data.overwrite):
            answer = "kept it" if isinstance(confirm, AcceptedElicitation) else f"answered {confirm.action}"
            return run("put_file", {"path": path, "content": content},
                       lambda: f"not written: {path} exists and the user {answer}")
        return run("put_file", {"path": path, "content": content}, lambda: box.write_file(path, content))

    # The SDK keys the question by the resolver's "module:qualname", which clients show: name it "put_file:overwrite".
    ask_overwrite.__module__, ask_overwrite.__qualname__ = "put_file", "overwrite"
    # The SDK reads the resolver from the annotation; a local resolver cannot be named in a string annotation.
    put_file.__annotations__["confirm"] = Annotated[ElicitationResult[Overwrite], Resolve(ask_overwrite)]
    server.tool(structured_output=False)(put_file)

    return server


def build_app(
    sandbox: Path, journal: Path | None = None, *, host: str = "127.0.0.1", state_key: bytes = DEMO_STATE_KEY
) -> Starlette:
    """An ASGI app serving the tools at ``/mcp`` (run its lifespan: it starts the MCP session manager).

    ``host`` is the address it will be served on; for a loopback host the MCP SDK turns on DNS-rebinding
    protection (only ``127.0.0.1``/``localhost`` Host headers are accepted).

    Tool results come back as plain JSON bodies, not one-event SSE streams: the MCP client stops reading an SSE
    reply at its result and closes the response unfinished, which costs its HTTP connection, so every call
    opened a new one (measured: 9.5 → 5.3 ms per call, a third less server CPU).
    """
    server = build_server(sandbox, journal, state_key)
    return server.streamable_http_app(streamable_http_path=MCP_PATH, host=host, json_response=True)


async def serve_async(
    sandbox: Path, host: str = "127.0.0.1", port: int = 8765, journal: Path | None = None, state_key: bytes = DEMO_STATE_KEY
) -> None:
    """Serve until cancelled; print one ready line (with the real port, also for ``port=0``) once listening."""
    import uvicorn

    app = build_app(sandbox, journal, host=host, state_key=state_key)
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on", proxy_headers=False))
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            await task  # re-raise the start-up failure
            raise SystemExit(1)
        await asyncio.sleep(0.02)
    bound = server.servers[0].sockets[0].getsockname()[1] if server.servers else port
    where = f"{'[' + host + ']' if ':' in host else host}:{bound}"
    journal_note = f", journal {Path(journal).resolve()}" if journal is not None else ""
    print(f"demo-tools ready: http://{where}{MCP_PATH} (sandbox {Path(sandbox).resolve()}{journal_note})", flush=True)
    sys.stdout.flush()
    await task


def serve(
    sandbox: Path, host: str = "127.0.0.1", port: int = 8765, journal: Path | None = None, state_key: bytes = DEMO_STATE_KEY
) -> None:
    """Blocking :func:`serve_async` for the CLI."""
    try:
        asyncio.run(serve_async(sandbox, host, port, journal, state_key))
    except KeyboardInterrupt:
        pass
