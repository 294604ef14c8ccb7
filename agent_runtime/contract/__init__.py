"""The contract: what the operator and the runtime share, pure and typed (no I/O, no ADK, no a2a-sdk).

The CRDs' pydantic models (``resources/``), the ``AgentConfig`` the operator hands the runtime and its translator, the
approval policy, the one authority function, principals, redaction, edits, the public wire contract of a paused task
(``wire``) and kagent's ``hitl/v1`` shapes. The operator may import this package and nothing else of the runtime (an
import-linter allow-list in pyproject.toml).
"""
