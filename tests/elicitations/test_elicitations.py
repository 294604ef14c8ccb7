"""The pure parts of MCP elicitation (elicitations/wire.py) and the store's compare-and-swap (elicitations/store.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent_runtime.elicitations import elicitation_wire
from agent_runtime.elicitations.store import ElicitationAlreadyAnswered, ElicitationRecord, ElicitationStore
from agent_runtime.infra.database import Database, default_database_url

SCHEMA = {"type": "object", "required": ["overwrite"],
          "properties": {"overwrite": {"type": "boolean"}, "note": {"type": "string", "format": "email"}}}
PROMPT = elicitation_wire.ElicitationPrompt(id="eli-1", call_id="c", tool="put_file", server="s", expires_at="x",
                                     requests={"k": elicitation_wire.FormRequest(message="Overwrite?", requested_schema=SCHEMA)})


def _form(schema: Any = SCHEMA, mode: str = "form") -> dict[str, Any]:
    params: dict[str, Any] = {"mode": mode, "message": "m"}
    if mode == "form":
        params["requestedSchema"] = schema
    else:
        params["url"] = "https://example.test/auth"
    return {"method": "elicitation/create", "params": params}


def test_plan_round_shows_form_questions_and_declines_url_mode_itself() -> None:
    plan = elicitation_wire.plan_round({"a": _form(), "b": _form(mode="url")})
    assert list(plan.form) == ["a"] and plan.preset == {"b": {"action": "decline"}}
    assert "https://example.test/auth" in plan.note and "declined without asking" in plan.note and not plan.problem


@pytest.mark.parametrize(("requests", "needle"), [
    ({"a": {"method": "sampling/createMessage", "params": {}}}, "sampling/createMessage, which this runtime does not provide"),
    ({"a": _form({"type": "object", "properties": {"x": {"type": "object"}}})}, "field 'x' of the requestedSchema is not"),
    ({"a": _form({"type": "string"})}, "not an object schema with properties"),
    ({"a": _form({"type": "object", "properties": {"x": {"type": "bogus"}}})}, "not a valid JSON schema"),
])
def test_plan_round_refuses_what_it_cannot_ask(requests: dict[str, Any], needle: str) -> None:
    plan = elicitation_wire.plan_round(requests)
    assert needle in plan.problem and not plan.form


def test_parse_answer_is_strict() -> None:
    accept = {"decision_type": "elicitation_response", "action": "accept", "content": {"overwrite": True}}
    assert elicitation_wire.parse_answer([accept], "", PROMPT) == {"k": {"action": "accept", "content": {"overwrite": True}}}
    assert elicitation_wire.parse_answer([], " Decline. ", PROMPT) == {"k": {"action": "decline"}}
    for bad, needle in [
        ({**accept, "content": {"overwrite": 1}}, "1 is not of type 'boolean'"),
        ({**accept, "content": {"overwrite": True, "note": "not-an-email"}}, "is not a 'email'"),
        ({**accept, "content": {"overwrite": True, "extra": 1}}, "did not ask for: extra"),
        ({"decision_type": "elicitation_response", "responses": {"eli-1": {}}}, "exactly once"),
        ({"decision_type": "batch", "decisions": {}}, "never answers it"),
    ]:
        with pytest.raises(elicitation_wire.ElicitationError, match="Nothing was answered") as caught:
            elicitation_wire.parse_answer([bad], "", PROMPT)
        assert needle in str(caught.value), str(caught.value)


@pytest.fixture
async def store(tmp_path: Path) -> ElicitationStore:
    s = ElicitationStore(Database(default_database_url(tmp_path)))
    await s.create_tables()
    return s


async def test_the_retry_is_claimed_once(store: ElicitationStore) -> None:
    record = ElicitationRecord(id="eli-1", task_id="t", context_id="ctx", call_id="c", tool="put_file", server="s",
                               args={"path": "a"}, requests=PROMPT.requests, request_state="opaque", created_at=1.0,
                               expires_at=2.0)
    await store.add(record)
    answered = await store.answer(record, {"k": {"action": "accept", "content": {"overwrite": True}}}, "user")
    with pytest.raises(ElicitationAlreadyAnswered):
        await store.answer(record, {"k": {"action": "decline"}}, "user")  # a second answer to the same round
    retrying = await store.claim_retry(answered)
    with pytest.raises(ElicitationAlreadyAnswered, match="is being continued"):
        await store.claim_retry(answered)  # the retry is claimed once: a second claim loses
    (stored,) = await store.for_task("t")
    assert (stored.status, stored.request_state, stored.outcome) == ("retrying", "opaque", "accept")
    done = await store.finish(retrying, {"content": []})
    assert (done.status, (await store.for_task("t"))[0].result) == ("done", {"content": []})
    assert await store.open_in_context("ctx") == []
