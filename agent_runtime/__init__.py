"""Gatehouse agent runtime: the AgentConfig contract, its translator, the approval policy and the server.

Importing this package is cheap; heavy dependencies (google-adk, a2a-sdk) load only where they are used.
"""

from agent_runtime.agent_config import AgentConfig
from agent_runtime.errors import Problem, TranslationError
from agent_runtime.translator import translate

__all__ = ["AgentConfig", "Problem", "TranslationError", "translate"]
