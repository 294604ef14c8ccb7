"""How a task's work ends and resumes on the wire: the reply as an artifact, WORKING while a decision is acted on.

A finished turn's reply is the task's result, and A2A returns a result as an *artifact*; kagent's UI renders agent
output from artifacts only (a status message only on FAILED or AUTH_REQUIRED). So a COMPLETED task carries what the
user reads in one artifact, :data:`REPLY_ARTIFACT`, and its final status message carries none of that text, only the
metadata clients audit by (``decisions``, ``hitl``, ``delegations``). Not both: google-adk's ``RemoteA2aAgent``, when
streaming, turns every artifact update *and* every status message that has parts into an event of its own, so a reply
in both places is shown twice (docs/wire-contract.md, "A finished task").

A FAILED task keeps its text in the status message, where every client (kagent's included) shows a failure.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from a2a.helpers import new_text_part
from a2a.server.tasks import TaskUpdater
from a2a.types import TaskState

REPLY_ARTIFACT = "reply"
"""The name of the one artifact a completed turn returns (a fresh artifact id each time)."""


async def resuming(updater: TaskUpdater) -> None:
    """WORKING, before a decided pause runs on: a streaming client sees the decision taken and the work resume, instead
    of INPUT_REQUIRED going straight to COMPLETED (and with replicas, the stored task says a resume is under way)."""
    await updater.start_work()


async def finish(
    updater: TaskUpdater, texts: Sequence[str], *, failed: bool = False, metadata: dict[str, Any] | None = None,
    status_metadata: dict[str, Any] | None = None,
) -> None:
    """End the task: COMPLETED with ``texts`` (notes and the reply, in reading order) as the reply artifact, or
    FAILED with them in the status message. ``metadata`` goes on the final status message either way."""
    parts = [new_text_part(t) for t in texts if t]
    if failed:
        message = updater.new_agent_message(parts, metadata=metadata)
        return await updater.update_status(TaskState.TASK_STATE_FAILED, message=message, metadata=status_metadata)
    await updater.add_artifact(parts, name=REPLY_ARTIFACT, last_chunk=True)
    # A status message with no parts: its metadata still reaches GetTask and subscribers, and ADK treats a message
    # without parts as a bare status change (no second event with the reply).
    final = updater.new_agent_message([], metadata=metadata) if metadata else None
    await updater.update_status(TaskState.TASK_STATE_COMPLETED, message=final, metadata=status_metadata)


__all__ = ["REPLY_ARTIFACT", "finish", "resuming"]
