"""Raw A2A JSON-RPC over httpx, and the two ways a paused task is answered.

Both servers speak a2a-sdk 1.x JSON-RPC at ``/`` (``SendMessage``, non-streaming: the call returns once the task
reaches ``input-required`` or a terminal state). They differ only in what a pause looks like and how it is
approved:

- Gatehouse: the status message has a data part ``{"interrupt_type": "tool_approval", "action_requests": [...]}``;
  the decision is a data part ``{"decision_type": "approve"}`` on the same task and context.
- plain ADK (``to_a2a``): the status message has a data part for ADK's ``adk_request_confirmation`` function call
  (metadata ``adk_type: function_call``); the decision is a data part holding its ``function_response``
  ``{"name": "adk_request_confirmation", "id": <that call's id>, "response": {"confirmed": true}}``.

Each server is reached through an :class:`Endpoint`: its URL, its protocol, and the headers of every request to it
(the A2A ones, plus ``Authorization: Bearer <token>`` for a server that authenticates its callers; the target
says which, see ``Target.request_headers``).

Every failure is a :class:`StepError` whose ``kind`` is what the loss scenario counts.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx

__all__ = ["A2A_HEADERS", "Endpoint", "Paused", "Protocol", "StepError", "approve", "bearer_headers", "pause",
           "send_message"]

A2A_HEADERS: Mapping[str, str] = {"A2A-Version": "1.0", "Content-Type": "application/json"}
Protocol = Literal["gatehouse", "adk"]
INPUT_REQUIRED = "TASK_STATE_INPUT_REQUIRED"
COMPLETED = "TASK_STATE_COMPLETED"


class StepError(Exception):
    """One request that did not do what it should. ``kind``: http, rpc, state or shape."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail


def bearer_headers(token: str | None) -> dict[str, str]:
    """The headers of every request to a server: the A2A ones, and ``Authorization: Bearer`` when ``token`` is set."""
    headers = dict(A2A_HEADERS)
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


@dataclass(frozen=True)
class Endpoint:
    """One server as the client sees it: where it is, how a pause is answered, what every request carries."""

    url: str
    protocol: Protocol
    headers: Mapping[str, str] = field(default_factory=lambda: dict(A2A_HEADERS), repr=False)  # repr: no token in logs


@dataclass(frozen=True)
class Paused:
    """A task waiting for approval, and what answering it needs."""

    task_id: str
    context_id: str
    token: str  # ADK: the adk_request_confirmation call id; Gatehouse: the first action request id
    seconds: float


async def send_message(http: httpx.AsyncClient, url: str, message: dict[str, Any],
                       headers: Mapping[str, str] = A2A_HEADERS) -> dict[str, Any]:
    """``SendMessage`` with ``message``; the JSON-RPC ``result``'s task (or message), or :class:`StepError`."""
    body = {"jsonrpc": "2.0", "id": uuid.uuid4().hex, "method": "SendMessage", "params": {"message": message}}
    try:
        response = await http.post(url, json=body, headers=headers)
    except httpx.HTTPError as exc:
        raise StepError("http", f"{type(exc).__name__}: {exc}") from None
    if response.status_code != 200:
        raise StepError("http", f"HTTP {response.status_code}: {response.text[:200]}")
    try:
        payload = response.json()
    except ValueError:
        raise StepError("http", f"not JSON: {response.text[:200]}") from None
    if "error" in payload:
        raise StepError("rpc", str(payload["error"])[:300])
    result = payload.get("result") or {}
    task = result.get("task")
    if task is None:
        raise StepError("shape", f"no task in the result: {str(result)[:200]}")
    return task


def _message(parts: list[dict[str, Any]], task_id: str = "", context_id: str = "") -> dict[str, Any]:
    msg: dict[str, Any] = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": parts}
    if task_id:
        msg["taskId"] = task_id
    if context_id:
        msg["contextId"] = context_id
    return msg


def _status_parts(task: dict[str, Any]) -> list[dict[str, Any]]:
    return ((task.get("status") or {}).get("message") or {}).get("parts") or []


def _state(task: dict[str, Any]) -> str:
    return (task.get("status") or {}).get("state", "?")


def _token(protocol: Protocol, task: dict[str, Any]) -> str:
    for part in _status_parts(task):
        data = part.get("data")
        if not isinstance(data, dict):
            continue
        if protocol == "adk" and data.get("name") == "adk_request_confirmation" and data.get("id"):
            return str(data["id"])
        if protocol == "gatehouse" and data.get("interrupt_type") == "tool_approval":
            requests = data.get("action_requests") or []
            if requests and requests[0].get("id"):
                return str(requests[0]["id"])
    raise StepError("shape", f"input-required without a readable approval request: {str(_status_parts(task))[:300]}")


async def pause(http: httpx.AsyncClient, endpoint: Endpoint, text: str) -> Paused:
    """Send ``text`` on a new conversation; it must come back ``input-required`` with an approval request."""
    start = time.perf_counter()
    task = await send_message(http, endpoint.url, _message([{"text": text}]), endpoint.headers)
    seconds = time.perf_counter() - start
    if _state(task) != INPUT_REQUIRED:
        raise StepError("state", f"pause ended {_state(task)}, not input-required")
    return Paused(task["id"], task.get("contextId", ""), _token(endpoint.protocol, task), seconds)


def decision_part(protocol: Protocol, paused: Paused) -> dict[str, Any]:
    if protocol == "gatehouse":
        return {"data": {"decision_type": "approve"}}
    return {
        "data": {"name": "adk_request_confirmation", "id": paused.token, "response": {"confirmed": True}},
        "metadata": {"adk_type": "function_response"},
    }


async def approve(http: httpx.AsyncClient, endpoint: Endpoint, paused: Paused) -> float:
    """Approve ``paused``; the task must end ``completed``. Returns the seconds the call took."""
    start = time.perf_counter()
    message = _message([decision_part(endpoint.protocol, paused)], paused.task_id, paused.context_id)
    task = await send_message(http, endpoint.url, message, endpoint.headers)
    seconds = time.perf_counter() - start
    if _state(task) != COMPLETED:
        raise StepError("state", f"approval ended {_state(task)}, not completed")
    return seconds
