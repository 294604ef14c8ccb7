"""Prometheus metrics of one runtime, on its own registry (so several apps can live in one test process).

Counted where they happen (model calls and requests in the gate, decisions where they are applied); the
decision latency, timeouts and what became of approved calls from the approval events
(:meth:`Metrics.on_approval_event`), so every channel is measured alike.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from agent_runtime.approvals.events import ApprovalEvent

LATENCY_BUCKETS = (0.5, 1, 5, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 4 * 3600, 24 * 3600)


class Metrics:
    def __init__(self, agent: str = "") -> None:
        self.agent = agent
        self.registry = CollectorRegistry()
        self.model_calls = Counter(
            "gatehouse_model_calls", "Model calls made by the agent.", registry=self.registry
        )
        self.approval_requests = Counter(
            "gatehouse_approval_requests", "Tool calls paused for a human decision.", ["agent", "tool"],
            registry=self.registry,
        )
        self.decisions = Counter(
            "gatehouse_decisions",
            "Decisions applied to gated calls (outcome approved|denied|timeout|refused; source a2a|rest|timeout|policy|...).",
            ["outcome", "source"],
            registry=self.registry,
        )
        self.pending = Gauge("gatehouse_pending_approvals", "Approval requests waiting for a decision.", registry=self.registry)
        self.timeouts = Counter(
            "gatehouse_approval_timeouts", "Approval requests that timed out (onTimeout applied).", ["agent", "tool"],
            registry=self.registry,
        )
        self.decision_latency = Histogram(
            "gatehouse_decision_latency_seconds", "Seconds from a request to its decision.", ["outcome", "source"],
            buckets=LATENCY_BUCKETS, registry=self.registry,
        )
        self.tool_executions = Counter(
            "gatehouse_tool_executions",
            "Approved tool calls by what became of them (agent_runtime/approvals/execution.py): ran; failed (the tool or "
            "the way to it reported an error); unknown (it may have reached the server); not_sent.",
            ["agent", "tool", "outcome"],
            registry=self.registry,
        )
        self.webhook_deliveries = Counter(
            "gatehouse_webhook_deliveries",
            "Outgoing webhook deliveries by how they ended: ok; refused (a 4xx, not retried); dead_letter (every attempt "
            "failed); dropped (the webhook's queue was full); error (it could not be rendered or sent).",
            ["result"],
            registry=self.registry,
        )

    def on_approval_event(self, event: ApprovalEvent) -> None:
        """An :class:`~agent_runtime.approvals.events.ApprovalEvents` listener: latency, timeouts, executions."""
        if event.kind == "executed":
            for r in event.records:
                if r.exec_outcome is not None:
                    self.tool_executions.labels(agent=self.agent, tool=r.tool, outcome=r.exec_outcome).inc()
            return
        if event.kind != "decided":
            return
        for r in event.records:
            outcome = "timeout" if r.status == "expired" else r.status
            if event.source == "timeout":
                self.timeouts.labels(agent=self.agent, tool=r.tool).inc()
            if r.decided_at is not None:
                self.decision_latency.labels(outcome=outcome, source=event.source).observe(max(0.0, r.decided_at - r.created_at))

    def render(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


__all__ = ["Metrics"]
