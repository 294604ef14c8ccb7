from __future__ import annotations

from pathlib import Path

import pytest

from agent_runtime.contract.durations import parse_duration
from agent_runtime.contract.errors import TranslationError
from agent_runtime.contract.manifests import load_manifests, select_agent_config


@pytest.mark.parametrize(("text", "seconds"), [("30s", 30), ("15m", 900), ("1h30m", 5400), ("500ms", 0.5), ("1d", 86400)])
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "15", "15 minutes", "m", "-1s", "0s", "1h 30m"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration(text)


def test_unknown_kind_and_bad_api_version(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("apiVersion: gatehouse.dev/v1alpha1\nkind: Gadget\nmetadata: {name: g}\nspec: {}\n")
    with pytest.raises(TranslationError, match="unknown kind 'Gadget'"):
        load_manifests([path])
    path.write_text("apiVersion: v1\nkind: Agent\nmetadata: {name: g}\nspec: {}\n")
    with pytest.raises(TranslationError, match=r"expected 'gatehouse\.dev/v1alpha1'"):
        load_manifests([path])


def test_pydantic_errors_carry_the_field_path(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text(
        "apiVersion: gatehouse.dev/v1alpha1\nkind: Agent\nmetadata: {name: g}\n"
        "spec: {modelConfig: m, approval: {onTimeout: maybe}, tools: [{type: McpServer, mcpServer: {name: f}}]}\n"
    )
    with pytest.raises(TranslationError) as info:
        load_manifests([path])
    paths = {p.path.rsplit(" ", 1)[-1] for p in info.value.problems}
    assert paths == {"spec.approval.onTimeout", "spec.tools[0].mcpServer.toolNames"}


def test_select_agent_requires_one(tmp_path: Path) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("")
    with pytest.raises(TranslationError, match="expected exactly one Agent"):
        select_agent_config([path])


def test_secret_values_never_reach_agent_config() -> None:
    case = Path(__file__).parents[1] / "testdata" / "translator" / "litellm-with-secrets" / "input.yaml"
    config = select_agent_config([case])
    assert config.model.api_key is not None and config.model.api_key.env == "GATEHOUSE_MODEL_API_KEY"
    assert config.mcp_servers[0].headers[0].value_from.secret == "github-token"
