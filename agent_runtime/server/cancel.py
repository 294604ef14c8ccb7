"""Withdrawing a task's approval requests before it is canceled: deny what is pending ("task canceled"), or refuse
the cancel when an approved call of its latest pause has started (that run ends the task with the model's reply).
:meth:`agent_runtime.server.executor.GatehouseExecutor.withdraw` calls it before every cancel."""

from __future__ import annotations

from a2a.types import Task, TaskState
from a2a.utils.errors import TaskNotCancelableError

from agent_runtime.approvals import AlreadyDecided, ApprovalService, Resolution
from agent_runtime.server.batches import batch_after
from agent_runtime.telemetry.metrics import Metrics


async def withdraw_approvals(approvals: ApprovalService, metrics: Metrics, task: Task, by: str) -> None:
    """Each request's decision is the arbiter: one decided before the cancel is not withdrawn, one the cancel denied
    first answers a later decision with "Already decided: … denied by cancel"; a lost race is looked at again."""
    records = await approvals.for_task(task.id)
    for _ in range(len(records) + 1):  # each lost race leaves one request fewer pending
        started = [r for r in batch_after(records, []) if r.status == "approved" and r.exec_state != "none"]
        if started:
            calls = ", ".join(f"{r.id} ({r.tool})" for r in started)
            explanation = (f"Not canceled: {calls} was approved and has started; the task ends with the model's reply "
                           "to it.")
            data = {"taskId": task.id, "contextId": task.context_id, "state": TaskState.Name(task.status.state),
                    "explanation": explanation}
            raise TaskNotCancelableError(message=f"Task {task.id} cannot be canceled: {explanation}", data=data)
        pending = [r for r in records if r.status == "pending"]
        if not pending:
            break
        try:
            canceled = {r.id: Resolution("denied", "task canceled") for r in pending}
            await approvals.decide(task.id, canceled, "cancel", known=pending, by=by)
        except AlreadyDecided:  # another channel decided one meanwhile: look again
            records = await approvals.for_task(task.id)
            continue
        metrics.pending.dec(len(pending))
        break


__all__ = ["withdraw_approvals"]
