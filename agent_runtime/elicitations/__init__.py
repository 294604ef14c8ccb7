"""MCP elicitation passed through to the human: an MCP tool asks the user, the task waits, the answer goes back.

The 2026-07-28 multi-round-trip form only: the tool's call returns an ``input_required`` result (its questions and
an opaque ``requestState``), the task pauses ``input-required`` with ``interrupt_type: "elicitation"``, and the
answer is sent back by retrying the call with ``inputResponses`` and the echoed ``requestState``. No MCP request is
held open through a human wait; the state is stored with the pause, so a restart in between loses nothing.

Modules, mirroring :mod:`agent_runtime.questions`: ``wire`` (pure: the pause and answer shapes, the one parser,
schema checks) → ``store`` (the durable ``gatehouse_elicitations`` table, compare-and-swap per round) → ``flow``
(pause, answer, retry, timeout and resume on an A2A task, and :class:`~agent_runtime.elicitations.flow.
ElicitationRuntime`, which bundles them for the app). The first round runs inside the ADK tool call
(``server/toolsets.py``); this package never imports the server core.
"""

__all__: list[str] = []
