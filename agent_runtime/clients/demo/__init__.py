"""``gatehouse demo``: the example agent, running locally, walked through one conversation.

    runner.run_demo ─► stack.started (sandbox, demo-tools, runtime, /readyz) ─► walkthrough.narrate | handover

:mod:`stack` owns the processes, :mod:`walkthrough` the conversation and its checks.
"""

from agent_runtime.clients.demo.runner import run_demo

__all__ = ["run_demo"]
