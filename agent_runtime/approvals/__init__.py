"""Pending approvals: their records (pure) and the durable, exactly-once service that decides them."""

from agent_runtime.approvals import deciders  # its table joins the approvals' metadata (created at start-up)
from agent_runtime.approvals.records import ApprovalRecord, Resolution, args_hash, iso_utc
from agent_runtime.approvals.service import AlreadyDecided, ApprovalService, ArgumentsChanged, Claim, Voted

__all__ = [
    "AlreadyDecided", "ApprovalRecord", "ApprovalService", "ArgumentsChanged", "Claim", "Resolution", "Voted", "args_hash",
    "deciders", "iso_utc",
]
