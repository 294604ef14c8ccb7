"""Gatehouse agent runtime: the AgentConfig contract, its translator, the approval policy and the server.

Importing this package is cheap; heavy dependencies (google-adk, a2a-sdk) load only where they are used. Even the
contract loads on first use (``__getattr__``): ``gatehouse hook claude-code`` runs before every tool call of an agent
CLI and needs none of it (measured: the eager imports were ~0.5 s of its start-up).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_runtime.contract.agent_config import AgentConfig
    from agent_runtime.contract.errors import Problem, TranslationError
    from agent_runtime.contract.translator import translate

_LAZY = {"AgentConfig": "agent_runtime.contract.agent_config", "Problem": "agent_runtime.contract.errors",
         "TranslationError": "agent_runtime.contract.errors", "translate": "agent_runtime.contract.translator"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'agent_runtime' has no attribute {name!r}")


__all__ = ["AgentConfig", "Problem", "TranslationError", "translate"]
