"""Sub-agents end to end: two and three Gatehouse runtimes as real processes, raw A2A JSON-RPC over HTTP.

``files`` is the example file manager (the demo MCP server; reading ``**/.env*`` is gated). ``orchestrator`` offers
``files`` as a tool (Scripted rule ``ask files <request>``) and calls it with its own bearer token; ``files`` trusts it
as a delegator. ``team`` sits between the two for the three-level chain. Every runtime authenticates its callers with
its own token file. What a user sees: the orchestrator's task pauses with the innermost request inside it (marked
with where it comes from), a decision sent to the top runs the call once at the bottom, a deny's reason comes back in
the model's reply, and the sub-agent judges the human — never the parent's account — against its own approvers.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_runtime.contract import wire
from agent_runtime.contract.agent_config import (
    AccessConfig,
    AgentConfig,
    ApprovalPolicy,
    ApproversConfig,
    CardConfig,
    RuleConfig,
    ScriptedModel,
    ScriptedRule,
    ScriptedToolCall,
    SubAgentConfig,
)
from agent_runtime.contract.kagent_hitl import URI as KAGENT_URI
from agent_runtime.contract.manifests import select_agent_config
from agent_runtime.delegation import relay
from tests.support.processes import GATEHOUSE_CMD
from tests.support.runtime import (
    Rpc,
    RuntimeProcess,
    Tools,
    demo_tools,
    interrupt,
    request_ids,
    state,
    status_text,
    wait_for,
    write_manifests,
)

pytestmark = pytest.mark.e2e

SECRET = "SECRET=sub-agent-42"
GATED_READ = RuleConfig(tool="read_file", action="require", arg="path", glob="**/.env*")


@dataclass
class Chain:
    tools: Tools
    files: RuntimeProcess
    team: RuntimeProcess
    top: RuntimeProcess  # orchestrator → files
    top3: RuntimeProcess  # orchestrator → team → files
    gated: RuntimeProcess  # orchestrator → files, whose own policy gates the delegation (editable)


def _tokens(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


def _files_config(base: Path, tools: Tools) -> AgentConfig:
    config = select_agent_config(write_manifests(base / "files-manifests", tools.url))
    approval = config.approval.model_copy(update={"rules": [
        GATED_READ,
        # only bob may decide deletions: a parent's account, or alice through it, never counts
        RuleConfig(tool="delete_file", action="require", approvers=ApproversConfig(users=["bob"])),
    ]})
    access = AccessConfig(delegators=["orchestrator", "team"], max_delegation_depth=2)
    return config.model_copy(update={"name": "files", "approval": approval, "access": access,
                                     "card": CardConfig(name="files")})


def _parent_config(
    name: str, child: str, url: str, token_file: Path, delegators: list[str] | None = None, gate: bool = False,
) -> AgentConfig:
    script = ScriptedModel(model="relay", rules=[ScriptedRule(
        match=rf"^\s*ask {child}\s+(?P<request>.+)", tool_calls=[ScriptedToolCall(name=child, args={"request": "{request}"})],
        reply=f"{child} says: {{result}}",
    )], no_match_reply=f"Try: ask {child} <request>")
    return AgentConfig(
        name=name, model=script, card=CardConfig(name=name),
        sub_agents=[SubAgentConfig(name=child, agent=f"default/{child}", card_url=url + "/", token_file=str(token_file))],
        access=AccessConfig(delegators=delegators or []),
        approval=ApprovalPolicy(rules=[RuleConfig(tool=child, action="require", allow_edit=True)] if gate else []),
    )


def _start(base: Path, name: str, config: AgentConfig, tokens: list[str]) -> RuntimeProcess:
    path = base / f"{name}.json"
    path.write_text(config.to_json())
    proc = RuntimeProcess([], base / f"{name}-state", base / f"{name}.log", extra_args=["--config", str(path)],
                          serve_args=["--api-token-file", str(_tokens(base / f"{name}-tokens", tokens))])
    proc.start()
    return proc


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chain]:
    base = tmp_path_factory.mktemp("subagents")
    with demo_tools(base / "tools") as tools:
        (tools.sandbox / ".env").write_text(SECRET + "\n")
        started: list[RuntimeProcess] = []
        try:
            files = _start(base, "files", _files_config(base, tools),
                           ["orchestrator:tok-orch", "team:tok-team", "bob:tok-bob-files", "mallory:tok-mallory"])
            started.append(files)
            team = _start(base, "team", _parent_config("team", "files", files.url, _tokens(base / "team-cred", ["tok-team"]),
                                                       delegators=["orchestrator"]),
                          ["orchestrator:tok-orch-team"])
            started.append(team)
            top = _start(base, "orchestrator", _parent_config("orchestrator", "files", files.url,
                                                              _tokens(base / "orch-cred", ["tok-orch"])),
                         ["alice:tok-alice", "bob:tok-bob"])
            started.append(top)
            top3 = _start(base, "orchestrator3", _parent_config("orchestrator", "team", team.url,
                                                                _tokens(base / "orch3-cred", ["tok-orch-team"])),
                          ["alice:tok-alice"])
            started.append(top3)
            gated = _start(base, "gated", _parent_config("orchestrator", "files", files.url,
                                                         _tokens(base / "gated-cred", ["tok-orch"]), gate=True),
                           ["alice:tok-alice"])
            started.append(gated)
            yield Chain(tools, files, team, top, top3, gated)
        finally:
            for proc in started:
                proc.stop()


def _task(result: dict[str, Any]) -> dict[str, Any]:
    return result["task"]


def _finished(rpc: Rpc, task_id: str) -> dict[str, Any] | None:
    task = rpc.get_task(task_id)
    return task if state(task) == "TASK_STATE_COMPLETED" else None


def _reads(chain: Chain) -> int:
    return len(chain.tools.executions("read_file", ".env"))


def test_a_sub_agents_gated_call_pauses_the_parent_and_an_approval_at_the_top_runs_it_once(chain: Chain) -> None:
    alice = Rpc(chain.top.url, "tok-alice")
    before = _reads(chain)
    task = _task(alice.send("ask files read .env"))
    assert state(task) == "TASK_STATE_INPUT_REQUIRED", status_text(task)
    (request,) = interrupt(task)["action_requests"]
    assert request["name"] == "read_file" and request["args"] == {"path": ".env"}
    origin = request["agent"]
    assert origin["name"] == "files" and origin["path"] == ["files"] and origin["task_id"]
    assert task["status"]["message"]["metadata"]["interrupt_type"] == wire.INTERRUPT_TOOL_APPROVAL
    assert "files" in status_text(task)
    assert _reads(chain) == before  # nothing ran yet
    # The sub-agent's own task is owned by the parent's account and waits for the same request.
    child = Rpc(chain.files.url, "tok-orch").get_task(origin["task_id"])
    assert request_ids(child) == [request["id"]]

    done = _task(alice.send(data=wire.approve_all(), task=task))
    assert state(done) == "TASK_STATE_COMPLETED", status_text(done)
    assert SECRET in status_text(done) and status_text(done).startswith("files says:")
    assert _reads(chain) == before + 1
    child = Rpc(chain.files.url, "tok-orch").get_task(origin["task_id"])
    assert state(child) == "TASK_STATE_COMPLETED"
    # The sub-agent's record of votes (what its audit reads) keeps both: the human who decided, and through whom.
    with sqlite3.connect(chain.files.state_dir / "gatehouse.db") as db:
        votes = db.execute("SELECT principal, seen_as, ballot, counted FROM gatehouse_approval_votes WHERE request_id = ?",
                           (request["id"],)).fetchall()
    assert votes == [("alice", "alice via orchestrator", "approve", 1)]
    # A replay at the top is answered as finished; nothing runs again.
    assert "Already decided" in alice.send_finished(data=wire.approve_all(), task=task)
    assert _reads(chain) == before + 1


def test_a_deny_travels_back_with_its_reason(chain: Chain) -> None:
    alice = Rpc(chain.top.url, "tok-alice")
    before = _reads(chain)
    task = _task(alice.send("ask files read .env"))
    done = _task(alice.send(data=wire.deny_all("no secrets today"), task=task))
    assert state(done) == "TASK_STATE_COMPLETED"
    assert "no secrets today" in status_text(done)
    assert _reads(chain) == before


def test_the_sub_agent_judges_the_human_against_its_own_approvers_never_the_parent(chain: Chain) -> None:
    (chain.tools.sandbox / "old.txt").write_text("x")
    alice = Rpc(chain.top.url, "tok-alice")
    task = _task(alice.send("ask files delete old.txt"))
    (request,) = interrupt(task)["action_requests"]
    assert request["approvers"]["users"] == ["bob"]
    # alice decides through the orchestrator: judged as alice, who may not decide it — still pending
    again = _task(alice.send(data=wire.approve_all(), task=task))
    assert state(again) == "TASK_STATE_INPUT_REQUIRED"
    assert "alice may not decide" in status_text(again)
    assert not chain.tools.executions("delete_file", "old.txt")
    # bob decides on the sub-agent directly (its REST API): the parent's watcher follows and the model goes on
    reply = httpx.post(f"{chain.files.url}/approvals/{request['id']}/decision", json={"decision": "approve"},
                       headers={"Authorization": "Bearer tok-bob-files", "Idempotency-Key": "bob-1"})
    assert reply.status_code == 200, reply.text
    done = wait_for(lambda: _finished(alice, task["id"]), timeout=20)
    assert "files says:" in status_text(done)
    assert len(chain.tools.executions("delete_file", "old.txt")) == 1
    votes = httpx.get(f"{chain.files.url}/approvals/{request['id']}", headers={"Authorization": "Bearer tok-bob-files"})
    assert votes.status_code == 200, votes.text


def test_a_claim_to_act_for_someone_from_a_caller_not_trusted_decides_nothing(chain: Chain) -> None:
    alice = Rpc(chain.top.url, "tok-alice")
    before = _reads(chain)
    task = _task(alice.send("ask files read .env"))
    origin = interrupt(task)["action_requests"][0]["agent"]
    child = Rpc(chain.files.url, "tok-orch").get_task(origin["task_id"])
    # mallory cannot even see the parent's task on the sub-agent (owned by the orchestrator's account)
    mallory = Rpc(chain.files.url, "tok-mallory")
    with pytest.raises(RuntimeError):
        mallory.send(data=wire.approve_all(), task=child)
    # A caller that is no delegator, on its own task, claims to decide for bob (the only approver of deletions):
    # refused, nothing decided, nothing run.
    (chain.tools.sandbox / "keep.txt").write_text("x")
    own = _task(mallory.send("delete keep.txt"))
    forged = {"messageId": "forged-1", "role": "ROLE_USER", "taskId": own["id"], "contextId": own["contextId"],
              "parts": [{"data": wire.approve_all()}], "metadata": {relay.ON_BEHALF_OF: {"principal": "bob"}}}
    still = mallory.call("SendMessage", {"message": forged})["result"]["task"]
    assert state(still) == "TASK_STATE_INPUT_REQUIRED"
    assert "not a trusted delegator" in status_text(still) and "still pending" in status_text(still)
    assert not chain.tools.executions("delete_file", "keep.txt")
    assert _reads(chain) == before
    done = _task(alice.send(data=wire.deny_all("cleanup"), task=task))
    assert state(done) == "TASK_STATE_COMPLETED"


def test_three_levels_the_innermost_call_is_approved_at_the_top_and_runs_once(chain: Chain) -> None:
    alice = Rpc(chain.top3.url, "tok-alice")
    before = _reads(chain)
    task = _task(alice.send("ask team ask files read .env"))
    assert state(task) == "TASK_STATE_INPUT_REQUIRED", status_text(task)
    (request,) = interrupt(task)["action_requests"]
    assert request["name"] == "read_file"
    assert request["agent"]["name"] == "files" and request["agent"]["path"] == ["team", "files"]
    done = _task(alice.send(data=wire.approve_all(), task=task))
    assert state(done) == "TASK_STATE_COMPLETED", status_text(done)
    assert SECRET in status_text(done) and status_text(done).startswith("team says: files says:")
    assert _reads(chain) == before + 1


def test_canceling_the_parent_cancels_the_sub_agents_task(chain: Chain) -> None:
    alice = Rpc(chain.top.url, "tok-alice")
    task = _task(alice.send("ask files read .env"))
    origin = interrupt(task)["action_requests"][0]["agent"]
    reply = alice.call("CancelTask", {"id": task["id"]})
    assert state(reply["result"]) == "TASK_STATE_CANCELED", json.dumps(reply)
    child = Rpc(chain.files.url, "tok-orch").get_task(origin["task_id"])
    assert state(child) == "TASK_STATE_CANCELED"


def test_a_task_that_came_through_more_agents_than_the_cap_is_refused(chain: Chain) -> None:
    orchestrator = Rpc(chain.files.url, "tok-orch")  # a delegator of files, whose cap is 2
    before = _reads(chain)
    message = {"messageId": "deep-1", "role": "ROLE_USER", "parts": [{"text": "read .env"}],
               "metadata": {relay.ON_BEHALF_OF: {"principal": "alice"}, relay.DEPTH: 3}}
    task = orchestrator.call("SendMessage", {"message": message})["result"]["task"]
    assert state(task) == "TASK_STATE_REJECTED"
    assert "came through 3 agents; this agent accepts at most 2" in status_text(task)
    # and a claim to act for someone, from a caller that is no delegator, never starts a task either
    bob = Rpc(chain.files.url, "tok-bob-files")
    message = {"messageId": "claim-1", "role": "ROLE_USER", "parts": [{"text": "read .env"}],
               "metadata": {relay.ON_BEHALF_OF: {"principal": "alice"}}}
    task = bob.call("SendMessage", {"message": message})["result"]["task"]
    assert state(task) == "TASK_STATE_REJECTED" and "not a trusted delegator" in status_text(task)
    assert _reads(chain) == before


def test_gatehouse_chat_shows_where_a_relayed_request_comes_from_and_approves_it(chain: Chain) -> None:
    before = _reads(chain)
    done = subprocess.run(
        [*GATEHOUSE_CMD, "chat", chain.top3.url], input="ask team ask files read .env\napprove\n", capture_output=True,
        text=True, timeout=60, check=False, env={**os.environ, "GATEHOUSE_TOKEN": "tok-alice"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "read_file" in done.stdout and "from team → files" in done.stdout
    assert SECRET in done.stdout
    assert _reads(chain) == before + 1


def test_the_parent_may_gate_the_delegation_itself_and_an_approver_may_edit_the_request(chain: Chain) -> None:
    alice = Rpc(chain.gated.url, "tok-alice")
    before = _reads(chain)
    task = _task(alice.send("ask files read notes.txt"))
    (own,) = interrupt(task)["action_requests"]  # the parent's own request first: the delegation itself
    assert own["name"] == "files" and own["args"] == {"request": "read notes.txt"} and own["agent"] is None
    assert own["editable"] is True
    # approved with the request changed: the sub-agent is asked to read .env, whose own gate then pauses both
    relayed = _task(alice.send(data=wire.approve_edited({own["id"]: {"request": "read .env"}}), task=task))
    assert state(relayed) == "TASK_STATE_INPUT_REQUIRED", status_text(relayed)
    (inner,) = interrupt(relayed)["action_requests"]
    assert inner["name"] == "read_file" and inner["args"] == {"path": ".env"} and inner["agent"]["name"] == "files"
    done = _task(alice.send(data=wire.approve_all(), task=relayed))
    assert state(done) == "TASK_STATE_COMPLETED", status_text(done)
    assert SECRET in status_text(done)
    assert _reads(chain) == before + 1


def _kagent_decide(rpc: Rpc, task: dict[str, Any], payload: dict[str, Any]) -> dict[str, Any]:
    """A decision as kagent's UI sends it: a text part, the payload in the metadata under the declared extension."""
    decision = {"messageId": str(uuid.uuid4()),
                "role": "ROLE_USER", "parts": [{"text": "Decided in the kagent UI"}],
                "taskId": task["id"], "contextId": task["contextId"], "extensions": [KAGENT_URI],
                "metadata": {KAGENT_URI: payload}}
    reply = rpc.call("SendMessage", {"message": decision})
    assert "result" in reply, reply
    done: dict[str, Any] = reply["result"]["task"]
    return done


def _kagent_pause(task: dict[str, Any]) -> dict[str, Any]:
    message = task["status"]["message"]
    assert KAGENT_URI in message.get("extensions", []), message
    payload: dict[str, Any] = message["metadata"][KAGENT_URI]
    return payload


def test_a_kagent_client_reads_the_relayed_pause_with_nested_and_its_decision_is_forwarded(chain: Chain) -> None:
    """kagent's hitl/v1 at the top of a chain, in kagent's nested shape: the top-level tool is this agent's call of
    the sub-agent; ``nested`` names the sub-agent, its task and context, and the sub-agent's own calls, whose ids a
    kagent decision names. That decision approves the innermost call once."""
    alice = Rpc(chain.top.url, "tok-alice")
    before = _reads(chain)
    task = _task(alice.send("ask files read .env"))
    (inner,) = interrupt(task)["action_requests"]
    relayed = task["status"]["message"]["metadata"][wire.RELAYED_PAUSE]
    payload = _kagent_pause(task)
    assert payload == {
        "type": "tool_approval_request",
        "hint": payload["hint"],
        "tools": [{"id": relayed["id"], "call_id": payload["tools"][0]["call_id"], "name": "files",
                   "args": {"request": "read .env"}}],
        "nested": {"subagent_name": "default/files", "task_id": inner["agent"]["task_id"],
                   "context_id": payload["nested"]["context_id"],
                   "tools": [{"id": inner["id"], "call_id": inner["call_id"], "name": "read_file",
                              "args": {"path": ".env"}}]},
    }
    assert payload["hint"].endswith("(read_file)") and payload["nested"]["context_id"]
    child = Rpc(chain.files.url, "tok-orch").get_task(inner["agent"]["task_id"])
    assert payload["nested"]["context_id"] == child["contextId"]  # where kagent's UI opens the sub-agent's session

    # kagent's UI answers with the nested tools' ids (the parent's own entry is not in the response).
    done = _kagent_decide(alice, task, {"type": "tool_approval_response", "approvals": [{"id": inner["id"], "approved": True}]})
    assert state(done) == "TASK_STATE_COMPLETED", status_text(done)
    assert SECRET in status_text(done)
    assert _reads(chain) == before + 1


def test_a_kagent_decision_naming_the_parents_own_entry_decides_nothing(chain: Chain) -> None:
    alice = Rpc(chain.top.url, "tok-alice")
    before = _reads(chain)
    task = _task(alice.send("ask files read .env"))
    (top,) = _kagent_pause(task)["tools"]
    still = _kagent_decide(alice, task, {"type": "tool_approval_response", "approvals": [{"id": top["id"], "approved": True}]})
    assert state(still) == "TASK_STATE_INPUT_REQUIRED" and "Nothing was decided" in status_text(still)
    assert _reads(chain) == before


def test_three_levels_kagents_nested_names_the_next_agent_and_the_innermost_calls(chain: Chain) -> None:
    alice = Rpc(chain.top3.url, "tok-alice")
    before = _reads(chain)
    task = _task(alice.send("ask team ask files read .env"))
    (inner,) = interrupt(task)["action_requests"]
    payload = _kagent_pause(task)
    assert [t["name"] for t in payload["tools"]] == ["team"]
    nested = payload["nested"]
    assert nested["subagent_name"] == "default/team"
    assert nested["task_id"] == task["status"]["message"]["metadata"][wire.RELAYED_PAUSE]["task_id"] != inner["agent"]["task_id"]
    assert [(t["id"], t["name"], t["args"]) for t in nested["tools"]] == [(inner["id"], "read_file", {"path": ".env"})]
    done = _kagent_decide(alice, task, {"type": "tool_approval_response", "approvals": [{"id": inner["id"], "approved": True}]})
    assert state(done) == "TASK_STATE_COMPLETED", status_text(done)
    assert status_text(done).startswith("team says: files says:") and SECRET in status_text(done)
    assert _reads(chain) == before + 1


def test_a_sub_agents_question_in_kagents_nested_shape_is_answered_from_the_top(chain: Chain) -> None:
    """A nested ask_user_request: the top-level id is this agent's, ``nested.tools`` holds the sub-agent's question
    as kagent's one ``ask_user`` tool, and the answer names that tool's id."""
    alice = Rpc(chain.top.url, "tok-alice")
    task = _task(alice.send("ask files ask Which environment?"))
    (question,) = interrupt(task)["requests"]
    payload = _kagent_pause(task)
    assert payload["type"] == "ask_user_request"
    assert payload["id"] == task["status"]["message"]["metadata"][wire.RELAYED_PAUSE]["id"] != question["id"]
    assert payload["questions"] == [{"question": "Which environment?", "choices": question["options"], "multiple": False}]
    (tool,) = payload["nested"]["tools"]
    assert (tool["id"], tool["name"], tool["args"]) == (question["id"], "ask_user", {"questions": payload["questions"]})
    assert payload["nested"]["subagent_name"] == "default/files"

    confirm = _kagent_decide(alice, task, {"type": "ask_user_response", "id": tool["id"],
                                           "answers": [{"answer": [question["options"][0]]}]})
    assert state(confirm) == "TASK_STATE_INPUT_REQUIRED", status_text(confirm)
    (step,) = _kagent_pause(confirm)["nested"]["tools"]
    assert step["id"] == question["id"] + "/confirm"
    done = _kagent_decide(alice, confirm, {"type": "ask_user_response", "id": step["id"], "answers": [{"answer": ["confirm"]}]})
    assert state(done) == "TASK_STATE_COMPLETED", status_text(done)
    assert question["options"][0] in status_text(done)


def test_a_sub_agents_question_is_relayed_and_answered_from_the_top(chain: Chain) -> None:
    """Not only approvals: a sub-agent's hitl_request question (answer, then confirm) is relayed and answered."""
    alice = Rpc(chain.top.url, "tok-alice")
    task = _task(alice.send("ask files ask Which environment?"))
    assert state(task) == "TASK_STATE_INPUT_REQUIRED", status_text(task)
    assert task["status"]["message"]["metadata"]["interrupt_type"] == wire.INTERRUPT_HITL
    (question,) = interrupt(task)["requests"]
    assert question["question"] == "Which environment?" and question["agent"]["name"] == "files"
    confirm = _task(alice.send(data={"decision_type": "answer", "answers": {question["id"]: "staging"}}, task=task))
    assert state(confirm) == "TASK_STATE_INPUT_REQUIRED", status_text(confirm)
    assert interrupt(confirm)["requests"][0]["stage"] == "confirm"
    done = _task(alice.send(data={"decision_type": "confirm"}, task=confirm))
    assert state(done) == "TASK_STATE_COMPLETED", status_text(done)
    assert "staging" in status_text(done) and status_text(done).startswith("files says:")


def test_a_sub_agents_tool_question_is_relayed_and_answered_from_the_top(chain: Chain) -> None:
    """An MCP tool of the sub-agent asking the user (elicitation) is relayed too; the answer reaches the tool once."""
    (chain.tools.sandbox / "kept.txt").write_text("old")
    alice = Rpc(chain.top.url, "tok-alice")
    task = _task(alice.send("ask files put fresh to kept.txt"))
    assert state(task) == "TASK_STATE_INPUT_REQUIRED", status_text(task)
    assert task["status"]["message"]["metadata"]["interrupt_type"] == "elicitation"
    (asked,) = interrupt(task)["elicitations"]
    assert asked["tool"] == "put_file" and asked["agent"]["name"] == "files"
    answer = {"decision_type": "elicitation_response", "action": "accept", "content": {"overwrite": True}}
    done = _task(alice.send(data=answer, task=task))
    assert state(done) == "TASK_STATE_COMPLETED", status_text(done)
    assert (chain.tools.sandbox / "kept.txt").read_text() == "fresh"
    assert len(chain.tools.executions("put_file", "kept.txt")) == 1
