"""``spec.approval.redact`` from the CRD through the pydantic model to ``AgentConfig.approval.redact`` (golden cases:
tests/testdata/translator/redaction and bad-redaction); the same description in the CRD and the model is checked
for every Agent field by tests/contract/test_translator_access.py."""

from __future__ import annotations

from typing import Any

import pytest

from agent_runtime.contract.agent_config import AgentConfig, RedactConfig
from agent_runtime.contract.errors import TranslationError
from agent_runtime.contract.resources import Agent, ModelConfig, RemoteMCPServer
from agent_runtime.contract.translator import translate
from tests.support.crd_validation import apply_defaults, schema_for, validate

MODELS = {"m": ModelConfig.model_validate({"kind": "ModelConfig", "metadata": {"name": "m"},
                                           "spec": {"provider": "Scripted", "model": "s"}})}


def _doc(**redact: Any) -> dict[str, Any]:
    return {"apiVersion": "gatehouse.dev/v1alpha1", "kind": "Agent", "metadata": {"name": "a", "namespace": "ns"},
            "spec": {"modelConfig": "m", "approval": {"redact": redact} if redact else {}}}


def _translate(**redact: Any) -> AgentConfig:
    servers: dict[str, RemoteMCPServer] = {}
    return translate(Agent.model_validate(_doc(**redact)), MODELS, servers)


def test_by_default_the_built_in_secret_shapes_are_redacted() -> None:
    assert _translate().approval.redact == RedactConfig(paths=[], patterns=[], builtins=True)
    defaulted = apply_defaults(schema_for("Agent"), _doc(paths=["token"]))
    assert defaulted["spec"]["approval"]["redact"]["builtins"] is True  # the API server's default too
    assert validate(_doc()) == []


def test_paths_and_patterns_are_translated_once_each() -> None:
    config = _translate(paths=["token", "$.headers.authorization", "token"], patterns=["a+", "a+"], builtins=False)
    assert config.approval.redact == RedactConfig(paths=["token", "$.headers.authorization"], patterns=["a+"], builtins=False)
    assert AgentConfig.from_json(config.to_json()) == config


def test_what_cannot_work_is_named_with_its_field_path() -> None:
    with pytest.raises(TranslationError) as caught:
        _translate(paths=["ok", "a..b"], patterns=["(", "fine"])
    assert [p.path for p in caught.value.problems] == ["spec.approval.redact.paths[1]", "spec.approval.redact.patterns[0]"]


@pytest.mark.parametrize("redact", [{"paths": [""]}, {"patterns": [""]}, {"builtins": "yes"}, {"paths": ["x"] * 65}])
def test_the_crd_refuses_a_malformed_redact_block(redact: dict[str, Any]) -> None:
    assert validate(_doc(**redact)) != []
