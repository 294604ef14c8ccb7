"""Approval records as the outside world sees them: with ``decided_by`` and the votes looked up (one query each per batch),
and the arguments redacted (:meth:`ApprovalView.of <agent_runtime.rest.models.ApprovalView.of>`). REST lists and single
views, the event stream and the webhooks all render through here, so none of them shows what the Agent's
``spec.approval.redact`` (or a built-in secret shape) hides."""

from __future__ import annotations

from collections.abc import Sequence

from agent_runtime.approvals import ApprovalRecord, deciders
from agent_runtime.approvals import votes as vote_rows
from agent_runtime.infra.database import Database
from agent_runtime.rest.models import ApprovalView


async def views(db: Database, records: Sequence[ApprovalRecord]) -> list[ApprovalView]:
    decided = [r.id for r in records if r.status != "pending"]
    by = await deciders.lookup(db, decided)
    cast = await vote_rows.lookup(db, [r.id for r in records if r.approvers is not None])
    return [ApprovalView.of(r, by.get(r.id), vote_rows.counted(cast.get(r.id, []))) for r in records]


__all__ = ["views"]
