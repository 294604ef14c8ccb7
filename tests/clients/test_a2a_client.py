"""a2a_client against the in-test A2A peer over real HTTP: text, pause, bad and good decisions, get_task."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_runtime.clients import a2a_client
from agent_runtime.contract import wire
from tests.support.a2a_peer import PeerState, running_peer
from tests.support.runtime import demo_tools, runtime

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def peer() -> Iterator[tuple[str, PeerState]]:
    with running_peer() as served:
        yield served


async def test_text_streams_and_completes(peer: tuple[str, PeerState]) -> None:
    url, _ = peer
    chunks: list[str] = []
    async with a2a_client.connect(url) as client:
        result = await a2a_client.send_text(client, "hello", on_text=chunks.append)
    assert result.state == "completed" and not result.pending
    assert result.text == "echo: hello" == "".join(chunks)
    assert result.task_id and result.context_id


async def test_pause_bad_decision_then_approval(peer: tuple[str, PeerState]) -> None:
    url, state = peer
    async with a2a_client.connect(url) as client:
        paused = await a2a_client.send_text(client, "clean up x.txt and y.txt")
        assert paused.pending and paused.interrupt is not None
        assert paused.task_id and paused.context_id
        first, second = paused.interrupt.action_requests
        assert (first.name, first.args, second.args) == ("delete_file", {"path": "x.txt"}, {"path": "y.txt"})
        assert "Approval needed for 2 tool calls" in paused.status_text

        ids = {"task_id": paused.task_id, "context_id": paused.context_id}
        still = await a2a_client.send_decision(client, wire.batch({first.id: True}), **ids)
        assert still.pending and f"missing ids: {second.id}" in still.status_text
        assert state.executed.count("x.txt") == 0

        done = await a2a_client.send_decision(client, wire.batch({first.id: True, second.id: False}, {second.id: "keep"}), **ids)
        assert done.state == "completed"
        assert done.text == "deleted x.txt; did not delete y.txt: denied (keep)"

        again = await a2a_client.get_task(client, paused.task_id)
        assert again.state == "completed" and again.interrupt is None and again.text == done.text
    assert state.decisions[-1] == {
        "decision_type": "batch",
        "decisions": {first.id: "approve", second.id: "deny"},
        "reasons": {second.id: "keep"},
    }


async def test_get_task_of_a_pending_task_reads_the_interrupt(peer: tuple[str, PeerState]) -> None:
    url, _ = peer
    async with a2a_client.connect(url) as client:
        paused = await a2a_client.send_text(client, "delete z.txt")
        assert paused.task_id
        read = await a2a_client.get_task(client, paused.task_id)
    assert read.pending and read.interrupt == paused.interrupt


async def test_unreachable_agent_raises() -> None:
    from a2a.client import AgentCardResolutionError

    with pytest.raises(AgentCardResolutionError, match=r"agent-card\.json"):
        async with a2a_client.connect("http://127.0.0.1:9/"):
            pass


async def test_against_the_runtime_a_resumed_reply_arrives_once_as_the_artifact(tmp_path: Path) -> None:
    """The real runtime: the reply after a decision streams in once (the artifact), WORKING comes before it, and the
    final status message holds no second copy; reading the task back gives the same text."""
    rules = [{"tool": "read_file", "when": {"arg": "path", "glob": "**/.env*"}, "action": "require"}]
    with demo_tools(tmp_path / "tools") as tools, runtime(tmp_path / "rt", tools, rules=rules) as proc:
        (tools.sandbox / ".env.client").write_text("TOKEN=client-once\n")
        async with a2a_client.connect(proc.url) as client:
            paused = await a2a_client.send_text(client, "read .env.client")
            assert paused.pending and paused.interrupt is not None and paused.task_id and paused.context_id
            chunks: list[str] = []
            done = await a2a_client.send_decision(client, wire.approve_all(), task_id=paused.task_id,
                                                  context_id=paused.context_id, on_text=chunks.append)
            again = await a2a_client.get_task(client, paused.task_id)
    assert done.state == "completed"
    assert chunks == [".env.client: TOKEN=client-once"] and done.text == chunks[0]
    assert done.status_text == ""  # the final status message carries the decisions' metadata, not the reply
    assert again.state == "completed" and again.text == done.text and again.status_text == ""
