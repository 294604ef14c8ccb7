"""The ``ModelConfig`` custom resource (``crds/modelconfig.yaml``): which LLM an Agent talks to.

``Scripted`` is Gatehouse's offline, deterministic provider for demos and CI: rules match the latest user
text and answer with tool calls and a templated reply (see ``agent_runtime/models/scripted.py``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from agent_runtime.contract.resources.common import Resource, SpecModel

Provider = Literal["Gemini", "OpenAI", "Anthropic", "Ollama", "LiteLLM", "Scripted"]


class ScriptedToolCall(SpecModel):
    name: str = Field(min_length=1)
    args: dict[str, Any] = Field(
        default_factory=dict, description="String values are templates over the rule's named groups."
    )


class ScriptedRule(SpecModel):
    match: str = Field(min_length=1, description="Regex searched in the latest user text; named groups feed templates.")
    tool_calls: list[ScriptedToolCall] = Field(default_factory=list)
    then: list[ScriptedToolCall] = Field(
        default_factory=list, description="Calls made once the toolCalls' results are in (templates may use {result})."
    )
    reply: str = Field(default="", description="Template for the final answer (groups and tool results).")


class ScriptedSpec(SpecModel):
    rules: list[ScriptedRule] = Field(default_factory=list)
    no_match_reply: str | None = None


class ModelConfigSpec(SpecModel):
    provider: Provider
    model: str = Field(min_length=1)
    api_key_secret: str | None = None
    api_key_secret_key: str | None = None
    base_url: str | None = None
    scripted: ScriptedSpec | None = None


class ModelConfig(Resource):
    kind: Literal["ModelConfig"] = "ModelConfig"
    spec: ModelConfigSpec
