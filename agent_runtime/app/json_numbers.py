"""Whole numbers leave the A2A endpoint as JSON integers.

a2a-sdk 1.x carries data parts and metadata as protobuf ``Struct`` values, whose only number is a double, and Python's
protobuf JSON printer writes every one of them with a fraction: ``approvers.required`` went out as ``1.0``, a tool's
``count`` argument of ``3`` as ``3.0``. Clients that type their fields (kagent's Go and TypeScript code, a pydantic
model with strict ints, ``jq '. == 1'`` in a script) then see a float where the agent meant an integer. The canonical
proto3 JSON mapping, as Go's ``protojson`` prints it, writes an integral double without a fraction; so do we, at the
one edge every A2A answer passes (unary JSON-RPC responses and each server-sent event of a stream).

A JSON number has no int/float distinction of its own (RFC 8259): ``1`` and ``1.0`` are the same value, so this
changes no value a client reads, only its spelling. Non-integral numbers are left as they are.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

Endpoint = Callable[[Request], Awaitable[Response]]


# How json.dumps writes a whole float as a value ("1.0", "-2.0", "1e+20"), after ":", "[" or ",": a document with no
# such token needs no parsing (a string holding one only costs the parse).
_WHOLE_FLOAT = re.compile(r"[:\[,]\s*-?\d+(?:\.0|e\+\d+)\s*[,\]}]")


def _may_hold_whole_floats(text: str) -> bool:
    return (".0" in text or "e+" in text) and _WHOLE_FLOAT.search(text) is not None  # substring test first: cheap


def _number(token: str) -> int | float:
    value = float(token)
    return int(value) if value.is_integer() else value


def integral_text(text: str) -> str:
    """A JSON document's text with its whole floats written as integers (anything else returned unchanged)."""
    if not _may_hold_whole_floats(text):
        return text
    try:
        parsed = json.loads(text, parse_float=_number)  # the parser's own hook: no second walk over the document
    except ValueError:
        return text
    return json.dumps(parsed, ensure_ascii=False)


async def _integral_events(events: AsyncIterator[Any]) -> AsyncIterator[Any]:
    async for event in events:
        if isinstance(event, dict) and isinstance(event.get("data"), str):
            event = {**event, "data": integral_text(event["data"])}
        yield event


def _integral_endpoint(endpoint: Endpoint) -> Endpoint:
    async def integral_endpoint(request: Request) -> Response:
        response = await endpoint(request)
        if isinstance(response, JSONResponse):
            text = bytes(response.body).decode()
            if not _may_hold_whole_floats(text):
                return response
            headers = {k: v for k, v in response.headers.items() if k.lower() != "content-length"}
            return JSONResponse(json.loads(text, parse_float=_number), status_code=response.status_code,
                                headers=headers, background=response.background)
        iterator = getattr(response, "body_iterator", None)  # sse-starlette's EventSourceResponse: one dict per event
        if iterator is not None:
            # sse-starlette's response has body_iterator; Response does not declare it
            response.body_iterator = _integral_events(iterator)  # type: ignore[attr-defined]
        return response

    return integral_endpoint


def whole_numbers_as_integers(routes: Sequence[BaseRoute]) -> list[BaseRoute]:
    """``routes`` (a2a-sdk's JSON-RPC routes) with each endpoint's answers passed through :func:`integral_text`."""
    out: list[BaseRoute] = []
    for route in routes:
        if isinstance(route, Route):
            route = Route(route.path, _integral_endpoint(route.endpoint), methods=sorted(route.methods or ()),
                          name=route.name, include_in_schema=route.include_in_schema)
        out.append(route)
    return out


__all__ = ["integral_text", "whole_numbers_as_integers"]
