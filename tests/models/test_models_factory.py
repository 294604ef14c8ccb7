"""build_model: provider → ADK model, and the errors a user can act on."""

from __future__ import annotations

import importlib.util
import os

import pytest

from agent_runtime.contract.agent_config import GeminiModel, LiteLLMModel, ScriptedModel, SecretEnvRef
from agent_runtime.models import factory
from agent_runtime.models.factory import KEYLESS_OPENAI_KEY, ModelBuildError, build_model, litellm_args, litellm_model_name
from agent_runtime.models.scripted import ScriptedLlm

KEY = SecretEnvRef(env="MY_MODEL_KEY", secret="model-secret", key="api-key")


def test_scripted() -> None:
    model = build_model(ScriptedModel(model="script"))
    assert isinstance(model, ScriptedLlm) and model.model == "script"


def test_gemini_with_key_from_env() -> None:
    from google.adk.models import Gemini

    model = build_model(GeminiModel(model="gemini-2.5-flash", api_key=KEY), env={"MY_MODEL_KEY": "k-123"})
    assert isinstance(model, Gemini)
    assert model.model == "gemini-2.5-flash"
    assert model.client_kwargs == {"api_key": "k-123"}


def test_gemini_without_key_in_config_uses_adk_defaults() -> None:
    model = build_model(GeminiModel(model="gemini-2.5-flash"), env={})
    assert model.client_kwargs is None  # type: ignore[attr-defined]


@pytest.mark.parametrize("env", [{}, {"MY_MODEL_KEY": ""}, {"MY_MODEL_KEY": "  "}])
def test_gemini_key_missing_in_environment_names_the_variable(env: dict[str, str]) -> None:
    with pytest.raises(ModelBuildError, match="MY_MODEL_KEY") as info:
        build_model(GeminiModel(model="gemini-2.5-flash", api_key=KEY), env=env)
    assert "model-secret" in str(info.value)


def test_environment_is_read_when_building(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_MODEL_KEY", "from-os-environ")
    model = build_model(GeminiModel(model="gemini-2.5-flash", api_key=KEY))
    assert model.client_kwargs == {"api_key": "from-os-environ"}  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("provider", "model", "expected"),
    [
        ("OpenAI", "gpt-4o", "openai/gpt-4o"),
        ("OpenAI", "openai/gpt-4o", "openai/gpt-4o"),
        ("Anthropic", "claude-sonnet", "anthropic/claude-sonnet"),
        ("Ollama", "llama3", "ollama_chat/llama3"),
        ("LiteLLM", "bedrock/some-model", "bedrock/some-model"),
    ],
)
def test_litellm_names(provider: str, model: str, expected: str) -> None:
    assert litellm_model_name(LiteLLMModel(provider=provider, model=model)) == expected  # type: ignore[arg-type]


def test_litellm_missing_extra_is_a_clear_runtime_error(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(factory.importlib.util, "find_spec", lambda name, *a: None if name == "litellm" else real(name, *a))
    with pytest.raises(RuntimeError, match=r"pip install 'gatehouse\[litellm\]'"):
        build_model(LiteLLMModel(provider="OpenAI", model="gpt-4o"), env={})


def test_litellm_key_missing_in_environment_names_the_variable() -> None:
    with pytest.raises(ModelBuildError, match="MY_MODEL_KEY"):
        build_model(LiteLLMModel(provider="Anthropic", model="claude", api_key=KEY), env={})


@pytest.mark.skipif(importlib.util.find_spec("litellm") is None, reason="the litellm extra is not installed")
def test_litellm_builds_with_key_and_base() -> None:
    model = build_model(
        LiteLLMModel(provider="Ollama", model="llama3", api_key=KEY, base_url="http://127.0.0.1:11434"),
        env={"MY_MODEL_KEY": "k"},
    )
    assert model.model == "ollama_chat/llama3"
    assert model._additional_args["api_base"] == "http://127.0.0.1:11434"  # type: ignore[attr-defined]
    assert model._additional_args["api_key"] == "k"  # type: ignore[attr-defined]


LOCAL = "http://127.0.0.1:8080/v1"


def test_openai_compatible_server_without_a_key_gets_a_placeholder() -> None:
    # OpenAI's client sends no request without a key; llama.cpp, vLLM or LM Studio check none
    args = litellm_args(LiteLLMModel(provider="OpenAI", model="qwen", base_url=LOCAL), env={})
    assert args == {"model": "openai/qwen", "api_key": KEYLESS_OPENAI_KEY, "api_base": LOCAL}


@pytest.mark.parametrize(
    ("cfg", "env"),
    [
        (LiteLLMModel(provider="OpenAI", model="gpt-4o"), {}),  # OpenAI itself: its own "missing key" error
        (LiteLLMModel(provider="OpenAI", model="qwen", base_url=LOCAL), {"OPENAI_API_KEY": "sk-env"}),  # LiteLLM's
        (LiteLLMModel(provider="Anthropic", model="claude", base_url=LOCAL), {}),
        (LiteLLMModel(provider="Ollama", model="llama3", base_url="http://127.0.0.1:11434"), {}),
    ],
)
def test_no_placeholder_key_where_a_real_one_is_expected_or_not_needed(cfg: LiteLLMModel, env: dict[str, str]) -> None:
    assert "api_key" not in litellm_args(cfg, env)


def test_a_configured_key_wins_over_the_placeholder() -> None:
    args = litellm_args(LiteLLMModel(provider="OpenAI", model="qwen", base_url=LOCAL, api_key=KEY), env={"MY_MODEL_KEY": "k"})
    assert args["api_key"] == "k"


@pytest.mark.skipif(importlib.util.find_spec("litellm") is None, reason="the litellm extra is not installed")
@pytest.mark.parametrize(("before", "after"), [(None, "True"), ("False", "False")])
def test_litellm_uses_its_own_price_list_unless_told_otherwise(
    monkeypatch: pytest.MonkeyPatch, before: str | None, after: str
) -> None:
    # set before LiteLLM's import, which would otherwise fetch the price list from GitHub
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", before or "")  # undone after the test, whatever build_model sets
    if before is None:
        monkeypatch.delenv("LITELLM_LOCAL_MODEL_COST_MAP")
    build_model(LiteLLMModel(provider="OpenAI", model="qwen", base_url=LOCAL), env={})
    assert os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] == after
