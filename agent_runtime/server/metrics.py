"""Prometheus metrics of one runtime, on its own registry (so several apps can live in one test process)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.model_calls = Counter(
            "gatehouse_model_calls", "Model calls made by the agent.", registry=self.registry
        )
        self.approval_requests = Counter(
            "gatehouse_approval_requests", "Tool calls paused for a human decision.", ["tool"], registry=self.registry
        )
        self.decisions = Counter(
            "gatehouse_decisions",
            "Decisions applied to gated calls (outcome approved|denied|timeout|refused; source a2a|timeout|policy|...).",
            ["outcome", "source"],
            registry=self.registry,
        )
        self.pending = Gauge("gatehouse_pending_approvals", "Approval requests waiting for a decision.", registry=self.registry)

    def render(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


__all__ = ["Metrics"]
