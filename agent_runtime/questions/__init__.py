"""The model's own questions (``hitl_request``): one package, mirroring :mod:`agent_runtime.approvals`.

Modules: ``wire`` (pure: the tool's arguments, the pause payload, the answer state machine, the result the
model receives) → ``store`` (the durable ``gatehouse_hitl`` table, compare-and-swap per question) → ``tool``
(the ADK tool the model calls, and the recorder of its pause) → ``flow`` (pause, answer, confirm, timeout and
resume on an A2A task, and :class:`~agent_runtime.questions.flow.QuestionRuntime`, which bundles them for the app).

Questions never mix with tool approvals: their own table, their own parser, their own ``interrupt_type``. The
server core routes messages here and runs the turns; this package never imports it.
"""

__all__: list[str] = []
