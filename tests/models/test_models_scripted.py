"""ScriptedLlm: rule matching, templating, tool results of the turn, and the example's rules."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from google.adk.models import LlmRequest
from google.genai import types

from agent_runtime.contract.agent_config import ScriptedModel, ScriptedRule, ScriptedToolCall
from agent_runtime.contract.manifests import select_agent_config
from agent_runtime.models.scripted import ScriptedLlm, result_text

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "file-manager"


def example_model() -> ScriptedLlm:
    cfg = select_agent_config([EXAMPLE / "agent.yaml", EXAMPLE / "modelconfig.yaml", EXAMPLE / "mcp-server.yaml"])
    assert isinstance(cfg.model, ScriptedModel)
    return ScriptedLlm.from_config(cfg.model)


def user(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])


def calls(*items: tuple[str, str, dict[str, Any]]) -> types.Content:
    return types.Content(
        role="model",
        parts=[types.Part(function_call=types.FunctionCall(id=i, name=n, args=a)) for i, n, a in items],
    )


def responses(*items: tuple[str, str, dict[str, Any]]) -> types.Content:
    return types.Content(
        role="user",
        parts=[types.Part(function_response=types.FunctionResponse(id=i, name=n, response=r)) for i, n, r in items],
    )


def mcp(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": False}


async def ask(model: ScriptedLlm, *contents: types.Content) -> types.Content:
    out = [r async for r in model.generate_content_async(LlmRequest(contents=list(contents)))]
    assert len(out) == 1
    assert out[0].usage_metadata is not None
    assert out[0].content is not None
    return out[0].content


def text_of(content: types.Content) -> str:
    return "".join(p.text or "" for p in content.parts or [])


def function_calls(content: types.Content) -> list[tuple[str, dict[str, Any]]]:
    return [(p.function_call.name or "", dict(p.function_call.args or {})) for p in content.parts or [] if p.function_call]


async def test_first_matching_rule_calls_its_tools_with_templated_args() -> None:
    answer = await ask(example_model(), user("read notes.txt"))
    assert answer.role == "model"
    assert function_calls(answer) == [("read_file", {"path": "notes.txt"})]


async def test_parallel_calls_in_one_response() -> None:
    answer = await ask(example_model(), user("clean up a.txt and b.txt"))
    assert function_calls(answer) == [
        ("delete_file", {"path": "a.txt"}),
        ("delete_file", {"path": "b.txt"}),
        ("list_dir", {"path": ""}),
    ]
    assert all(p.function_call and p.function_call.id is None for p in answer.parts or [])


async def test_reply_after_tool_results_in_call_order() -> None:
    model = example_model()
    answer = await ask(
        model,
        user("clean up a.txt and b.txt"),
        calls(("c1", "delete_file", {"path": "a.txt"}), ("c2", "delete_file", {"path": "b.txt"}), ("c3", "list_dir", {})),
        # results arrive out of order; the reply follows the calls' order
        responses(("c3", "list_dir", mcp("c.txt")), ("c1", "delete_file", mcp("deleted a.txt"))),
        responses(("c2", "delete_file", {"error": "denied by a human: keep it"})),
    )
    assert text_of(answer) == "Clean-up finished: deleted a.txt; denied by a human: keep it; c.txt"
    assert function_calls(answer) == []


async def test_adk_confirmation_round_trip_is_not_a_result() -> None:
    answer = await ask(
        example_model(),
        user("delete a.txt"),
        calls(("c1", "delete_file", {"path": "a.txt"}), ("x1", "adk_request_confirmation", {})),
        responses(("x1", "adk_request_confirmation", {"confirmed": True})),
    )
    assert function_calls(answer) == [("delete_file", {"path": "a.txt"})]  # still waiting: no real result yet
    answer = await ask(
        example_model(),
        user("delete a.txt"),
        calls(("c1", "delete_file", {"path": "a.txt"}), ("x1", "adk_request_confirmation", {})),
        responses(("x1", "adk_request_confirmation", {"confirmed": True})),
        responses(("c1", "delete_file", mcp("deleted /a.txt"))),
    )
    assert text_of(answer) == "Delete of a.txt: deleted /a.txt"


async def test_per_call_result_templates() -> None:
    cfg = ScriptedModel(
        model="m",
        rules=[
            ScriptedRule(
                match=r"two (?P<x>\w+)",
                tool_calls=[ScriptedToolCall(name="a", args={"p": "{x}"}), ScriptedToolCall(name="b", args={"n": 3})],
                reply="{x}: first={result_1} second={result_2}",
            )
        ],
    )
    model = ScriptedLlm.from_config(cfg)
    first = await ask(model, user("please two things"))
    assert function_calls(first) == [("a", {"p": "things"}), ("b", {"n": 3})]  # non-string args pass through
    answer = await ask(
        model,
        user("please two things"),
        calls(("1", "a", {"p": "things"}), ("2", "b", {"n": 3})),
        responses(("1", "a", {"result": "A"}), ("2", "b", {"count": 2})),
    )
    assert text_of(answer) == 'things: first=A second={"count":2}'


async def test_rule_without_tool_calls_replies_directly() -> None:
    model = ScriptedLlm.from_config(
        ScriptedModel(model="m", rules=[ScriptedRule(match=r"hello (?P<name>\w+)", reply="Hi {name}!")])
    )
    assert text_of(await ask(model, user("hello Ada"))) == "Hi Ada!"


async def test_no_match_uses_no_match_reply() -> None:
    answer = await ask(example_model(), user("sing a song"))
    assert text_of(answer).startswith("I can list, read, write or delete files.")


async def test_no_match_default_lists_patterns() -> None:
    model = ScriptedLlm.from_config(ScriptedModel(model="m", rules=[ScriptedRule(match="^a", reply="x")]))
    text = text_of(await ask(model, user("zzz")))
    assert "No scripted rule matched" in text and "'zzz'" in text and "'^a'" in text


async def test_missing_group_is_a_clear_text_reply() -> None:
    model = ScriptedLlm.from_config(
        ScriptedModel(
            model="m",
            rules=[ScriptedRule(match=r"del (?P<path>\S+)", tool_calls=[ScriptedToolCall(name="d", args={"p": "{file}"})])],
        )
    )
    answer = await ask(model, user("del x"))
    assert function_calls(answer) == []
    assert "{file}" in text_of(answer) and "path" in text_of(answer)


async def test_latest_user_text_decides_and_earlier_turns_are_ignored() -> None:
    model = example_model()
    answer = await ask(
        model,
        user("read a.txt"),
        calls(("c1", "read_file", {"path": "a.txt"})),
        responses(("c1", "read_file", mcp("hello"))),
        types.Content(role="model", parts=[types.Part(text="a.txt: hello")]),
        user("delete b.txt"),
    )
    assert function_calls(answer) == [("delete_file", {"path": "b.txt"})]


async def test_deterministic() -> None:
    model = example_model()
    history = [user("clean up a and b")]
    first = await ask(model, *history)
    second = await ask(model, *history)
    assert first == second


def test_no_user_text() -> None:
    model = ScriptedLlm.from_config(ScriptedModel(model="m"))
    assert "no user message" in model.respond([])[0].text  # type: ignore[operator]


def test_invalid_regex_is_reported_at_build() -> None:
    with pytest.raises(ValueError, match="invalid match regex"):
        ScriptedLlm.from_config(ScriptedModel(model="m", rules=[ScriptedRule(match="(")]))


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        ({"content": [{"type": "text", "text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}]}, "a\nb"),
        ({"result": "ok"}, "ok"),
        ({"result": {"n": 1}}, '{"n":1}'),
        ({"error": "boom"}, "boom"),
        ({"b": 2, "a": [1]}, '{"a":[1],"b":2}'),
    ],
)
def test_result_text(response: dict[str, Any], expected: str) -> None:
    assert result_text(response) == expected


async def test_then_calls_follow_the_first_rounds_results_and_the_reply_follows_them() -> None:
    """``then``: a second round once the first round's results are in (e.g. ask the user after an approved call)."""
    model = ScriptedLlm.from_config(ScriptedModel(model="m", rules=[ScriptedRule(
        match=r"^delete (?P<path>\S+) then ask",
        tool_calls=[ScriptedToolCall(name="delete_file", args={"path": "{path}"})],
        then=[ScriptedToolCall(name="hitl_request", args={"question": "{path}: {result}. Next?", "options": ["a", "b"]})],
        reply="after: {result_2}",
    )]))
    first = await ask(model, user("delete x.txt then ask"))
    assert function_calls(first) == [("delete_file", {"path": "x.txt"})]
    history = [user("delete x.txt then ask"), calls(("c1", "delete_file", {"path": "x.txt"})),
               responses(("c1", "delete_file", mcp("deleted x.txt")))]
    second = await ask(model, *history)
    assert function_calls(second) == [("hitl_request", {"question": "x.txt: deleted x.txt. Next?", "options": ["a", "b"]})]
    assert text_of(second) == ""
    history += [calls(("c2", "hitl_request", {"question": "x"})), responses(("c2", "hitl_request", {"selected_option": "b"}))]
    done = await ask(model, *history)
    assert function_calls(done) == [] and text_of(done).startswith("after: ") and "b" in text_of(done)
