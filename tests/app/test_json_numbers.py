"""Whole numbers leave the A2A endpoint as JSON integers (agent_runtime/app/json_numbers.py): the pure rewrite, and
the wrapped route answering a unary and a streamed request (in process; tests/server/test_kagent_hitl_e2e.py checks the
runtime's own answers over HTTP, as a kagent client parses them)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from a2a.helpers import new_data_part
from google.protobuf.json_format import MessageToDict
from sse_starlette.sse import EventSourceResponse
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agent_runtime.app.json_numbers import integral_text, whole_numbers_as_integers

# What a2a-sdk makes of a pause's data part: protobuf's Struct has doubles only.
PAUSE = MessageToDict(new_data_part({"approvers": {"required": 1, "users": ["sre"]}, "args": {"count": 3, "ratio": 0.5}}))


def test_a_struct_writes_integers_as_floats_which_is_what_is_rewritten() -> None:
    assert PAUSE["data"]["approvers"]["required"] == 1.0 and type(PAUSE["data"]["approvers"]["required"]) is float


def test_whole_floats_become_ints_at_any_depth_and_nothing_else_changes() -> None:
    value = {"a": 1.0, "b": [2.0, 2.5, {"c": -0.0}], "d": True, "e": "1.0", "f": None, "g": 1e20}
    out = json.loads(integral_text(json.dumps(value)))
    assert out == {"a": 1, "b": [2, 2.5, {"c": 0}], "d": True, "e": "1.0", "f": None, "g": 10**20}
    assert [type(x) for x in (out["a"], out["b"][1], out["d"], out["g"])] == [int, float, bool, int]


def test_text_without_whole_floats_is_returned_as_it_is() -> None:
    text = '{"a": 1, "b": "x"}'
    assert integral_text(text) is text
    assert json.loads(integral_text(json.dumps(PAUSE)))["data"]["approvers"]["required"] == 1
    assert integral_text("not json .0") == "not json .0"


async def _unary(request: Request) -> Response:
    return JSONResponse({"jsonrpc": "2.0", "id": 1, "result": PAUSE})


async def _stream(request: Request) -> Response:
    async def events() -> AsyncIterator[dict[str, str]]:
        for n in (1.0, 2.5):
            yield {"data": json.dumps({"result": {**PAUSE, "n": n}})}

    return EventSourceResponse(events())


@pytest.mark.parametrize("wrapped", [True, False])
async def test_the_wrapped_route_answers_with_integers_unary_and_streamed(wrapped: bool) -> None:
    routes = [Route("/", _unary, methods=["POST"]), Route("/stream", _stream, methods=["POST"])]
    app = Starlette(routes=whole_numbers_as_integers(routes) if wrapped else routes)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        unary = (await client.post("/")).json()["result"]
        async with client.stream("POST", "/stream") as response:
            streamed = [json.loads(line[5:]) for line in [x async for x in response.aiter_lines()] if line.startswith("data:")]
    required: list[Any] = [unary["data"]["approvers"]["required"]]
    required += [e["result"]["data"]["approvers"]["required"] for e in streamed]
    if not wrapped:  # the unwrapped route is the bug: floats
        assert {type(r) for r in required} == {float}
        return
    assert required == [1, 1, 1] and {type(r) for r in required} == {int}
    assert [e["result"]["n"] for e in streamed] == [1, 2.5] and type(streamed[0]["result"]["n"]) is int
    assert unary["data"]["args"] == {"count": 3, "ratio": 0.5}
