"""The paused-call kernel: what every kind of pause (a gated call's approval aside) shares.

- :mod:`.kind` — the :class:`~.kind.PauseKind` protocol a kind implements, the :class:`~.kind.Paused` shape of its
  rows, the :class:`~.kind.Internal` marker of in-process verdicts, and :class:`~.kind.Decision`;
- :mod:`.registry` — :class:`~.registry.PauseKinds`, the ordered registry the server asks (route a decision, refuse a
  busy context, explain a finished task, withdraw before a cancel, report a pause) instead of walking a cascade;
- :mod:`.store` — :class:`~.store.PauseStore`, the durable table base (compare-and-swap moves, ``for_task``,
  ``open_in_context``, ``expired``) and :class:`~.store.AlreadyMoved`, the one "already" error;
- :mod:`.flow` — the resume tail, the internal-message sweeper and the runtime bundle base;
- :mod:`.taskless` — :class:`~.taskless.TasklessKind`, a pause with no A2A task, resumed by its own callback when
  :class:`~agent_runtime.server.decide_one.DecideOne` (or the timeout sweeper) decides it.

docs/design.md, "Adding a kind of paused call", says how a new kind plugs in.
"""
