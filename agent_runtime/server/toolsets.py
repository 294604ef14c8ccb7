"""ADK ``McpToolset`` per ``AgentConfig.mcp_servers`` entry, and listing their tools once at start-up.

Each toolset connects over streamable HTTP or SSE, offers only the server's ``tool_names``, sends the
headers whose values come from the environment variables the config names (read when the toolset is
built, at start-up), and caches ``tools/list`` so no request re-lists tools. While that list is cached,
every model call gets the same tool objects with their declarations built once (:class:`CachingMcpToolset`).

MCP elicitation, in the 2026-07-28 multi-round-trip form only: ADK's modern handshake is turned on (it falls back to
the legacy one for older servers), the elicitation capability is declared with a callback that refuses every
in-session request (so no MCP request is ever held open through a human wait), and a tool call that comes back
``input_required`` with questions pauses like a gated call (:meth:`DeclaredOnceMcpTool._run_async_impl`; the round
is stored by :mod:`agent_runtime.elicitations`); the answer is sent by :meth:`CachingMcpToolset.continue_call`.

HTTP connections (:func:`mcp_http_client`; SSE: :func:`sse_http_client`): an idle pooled connection is dropped after
:data:`KEEPALIVE_SECONDS`, well before a server's own keep-alive timeout (uvicorn's, Node's, Apache's: 5 s), so a call
is never written to a connection the server is closing at that moment. A request whose connection still fails fails
alone, as a JSON-RPC error of its own (the MCP SDK would otherwise end the whole session, and with it every call in
flight on it); a call that may have reached the server is never sent again, one that provably did not leave is (a
connect that failed, a session found dead before the call was written: :meth:`DeclaredOnceMcpTool._call_once`).
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
import warnings
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import httpx2
import mcp_types
from google.adk.agents.readonly_context import ReadonlyContext
from google.adk.auth.auth_credential import AuthCredential
from google.adk.features import FeatureName, override_feature_enabled
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.mcp_tool import McpTool, McpToolset
from google.adk.tools.mcp_tool.mcp_session_manager import SseConnectionParams, StreamableHTTPConnectionParams
from google.adk.tools.mcp_tool.mcp_tool import _dump_mcp_model
from google.adk.tools.tool_context import ToolContext
from google.genai import types
from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT

from agent_runtime.approvals import execution
from agent_runtime.contract.agent_config import McpServerConfig
from agent_runtime.elicitations import elicitation_wire
from agent_runtime.runs.run_scope import CURRENT_RUN, PendingElicitation, RunScope

TOOL_LIST_CACHE_SECONDS = 3600.0
# An idle pooled HTTP connection older than this is closed rather than reused: below the shortest keep-alive timeout
# common servers use (gunicorn 2 s; uvicorn, Node, Apache 5 s), with a margin, because the server's clock starts when
# it wrote its response and ours only when we read it. httpx's default (5 s) equals uvicorn's, which is a race: the
# request goes out just as the server closes the connection, and it fails without reaching the tool.
KEEPALIVE_SECONDS = 1.0
STATE_ROUNDS = 10  # an input_required with only requestState is retried at once, this often at most (as the SDK does)
PLACEHOLDER = {"error": "waiting for the user's answer to the tool's question"}


@dataclass
class _Round:
    """What one ADK call of an MCP tool sends beyond the arguments, and the typed result it got."""

    responses: dict[str, Any] | None = None
    state: str | None = None
    raw: Any = None
    connected: bool = False  # this attempt got a pooled session
    started: bool = False  # this attempt's call_tool began (it may have been sent from then on)


_ROUND: ContextVar[_Round | None] = ContextVar("gatehouse_mcp_round", default=None)


class _InputRequiredSession:
    """The pooled MCP session as ADK's ``McpTool`` uses it, except that ``call_tool`` accepts an ``input_required``
    result (ADK passes no ``allow_input_required``: the SDK would raise and the questions would be lost) and keeps the
    typed result for the tool; everything else is the session's own."""

    def __init__(self, inner: Any, round_: _Round) -> None:
        self._inner = inner
        self._round = round_

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def call_tool(self, name: str, arguments: Any = None, read_timeout_seconds: Any = None,
                        progress_callback: Any = None, **kwargs: Any) -> Any:
        kwargs.update(input_responses=_input_responses(self._round.responses), request_state=self._round.state,
                      allow_input_required=True)
        self._round.started = True
        result = await self._inner.call_tool(name, arguments, read_timeout_seconds, progress_callback, **kwargs)
        self._round.raw = result
        return result


def _input_responses(responses: dict[str, Any] | None) -> dict[str, Any] | None:
    return {k: mcp_types.ElicitResult.model_validate(v) for k, v in responses.items()} if responses else None


def _step(raw: mcp_types.InputRequiredResult) -> elicitation_wire.ToolRound:
    """An ``input_required`` result: questions for the human, a problem (the result), or "call again now" (neither)."""
    requests = {k: v.model_dump(mode="json", by_alias=True, exclude_none=True) for k, v in (raw.input_requests or {}).items()}
    plan = elicitation_wire.plan_round(requests)
    if plan.problem:
        return elicitation_wire.ToolRound(result=elicitation_wire.failed_result(plan.problem))
    return elicitation_wire.ToolRound(questions=plan.form or None, preset=plan.preset, request_state=raw.request_state,
                               note=plan.note)


def _as_result(raw: Any) -> dict[str, Any]:
    result = _dump_mcp_model(raw)  # the very dict ADK makes of a tool result, so the model reads both alike
    result.pop("resultType", None)
    return result


def _conflict(scope: RunScope | None, tool: str) -> str:
    if scope is None:
        return "this run has no channel to a human, so the tool's question cannot be asked"
    if scope.pending or scope.questions or scope.eliciting:
        return (f"another call of this model turn waits for the human; call {tool} again after it is answered "
                "(the tool asked the user a question, which was not asked)")
    return ""


async def refuse_in_session(context: Any, params: Any) -> mcp_types.ErrorData:
    """The elicitation callback: declares the capability, and answers every in-session request (a 2025-11-25 server
    asking mid-call) with an error at once, so nothing waits on a human inside an MCP request."""
    return mcp_types.ErrorData(code=mcp_types.INVALID_REQUEST, message=(
        "elicitation is supported only as a 2026-07-28 input_required result (multi round-trip), not in-session"))


_HANDSHAKE = frozenset({"initialize", "server/discover"})  # a JSON-RPC error to these means "legacy server" to the SDK
_NOT_SENT = (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.PoolTimeout)  # raised before a byte of it was written


class _OneCallFails(httpx2.AsyncClient):
    """The MCP transports' HTTP client, on which a transport failure fails only the request it happened to.

    The MCP SDK runs every request's POST in the session's task group, so an exception from one POST (a connection
    the server closed as the request went out, a reset) ends the session and fails every call in flight on it with
    "Connection closed", calls that ran included. Here a request's transport failure becomes an HTTP 502 whose body is
    a JSON-RPC error saying whether the request left (the SDK hands that error to the request's caller alone, and the
    session stays up). A connect failure (nothing sent) is tried once more on a new connection. A JSON response is
    read here, so a failure reading it is caught too; a streamed (SSE) one is not: the SDK already fails only its own
    request. The handshake's requests keep the SDK's behaviour (an error reply to them would read as a legacy server).
    """

    async def send(self, request: httpx2.Request, **kwargs: Any) -> httpx2.Response:
        message = _jsonrpc_request(request)
        if message is None:
            return await super().send(request, **kwargs)
        for attempt in range(2):
            response: httpx2.Response | None = None
            try:
                response = await super().send(request, **kwargs)
                if response.is_success and response.headers.get("content-type", "").startswith("application/json"):
                    await response.aread()
                return response
            except httpx2.TransportError as exc:
                if response is not None:
                    await response.aclose()
                if isinstance(exc, httpx2.ConnectError) and attempt == 0:
                    continue
                return _failed(request, message, exc, sent=response is not None or not isinstance(exc, _NOT_SENT))
        raise AssertionError("unreachable")


def _jsonrpc_request(request: httpx2.Request) -> dict[str, Any] | None:
    """The JSON-RPC request a POST carries (not a notification nor a handshake message), else None."""
    if request.method != "POST":
        return None
    try:
        message = json.loads(request.content)
    except (ValueError, httpx2.RequestNotRead):
        return None
    if not isinstance(message, dict) or "id" not in message or message.get("method") in _HANDSHAKE:
        return None
    return message


def _failed(request: httpx2.Request, message: dict[str, Any], exc: httpx2.TransportError, *, sent: bool) -> httpx2.Response:
    what = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if sent:
        text = f"the connection to the MCP server failed after the request was sent ({what}); {execution.MAY_HAVE_REACHED}"
    else:
        text = f"the MCP server could not be reached ({what}); {execution.NOT_SENT}"
    error = {"code": mcp_types.CONNECTION_CLOSED, "message": text}
    return httpx2.Response(502, json={"jsonrpc": "2.0", "id": message["id"], "error": error}, request=request)


def mcp_http_client(
    headers: dict[str, str] | None = None, timeout: httpx2.Timeout | None = None, auth: httpx2.Auth | None = None
) -> httpx2.AsyncClient:
    """The streamable HTTP transport's client: the MCP SDK's default one (its timeouts; redirects left to the SDK) with
    idle connections dropped after :data:`KEEPALIVE_SECONDS` and a transport failure failing only its own request."""
    return _OneCallFails(**_client_settings(headers, timeout, auth))


def sse_http_client(
    headers: dict[str, str] | None = None, timeout: httpx2.Timeout | None = None, auth: httpx2.Auth | None = None
) -> httpx2.AsyncClient:
    """The SSE transport's client: idle connections dropped after :data:`KEEPALIVE_SECONDS`. (Its replies come on the
    event stream, not on the POST, so a failed POST cannot be answered for its request alone.)"""
    return httpx2.AsyncClient(**_client_settings(headers, timeout, auth))


def _client_settings(headers: dict[str, str] | None, timeout: httpx2.Timeout | None, auth: httpx2.Auth | None
                     ) -> dict[str, Any]:
    limits = httpx2.Limits(max_connections=100, max_keepalive_connections=20, keepalive_expiry=KEEPALIVE_SECONDS)
    timeout = timeout or httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT)  # the SDK's defaults
    return {"headers": headers, "timeout": timeout, "auth": auth, "limits": limits}


class MissingHeaderSecret(RuntimeError):
    pass


def _headers(server: McpServerConfig, env: Mapping[str, str]) -> dict[str, str]:
    headers = {}
    for header in server.headers:
        name = header.value_from.env
        if name not in env:
            raise MissingHeaderSecret(
                f"MCP server {server.name!r}: header {header.name!r} needs environment variable {name} "
                f"(from Secret {header.value_from.secret!r}, key {header.value_from.key!r}), which is not set"
            )
        headers[header.name] = env[name]
    return headers


class DeclaredOnceMcpTool(McpTool):
    """An ``McpTool`` whose declarations (plain and fenced) are built on first use and then reused.

    ADK rebuilds both on every model call (JSON schema → Gemini schema, description fencing): with four tools,
    7% of the function calls of a pause and its resume. The declarations derive only from the MCP tool listing,
    which does not change while the tool object lives, and nothing downstream mutates a declaration it is handed.
    """

    def _get_declaration(self) -> types.FunctionDeclaration:
        return self._declared("_plain_declaration", super()._get_declaration)

    def _build_fenced_declaration(self) -> types.FunctionDeclaration:
        return self._declared("_fenced_declaration", super()._build_fenced_declaration)

    def _declared(self, slot: str, build: Callable[[], types.FunctionDeclaration]) -> types.FunctionDeclaration:
        declaration: types.FunctionDeclaration | None = self.__dict__.get(slot)
        if declaration is None:
            declaration = self.__dict__[slot] = build()
        return declaration

    @property
    def server_name(self) -> str | None:
        return self.__dict__.get("_gatehouse_server")

    async def _create_session(self, *, headers: dict[str, str] | None) -> Any:
        session = await super()._create_session(headers=headers)
        current = _ROUND.get()
        if current is None:
            return session
        current.connected = True
        return _InputRequiredSession(session, current)

    async def _call_once(self, current: _Round, args: Any, tool_context: ToolContext, credential: AuthCredential) -> Any:
        """ADK's call; sent once more on a fresh session only if the pooled one was found dead before the call began.

        ADK hands out the pooled session after checking it is alive, then checks again just before the call
        (``SessionContext._run_guarded``): a transport that ended in between fails the call with ``ConnectionError``
        without running it (its coroutine is closed unstarted). Nothing was sent, so it is sent again, once; ADK's
        pool replaces the dead session. Any other failure may have reached the tool and is returned as it is.
        """
        for attempt in range(2):
            current.connected = current.started = False
            try:
                return await super()._run_async_impl(args=args, tool_context=tool_context, credential=credential)
            except ConnectionError as exc:
                if current.started:
                    raise
                if attempt or not current.connected:  # no call began on any attempt: say so (approvals/execution.py)
                    raise ConnectionError(f"{exc}; {execution.NOT_SENT}") from exc
        raise AssertionError("unreachable")

    async def _run_async_impl(self, *, args: Any, tool_context: ToolContext, credential: AuthCredential) -> Any:
        """ADK's call, taking an ``input_required`` result: questions pause the run (:meth:`_pause`)."""
        current = _Round()
        token = _ROUND.set(current)
        note = ""
        try:
            for attempt in range(STATE_ROUNDS):
                result = await self._call_once(current, args, tool_context, credential)
                if not isinstance(current.raw, mcp_types.InputRequiredResult):
                    return elicitation_wire.with_note(result, note) if isinstance(result, dict) else result
                step = _step(current.raw)
                note = " ".join(n for n in (note, step.note) if n)
                if step.result is not None:
                    return step.result
                if step.questions:
                    return self._pause(args, tool_context, step, note)
                current.responses, current.state, current.raw = step.preset or None, step.request_state, None
                await asyncio.sleep(min(0.05 * (attempt + 1), 0.25))
            return elicitation_wire.failed_result(f"{self.name} kept asking to be called again")
        finally:
            _ROUND.reset(token)

    def _pause(self, args: dict[str, Any], tool_context: ToolContext, step: elicitation_wire.ToolRound, note: str) -> Any:
        scope = CURRENT_RUN.get()
        problem = _conflict(scope, self.name)
        if problem:
            return elicitation_wire.failed_result(problem)
        assert scope is not None and step.questions
        request_id = f"eli-{uuid.uuid4().hex[:16]}"
        hint = next(iter(step.questions.values())).message
        # The same pause as a gated call's (server/gate.py): ADK ends the run, the model never sees the placeholder.
        tool_context.request_confirmation(hint=hint, payload={"kind": "elicitation", "request_id": request_id})
        tool_context.actions.skip_summarization = True
        questions = {k: v.model_dump(mode="json") for k, v in step.questions.items()}
        scope.eliciting.append(PendingElicitation(request_id, tool_context.function_call_id or "", self.name,
                                                  self.server_name, dict(args), questions, step.preset,
                                                  step.request_state, note))
        return dict(PLACEHOLDER)

    async def continue_call(
        self, args: dict[str, Any], responses: dict[str, Any], state: str | None
    ) -> elicitation_wire.ToolRound:
        """Retry the call with the answers and the server's state (once; the caller claimed it), outside ADK."""
        note = ""
        for attempt in range(STATE_ROUNDS):
            manager = self._mcp_session_manager
            try:
                session = await self._create_session(headers=None)  # the toolset's headers are in its connection
                manager._begin_session_use(None)
                try:
                    raw = await session.call_tool(self._mcp_tool.name, arguments=args, allow_input_required=True,
                                                  input_responses=_input_responses(responses), request_state=state)
                finally:
                    manager._end_session_use(None)
            except Exception as exc:  # as ADK reports a failed MCP call to the model
                return elicitation_wire.ToolRound(result={"error": f"MCP tool execution failed: {exc}"}, note=note)
            if not isinstance(raw, mcp_types.InputRequiredResult):
                return elicitation_wire.ToolRound(result=_as_result(raw), note=note)
            step = _step(raw)
            note = " ".join(n for n in (note, step.note) if n)
            if step.result is not None or step.questions:
                return elicitation_wire.ToolRound(result=step.result, questions=step.questions, preset=step.preset,
                                           request_state=step.request_state, note=note)
            responses, state = step.preset, step.request_state
            await asyncio.sleep(min(0.05 * (attempt + 1), 0.25))
        return elicitation_wire.ToolRound(result=elicitation_wire.failed_result(f"{self.name} kept asking to be called again"))


class CachingMcpToolset(McpToolset):
    """``McpToolset`` that hands out the same tool objects for as long as its cached ``tools/list`` is current.

    ADK's ``get_tools`` builds fresh ``McpTool`` objects on every model call, with no factory to override; the
    first object built for a listed tool is kept (re-classed as :class:`DeclaredOnceMcpTool`, which adds no
    state but the memo) and returned again while the listing it came from is the cached one.
    """

    def __init__(self, *args: Any, server_name: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._kept: dict[str, tuple[object, McpTool]] = {}  # tool name → (the listing entry it came from, tool)
        self._handed: tuple[object, list[BaseTool]] | None = None  # (the cached listing, the tools handed out for it)
        self.server_name = server_name

    def forget_listing(self) -> None:
        """Drop the cached ``tools/list``: the next :meth:`get_tools` lists the server again."""
        self._tool_list_cache.clear()
        self._handed = None

    async def continue_call(
        self, tool: str, args: dict[str, Any], responses: dict[str, Any], state: str | None
    ) -> elicitation_wire.ToolRound:
        """Retry ``tool``'s call with the user's answers (:meth:`DeclaredOnceMcpTool.continue_call`)."""
        found = next((t for t in await self.get_tools() if t.name == tool), None)
        if not isinstance(found, DeclaredOnceMcpTool):
            return elicitation_wire.ToolRound(result=elicitation_wire.failed_result(f"the tool {tool} is no longer offered"))
        return await found.continue_call(args, responses, state)

    async def get_tools(self, readonly_context: ReadonlyContext | None = None) -> list[BaseTool]:
        # ADK filters the cached listing and builds an McpTool per listed tool on every model call (~0.15 ms); with a
        # fixed list of names as the filter the result depends on the listing alone, so while ADK's cache still holds
        # the listing the previous call's tools are handed out again.
        fixed = self.tool_filter is None or isinstance(self.tool_filter, list)
        listing = await self._cached_listing(readonly_context) if fixed else None
        if listing is not None and self._handed is not None and self._handed[0] is listing:
            return list(self._handed[1])
        tools = [self._keep(tool) for tool in await super().get_tools(readonly_context)]
        listing = await self._cached_listing(readonly_context) if fixed else None
        self._handed = (listing, tools) if listing is not None else None
        return list(tools)

    async def _cached_listing(self, readonly_context: ReadonlyContext | None) -> object | None:
        """ADK's unexpired cached ``tools/list`` for this context's headers (the very list object), or None."""
        headers = await self._build_headers(readonly_context)
        return self._read_tool_list_cache(self._tool_list_cache_key(headers))

    def _keep(self, tool: BaseTool) -> BaseTool:
        if type(tool) is not McpTool:
            return tool
        listed = tool.raw_mcp_tool
        kept = self._kept.get(tool.name)
        if kept is not None and kept[0] is listed:
            return kept[1]
        tool.__class__ = DeclaredOnceMcpTool
        tool.__dict__["_gatehouse_server"] = self.server_name
        self._kept[tool.name] = (listed, tool)
        return tool


def build_toolset(server: McpServerConfig, env: Mapping[str, str] | None = None) -> CachingMcpToolset:
    # The 2026-07-28 handshake (server/discover, falling back to initialize): input_required results need it.
    override_feature_enabled(FeatureName._MCP_MODERN_PROTOCOL, True)
    # Chosen on purpose (an older server still gets the legacy handshake): ADK's "experimental" notice says nothing new.
    warnings.filterwarnings("ignore", message=r"\[EXPERIMENTAL\] feature MCP_MODERN_PROTOCOL", category=UserWarning)
    headers = _headers(server, os.environ if env is None else env) or None
    params: StreamableHTTPConnectionParams | SseConnectionParams
    # ADK types the factory with httpx 1.x for a type checker; with the MCP SDK 2.x it calls it with (and for) httpx2.
    factory: Any
    if server.protocol == "SSE":
        factory = sse_http_client
        params = SseConnectionParams(url=server.url, headers=headers, timeout=server.timeout_seconds,
                                     httpx_client_factory=factory)
    else:
        factory = mcp_http_client
        params = StreamableHTTPConnectionParams(url=server.url, headers=headers, timeout=server.timeout_seconds,
                                                httpx_client_factory=factory)
    return CachingMcpToolset(
        connection_params=params,
        tool_filter=list(server.tool_names),
        tool_list_cache_ttl_seconds=TOOL_LIST_CACHE_SECONDS,
        elicitation_callback=refuse_in_session,
        server_name=server.name,
    )


class ToolServerUnreachable(Exception):
    """Listing one MCP server's tools failed; says which server, and why."""

    def __init__(self, server: str, cause: BaseException) -> None:
        self.server = server
        super().__init__(f"MCP server {server}: {type(cause).__name__}: {cause}")


async def list_tool_servers(toolsets: Mapping[str, McpToolset]) -> dict[str, str | None]:
    """List each server's tools (fills the cache); return tool name → server name."""
    servers: dict[str, str | None] = {}
    for server_name, toolset in toolsets.items():
        try:
            tools = await toolset.get_tools()
        except Exception as exc:
            raise ToolServerUnreachable(server_name, exc) from exc
        for tool in tools:
            servers[tool.name] = server_name
    return servers


__all__ = [
    "KEEPALIVE_SECONDS", "CachingMcpToolset", "DeclaredOnceMcpTool", "MissingHeaderSecret", "ToolServerUnreachable",
    "build_toolset", "list_tool_servers", "mcp_http_client", "refuse_in_session", "sse_http_client",
]
