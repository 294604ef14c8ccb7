"""Golden files of the children an Agent owns: tests/testdata/operator/<case>/{input.yaml,expected.json}.

``expected.json`` is :func:`gatehouse_operator.builders.desired_children` for the case's Agent (owner uid
fixed), rendered with the default runtime image. Regenerate with
``pytest tests/operator_tests/test_builders_golden.py --update-golden`` and review the diff.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent_runtime.agent_config import AgentConfig
from agent_runtime.manifests import load_manifests
from agent_runtime.translator import secret_env, translate
from gatehouse_operator import builders
from gatehouse_operator.settings import DEFAULT_RUNTIME_IMAGE
from tests.support.golden import assert_golden

CASES = Path(__file__).resolve().parents[1] / "testdata" / "operator"
OWNER_UID = "00000000-0000-4000-8000-000000000001"


def _cases() -> list[str]:
    return sorted(p.name for p in CASES.iterdir() if (p / "input.yaml").exists())


def _render(case: Path) -> tuple[list[dict[str, Any]], AgentConfig]:
    manifests = load_manifests([case / "input.yaml"])
    (agent,) = manifests.agents.values()
    config = translate(agent, manifests.model_configs, manifests.mcp_servers, in_cluster=True)
    (doc,) = [d for d in yaml.safe_load_all((case / "input.yaml").read_text()) if d and d["kind"] == "Agent"]
    owner = {**doc, "metadata": {**doc["metadata"], "uid": OWNER_UID}}
    secrets_hash = "f" * 64 if secret_env(config) else ""
    # The case with secrets also exercises the REST token Secret the chart hands to the operator.
    token_secret = "gatehouse-api-token" if secret_env(config) else ""
    inputs = builders.BuildInputs(runtime_image=DEFAULT_RUNTIME_IMAGE, secrets_hash=secrets_hash, api_token_secret=token_secret)
    return builders.desired_children(agent, owner, config, inputs), config


@pytest.mark.parametrize("name", _cases())
def test_children_match_golden(name: str, update_golden: bool) -> None:
    actual, _ = _render(CASES / name)
    assert_golden(actual, CASES / name / "expected.json", update_golden)


@pytest.mark.parametrize("name", _cases())
def test_every_child_is_owned_by_the_agent(name: str) -> None:
    children, _ = _render(CASES / name)
    for child in children:
        (ref,) = child["metadata"]["ownerReferences"]
        assert ref["uid"] == OWNER_UID and ref["kind"] == "Agent" and ref["controller"] is True


@pytest.mark.parametrize("name", _cases())
def test_config_secret_holds_the_translated_config_and_hash_matches(name: str) -> None:
    children, config = _render(CASES / name)
    secret = next(c for c in children if c["kind"] == "Secret")
    config_json = base64.b64decode(secret["data"]["config.json"]).decode()
    assert AgentConfig.from_json(config_json) == config
    card = json.loads(base64.b64decode(secret["data"]["agent-card.json"]))
    assert card["name"] == config.card.name
    deployment = next(c for c in children if c["kind"] == "Deployment")
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert annotations[builders.CONFIG_HASH_ANNOTATION] == builders.config_hash(config)


def test_secret_values_never_appear_only_references() -> None:
    children, config = _render(CASES / "secrets-and-overrides")
    (container,) = next(c for c in children if c["kind"] == "Deployment")["spec"]["template"]["spec"]["containers"]
    refs = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in container["env"] if "valueFrom" in e}
    expected = {r.env: {"name": r.secret, "key": r.key} for r in secret_env(config)}
    assert refs == {**expected, "GATEHOUSE_API_TOKEN": {"name": "gatehouse-api-token", "key": "token"}}
    assert not any(c["kind"] == "ServiceAccount" for c in children)
    binding = next(c for c in children if c["kind"] == "RoleBinding")
    assert binding["subjects"][0]["name"] == "gh-bot"  # spec.deployment.serviceAccountName, the Agent's own


def test_a_changed_config_changes_the_pod_template() -> None:
    manifests = load_manifests([CASES / "file-manager" / "input.yaml"])
    (agent,) = manifests.agents.values()
    before = translate(agent, manifests.model_configs, manifests.mcp_servers)
    agent.spec.system_message = "something else"
    after = translate(agent, manifests.model_configs, manifests.mcp_servers)
    assert builders.config_hash(before) != builders.config_hash(after)
