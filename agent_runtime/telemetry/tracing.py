"""OpenTelemetry spans for approval waits: one span per request, from requested to decided. Off by default.

On when ``serve --otel`` is given or ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``)
is set, and ``OTEL_SDK_DISABLED`` is not ``true`` (:func:`enabled`, read once at start-up). Then :func:`start`
builds a tracer provider of the runtime's own (service ``gatehouse-<agent>``) that exports over OTLP/HTTP,
configured by the standard ``OTEL_EXPORTER_OTLP_*`` variables (the ``otel`` extra installs the exporter), and the
app subscribes :meth:`ApprovalSpans.on_approval_event` to the approval events. Off, this module imports nothing
of OpenTelemetry and nothing is subscribed: no cost.

A wait is whole only when it ends, so its span is made then, from the request's own times: it starts at the
request's ``created_at`` and ends at its ``decided_at``. Nothing is held in memory across the wait, so a restart
loses no span and replicas emit each span once (the replica whose decision won). A call that ran under a session
grant did not wait and gets none. Attributes (no arguments, no principals: the audit log has those):
``gatehouse.agent``, ``gatehouse.approval.request_id``, ``gatehouse.task.id``, ``gatehouse.approval.tool``,
``gatehouse.approval.outcome`` (approved, denied, expired), ``gatehouse.approval.channel`` (a2a, rest, kubectl,
timeout, cancel) and ``gatehouse.approval.wait_seconds``. The provider is not installed globally: the spans of
ADK and a2a-sdk stay as they are.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agent_runtime.approvals.events import ApprovalEvent

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Tracer

SPAN_NAME = "gatehouse.approval.wait"
ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def enabled(flag: bool, env: Mapping[str, str]) -> bool:
    """Whether approval spans are exported: ``--otel`` or an OTLP endpoint in ``env``, unless the SDK is disabled."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return flag or any(env.get(name, "").strip() for name in ENDPOINT_VARIABLES)


def exporter_installed() -> bool:
    """Whether the OTLP/HTTP exporter (the ``otel`` extra) can be imported; nothing is imported to tell."""
    import importlib.util

    try:
        return importlib.util.find_spec("opentelemetry.exporter.otlp.proto.http") is not None
    except ModuleNotFoundError:  # no opentelemetry.exporter package at all
        return False


def _ns(epoch: float) -> int:
    return int(epoch * 1_000_000_000)


class ApprovalSpans:
    """An approval-events listener that turns each decided wait into a span."""

    def __init__(self, provider: TracerProvider, agent: str) -> None:
        self.provider = provider
        self.agent = agent
        self._tracer: Tracer = provider.get_tracer("gatehouse.approvals")

    def on_approval_event(self, event: ApprovalEvent) -> None:
        if event.kind != "decided":
            return
        for r in event.records:
            if r.decided_at is None or r.source == "grant":
                continue
            attributes: dict[str, Any] = {
                "gatehouse.agent": self.agent, "gatehouse.approval.request_id": r.id, "gatehouse.task.id": r.task_id,
                "gatehouse.approval.tool": r.tool, "gatehouse.approval.outcome": r.status,
                "gatehouse.approval.channel": r.source or event.source,
                "gatehouse.approval.wait_seconds": max(0.0, r.decided_at - r.created_at),
            }
            span = self._tracer.start_span(SPAN_NAME, start_time=_ns(r.created_at), attributes=attributes)
            span.end(end_time=_ns(max(r.decided_at, r.created_at)))

    def shutdown(self) -> None:
        """Export what is queued, then stop (also done at interpreter exit)."""
        self.provider.shutdown()


def start(agent: str, exporter: SpanExporter | None = None) -> ApprovalSpans:
    """Approval spans for ``agent``, exported over OTLP/HTTP in batches; or, given ``exporter`` (tests: the SDK's
    in-memory exporter), to it span by span."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": f"gatehouse-{agent}"}))
    if exporter is not None:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    else:
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            raise RuntimeError(
                "OpenTelemetry export is on (--otel or OTEL_EXPORTER_OTLP_ENDPOINT) but the OTLP exporter is not "
                "installed: pip install 'gatehouse[otel]'"
            ) from None
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return ApprovalSpans(provider, agent)


__all__ = ["ENDPOINT_VARIABLES", "SPAN_NAME", "ApprovalSpans", "enabled", "exporter_installed", "start"]
