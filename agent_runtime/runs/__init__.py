"""One agent run: what the gate and the human tools learn while ADK runs (``run_scope``), and how a task's reply
goes on the wire (``replies``).
"""
