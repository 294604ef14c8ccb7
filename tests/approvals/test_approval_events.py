from __future__ import annotations

from agent_runtime.approvals.events import ApprovalEvent, ApprovalEvents


async def test_listeners_hear_events_and_a_failing_one_breaks_nothing() -> None:
    events = ApprovalEvents()
    heard: list[ApprovalEvent] = []

    def broken(event: ApprovalEvent) -> None:
        raise RuntimeError("webhook down")

    async def record(event: ApprovalEvent) -> None:
        heard.append(event)

    events.subscribe(broken)
    unsubscribe = events.subscribe(record)
    await events.publish("decided", ["r1"], "kubectl")  # type: ignore[list-item]
    assert [(e.kind, e.records, e.source) for e in heard] == [("decided", ("r1",), "kubectl")]
    unsubscribe()
    await events.publish("requested", ["r2"])  # type: ignore[list-item]
    assert len(heard) == 1
    await events.publish("requested", [])
