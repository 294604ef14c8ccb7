"""A restart while an approved call waits on something else: its tool's question, a sub-agent's pause, or the
model's own question after the approved call ran.

Start-up recovery resumes tasks whose last approval was decided just before a restart and never run on. It must ask
what a task waits on now: an approved call that went on to ask its tool's question (an elicitation), or to delegate to
a sub-agent that paused, or after which the model asked the user, waits for that answer. Resumed blindly, the task
completed "(no reply)", the question was lost and the approved call never acted (issue 41). Here the runtime is killed
(SIGKILL) or stopped (SIGTERM) with such a pause open, started again on the same state, and the pause must still be
there, not only at /readyz's 200 but a while after it, and answering it must run the call exactly once.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent_runtime.approvals import ApprovalService, Resolution, deciders
from agent_runtime.contract import wire
from agent_runtime.contract.agent_config import AccessConfig, AgentConfig, CardConfig
from agent_runtime.contract.manifests import select_agent_config
from agent_runtime.infra.database import Database, default_database_url
from tests.delegation.test_subagents_e2e import GATED_READ, _parent_config, _start, _tokens
from tests.support.runtime import (
    Rpc,
    RuntimeProcess,
    Tools,
    demo_tools,
    interrupt,
    request_ids,
    state,
    status_text,
    write_manifests,
)

pytestmark = pytest.mark.e2e

HELD = 2.5  # seconds the pause must stay as it was after /readyz's 200 (recovery used to finish it within ~1 s)


def _restart(proc: RuntimeProcess, how: str) -> None:
    if how == "kill9":
        proc.kill9()
    else:
        proc.stop()  # SIGTERM: a graceful shutdown
    proc.start()  # returns at /readyz 200


def _held(rpc: Rpc, task_id: str, expected: dict[str, Any]) -> None:
    """The task is still paused on the same thing after the restart, and stays so."""
    deadline = time.monotonic() + HELD
    while True:
        task = rpc.get_task(task_id)
        assert state(task) == "TASK_STATE_INPUT_REQUIRED", status_text(task)
        assert task["status"]["message"]["metadata"]["interrupt_type"] == expected["interrupt_type"]
        assert interrupt(task) == expected
        if time.monotonic() > deadline:
            return
        time.sleep(0.2)


# --- an approved call that then asks its tool's question ------------------------------------------


@pytest.fixture(scope="module")
def asking(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Tools, RuntimeProcess]]:
    base = tmp_path_factory.mktemp("restart-elicitation")
    rules = [{"tool": "put_file", "when": {"arg": "path", "glob": "gated/**"}, "action": "require"}]
    with demo_tools(base / "tools") as tools, _alices(base, write_manifests(base / "manifests", tools.url, rules=rules)) as proc:
        yield tools, proc


@contextmanager
def _alices(base: Path, files: list[Path]) -> Iterator[RuntimeProcess]:
    """A runtime with tokens on, whose one user, alice, asks and decides."""
    (base / "tokens").write_text("alice:tok-alice\n")
    proc = RuntimeProcess(files, base / "state", base / "runtime.log", serve_args=["--api-token-file", str(base / "tokens")])
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


# Each stop and each channel in `make test`; the other two pairs in `make soak`.
@pytest.mark.parametrize(("how", "channel"), [
    ("kill9", "rest"), ("sigterm", "a2a"),
    pytest.param("kill9", "a2a", marks=pytest.mark.long), pytest.param("sigterm", "rest", marks=pytest.mark.long),
])
def test_a_tools_question_after_an_approval_survives_a_restart_and_the_call_runs_once(
    asking: tuple[Tools, RuntimeProcess], how: str, channel: str,
) -> None:
    tools, proc = asking
    rpc = Rpc(proc.url, "tok-alice")
    name = f"gated/{how}-{channel}.txt"
    (tools.sandbox / name).parent.mkdir(parents=True, exist_ok=True)
    (tools.sandbox / name).write_text("old")
    task = rpc.send(f"put fresh to {name}")["task"]
    (approval_id,) = request_ids(task)
    asked = _approve(rpc, task, approval_id, channel, lambda t: interrupt(t).get("interrupt_type") == "elicitation")
    question = interrupt(asked)
    assert question["interrupt_type"] == "elicitation" and tools.executions("put_file", name) == []

    _restart(proc, how)

    _held(rpc, task["id"], question)
    answer = {"decision_type": "elicitation_response", "action": "accept", "content": {"overwrite": True}}
    done = rpc.send(data=answer, task=task)["task"]
    assert state(done) == "TASK_STATE_COMPLETED", done
    assert status_text(done) == f"Put of {name}: wrote 5 bytes to /{name}"
    assert (tools.sandbox / name).read_text() == "fresh"
    assert len(tools.executions("put_file", name)) == 1


@pytest.mark.parametrize("how", ["kill9", "sigterm"])
def test_an_approval_recorded_just_before_a_restart_runs_before_readyz_says_ready(
    asking: tuple[Tools, RuntimeProcess], how: str,
) -> None:
    """The runtime stopped between a REST decision's transaction and its resume (the decision is recorded as
    decide_one records it, while the runtime is down). At the next start the approved call runs once — for an owned
    task too (tokens on: the task is alice's) — and already before /readyz answers 200."""
    tools, proc = asking
    rpc = Rpc(proc.url, "tok-alice")
    name = f"gated/new-{how}.txt"
    task = rpc.send(f"put fresh to {name}")["task"]
    (approval_id,) = request_ids(task)
    if how == "kill9":
        proc.kill9()
    else:
        proc.stop()
    asyncio.run(_record_approval(proc.state_dir, task["id"], approval_id))

    proc.start()

    done = rpc.get_task(task["id"])  # no waiting: recovery ran before the runtime said it was ready
    assert state(done) == "TASK_STATE_COMPLETED", status_text(done)
    assert status_text(done).endswith(f"Put of {name}: wrote 5 bytes to /{name}")
    assert (tools.sandbox / name).read_text() == "fresh"
    assert len(tools.executions("put_file", name)) == 1


async def _record_approval(state_dir: Path, task_id: str, request_id: str) -> None:
    db = Database(default_database_url(state_dir))
    try:
        await ApprovalService(db).decide(task_id, {request_id: Resolution("approved")}, "rest",
                                         also=lambda conn, at: deciders.record(conn, request_id, "alice", at))
    finally:
        await db.dispose()


def _approve(rpc: Rpc, task: dict[str, Any], approval_id: str, channel: str,
             paused_again: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """Approve over A2A (the answer is the task), or over REST, one request at a time, the channel start-up recovery
    is for (its resume runs in the background: wait until the task pauses again, on what ``paused_again`` says)."""
    if channel == "a2a":
        asked: dict[str, Any] = rpc.send(data=wire.approve_all(), task=task)["task"]
        return asked
    decided = rpc.client.post(f"/approvals/{approval_id}/decision", json={"decision": "approve"},
                              headers={"Idempotency-Key": str(uuid.uuid4())})
    assert decided.status_code == 200, decided.text
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        current = rpc.get_task(task["id"])
        if state(current) == "TASK_STATE_INPUT_REQUIRED" and paused_again(current):
            return current
        time.sleep(0.1)
    raise AssertionError(f"the task did not pause again after the approval: {rpc.get_task(task['id'])}")


# --- an approved call after which the model asks the user a question -----------------------------------

ENVS = ["staging", "prod"]
ASK_AFTER = {"match": r"^delete (?P<path>\S+) then ask", "toolCalls": [{"name": "delete_file", "args": {"path": "{path}"}}],
             "then": [{"name": "hitl_request", "args": {"question": "Deleted {path}. Where next?", "options": ENVS}}],
             "reply": "after: {result}"}


@pytest.fixture(scope="module")
def questioning(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Tools, RuntimeProcess]]:
    base = tmp_path_factory.mktemp("restart-question")
    with demo_tools(base / "tools") as tools:
        files = write_manifests(base / "manifests", tools.url)
        model = next(f for f in files if f.name == "modelconfig.yaml")
        doc = yaml.safe_load(model.read_text())
        doc["spec"]["scripted"]["rules"].insert(0, ASK_AFTER)
        model.write_text(yaml.safe_dump(doc))
        with _alices(base, files) as proc:
            yield tools, proc


@pytest.mark.parametrize("channel", ["a2a", "rest"])
@pytest.mark.parametrize("how", ["kill9", "sigterm"])
def test_the_models_question_after_an_approved_call_survives_a_restart(
    questioning: tuple[Tools, RuntimeProcess], how: str, channel: str,
) -> None:
    tools, proc = questioning
    rpc = Rpc(proc.url, "tok-alice")
    name = f"q-{how}-{channel}.txt"
    (tools.sandbox / name).write_text("x")
    task = rpc.send(f"delete {name} then ask")["task"]
    (approval_id,) = request_ids(task)
    asked = _approve(rpc, task, approval_id, channel, lambda t: interrupt(t).get("interrupt_type") == wire.INTERRUPT_HITL)
    question = interrupt(asked)
    assert question["interrupt_type"] == wire.INTERRUPT_HITL, question
    (prompt,) = question["requests"]
    assert not (tools.sandbox / name).exists() and len(tools.executions("delete_file", name)) == 1

    _restart(proc, how)

    _held(rpc, task["id"], question)
    done = rpc.send(data={"decision_type": "answer", "answers": {prompt["id"]: "prod"}}, task=task)["task"]
    assert state(done) == "TASK_STATE_COMPLETED", status_text(done)
    assert status_text(done).startswith("after: ") and "prod" in status_text(done)
    assert len(tools.executions("delete_file", name)) == 1  # the approved call ran once, before the restart


# --- an approved delegation whose sub-agent then pauses ----------------------------------------------


@pytest.fixture(scope="module")
def delegating(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Tools, RuntimeProcess]]:
    """``files`` gates reading ``.env``; ``orchestrator`` gates its own delegation to ``files``."""
    base = tmp_path_factory.mktemp("restart-subagent")
    with demo_tools(base / "tools") as tools:
        (tools.sandbox / ".env").write_text("SECRET=restart-7\n")
        config: AgentConfig = select_agent_config(write_manifests(base / "files-manifests", tools.url))
        config = config.model_copy(update={
            "name": "files", "card": CardConfig(name="files"), "access": AccessConfig(delegators=["orchestrator"]),
            "approval": config.approval.model_copy(update={"rules": [GATED_READ]}),
        })
        started: list[RuntimeProcess] = []
        try:
            files = _start(base, "files", config, ["orchestrator:tok-orch"])
            started.append(files)
            top = _start(base, "orchestrator", _parent_config(
                "orchestrator", "files", files.url, _tokens(base / "orch-cred", ["tok-orch"]), gate=True),
                ["alice:tok-alice"])
            started.append(top)
            yield tools, top
        finally:
            for proc in started:
                proc.stop()


@pytest.mark.parametrize("channel", ["a2a", "rest"])
@pytest.mark.parametrize("how", ["kill9", "sigterm"])
def test_a_sub_agents_pause_after_an_approved_delegation_survives_the_parents_restart(
    delegating: tuple[Tools, RuntimeProcess], how: str, channel: str,
) -> None:
    tools, top = delegating
    alice = Rpc(top.url, "tok-alice")
    reads = len(tools.executions("read_file", ".env"))
    task = alice.send("ask files read .env")["task"]
    (own,) = interrupt(task)["action_requests"]  # the parent's own request: the delegation itself
    assert own["name"] == "files" and own["agent"] is None
    relayed = _approve(alice, task, own["id"], channel, lambda t: own["id"] not in request_ids(t))
    pause = interrupt(relayed)
    (inner,) = pause["action_requests"]
    assert inner["name"] == "read_file" and inner["agent"]["name"] == "files"

    _restart(top, how)

    _held(alice, task["id"], pause)
    done = alice.send(data=wire.approve_all(), task=task)["task"]
    assert state(done) == "TASK_STATE_COMPLETED", status_text(done)
    assert "SECRET=restart-7" in status_text(done)
    assert len(tools.executions("read_file", ".env")) == reads + 1

