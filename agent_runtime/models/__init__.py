"""Models the runtime can run: the offline :class:`ScriptedLlm` and :func:`build_model` for every provider.

Import the submodules (``agent_runtime.models.scripted``, ``agent_runtime.models.factory``); this package
itself imports nothing heavy.
"""

__all__ = ["factory", "scripted"]
