"""``build_model``: the one place a model setting of ``AgentConfig`` becomes an ADK ``BaseLlm``.

- ``Scripted`` → :class:`~agent_runtime.models.scripted.ScriptedLlm` (offline, deterministic);
- ``Gemini`` → ADK's ``Gemini`` (API key from the environment variable the config names, if it names one);
- ``OpenAI``/``Anthropic``/``Ollama``/``LiteLLM`` → ADK's ``LiteLlm`` with the provider prefix LiteLLM expects.

Secrets are read from the environment when a model is built, never at import time; the config itself only
carries the *names* of the variables (see :class:`~agent_runtime.contract.agent_config.SecretEnvRef`).

LiteLLM is told to use the price list it ships (``LITELLM_LOCAL_MODEL_COST_MAP``) before it is first imported:
otherwise its import fetches one from GitHub, which a cluster without egress waits on and a pod should not need.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping
from typing import Any

from google.adk.models import BaseLlm

from agent_runtime.contract.agent_config import GeminiModel, LiteLLMModel, ModelSettings, ScriptedModel, SecretEnvRef

__all__ = ["KEYLESS_OPENAI_KEY", "LITELLM_PREFIXES", "ModelBuildError", "build_model", "litellm_args", "litellm_model_name"]

LITELLM_PREFIXES: dict[str, str] = {"OpenAI": "openai", "Anthropic": "anthropic", "Ollama": "ollama_chat", "LiteLLM": ""}
# OpenAI's client refuses to send a request without a key, even to a server that checks none (llama.cpp, vLLM,
# LM Studio): a ModelConfig with a baseUrl and no apiKeySecret gets this one, unless OPENAI_API_KEY is set.
KEYLESS_OPENAI_KEY = "no-key"
LITELLM_MISSING = (
    "The {provider} provider needs LiteLLM, which is not installed; install the 'litellm' extra: pip install 'gatehouse[litellm]'"
)


class ModelBuildError(RuntimeError):
    """The model cannot be built from this config in this environment (the message says what to fix)."""


def build_model(cfg: ModelSettings, env: Mapping[str, str] | None = None) -> BaseLlm:
    """Build the ADK model for ``cfg``; ``env`` defaults to ``os.environ`` (read now, not at import)."""
    environ = os.environ if env is None else env
    if isinstance(cfg, ScriptedModel):
        from agent_runtime.models.scripted import ScriptedLlm

        return ScriptedLlm.from_config(cfg)
    if isinstance(cfg, GeminiModel):
        return _gemini(cfg, environ)
    if isinstance(cfg, LiteLLMModel):
        return _litellm(cfg, environ)
    raise ModelBuildError(f"unknown model provider {getattr(cfg, 'provider', cfg)!r}")


def litellm_model_name(cfg: LiteLLMModel) -> str:
    """``openai/gpt-4o``, ``anthropic/…``, ``ollama_chat/…``; a ``LiteLLM`` model name is used as it is."""
    prefix = LITELLM_PREFIXES[cfg.provider]
    if not prefix or cfg.model.startswith(f"{prefix}/"):
        return cfg.model
    return f"{prefix}/{cfg.model}"


def _secret(ref: SecretEnvRef | None, env: Mapping[str, str], provider: str) -> str | None:
    if ref is None:
        return None
    value = env.get(ref.env, "")
    if not value.strip():
        state = "empty" if ref.env in env else "not set"
        raise ModelBuildError(
            f"The {provider} model's API key is read from the environment variable {ref.env}, which is {state} "
            f"(it should come from Secret {ref.secret!r}, key {ref.key!r})."
        )
    return value


def _gemini(cfg: GeminiModel, env: Mapping[str, str]) -> BaseLlm:
    from google.adk.models import Gemini

    kwargs: dict[str, Any] = {"model": cfg.model}
    if cfg.base_url:
        kwargs["base_url"] = cfg.base_url
    api_key = _secret(cfg.api_key, env, "Gemini")
    if api_key is not None:
        kwargs["client_kwargs"] = {"api_key": api_key}
    return Gemini(**kwargs)


def litellm_args(cfg: LiteLLMModel, env: Mapping[str, str]) -> dict[str, Any]:
    """What ADK's ``LiteLlm`` is built with: the model name with its provider prefix, the key, the base URL."""
    name = litellm_model_name(cfg)
    api_key = _secret(cfg.api_key, env, cfg.provider)
    if api_key is None and cfg.base_url and name.startswith("openai/") and not env.get("OPENAI_API_KEY", "").strip():
        api_key = KEYLESS_OPENAI_KEY
    args: dict[str, Any] = {"model": name}
    if api_key is not None:
        args["api_key"] = api_key
    if cfg.base_url:
        args["api_base"] = cfg.base_url
    return args


def _litellm(cfg: LiteLLMModel, env: Mapping[str, str]) -> BaseLlm:
    args = litellm_args(cfg, env)
    if importlib.util.find_spec("litellm") is None:
        raise ModelBuildError(LITELLM_MISSING.format(provider=cfg.provider))
    # os.environ, not ``env``: LiteLLM reads it when it is imported, on the first model call of this process.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        from google.adk.models.lite_llm import LiteLlm
    except ImportError as exc:
        raise ModelBuildError(LITELLM_MISSING.format(provider=cfg.provider) + f" ({exc})") from exc
    return LiteLlm(**args)
