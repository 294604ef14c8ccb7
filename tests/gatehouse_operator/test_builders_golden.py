"""Golden files of the children an Agent owns: tests/testdata/operator/<case>/{input.yaml,expected.json}.

``expected.json`` is :func:`gatehouse_operator.builders.desired_children` for the case's Agent (owner uid
fixed), rendered with the default runtime image. Regenerate with
``pytest tests/gatehouse_operator/test_builders_golden.py --update-golden`` and review the diff.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from agent_runtime.contract.agent_config import AgentConfig
from agent_runtime.contract.manifests import load_manifests
from agent_runtime.contract.resources import Agent
from agent_runtime.contract.translator import DATABASE_URL_ENV, secret_env, translate
from gatehouse_operator import builders, storage
from gatehouse_operator.settings import DEFAULT_RUNTIME_IMAGE
from tests.support.golden import assert_golden

CASES = Path(__file__).resolve().parents[1] / "testdata" / "operator"
OWNER_UID = "00000000-0000-4000-8000-000000000001"


def _cases() -> list[str]:
    return sorted(p.name for p in CASES.iterdir() if (p / "input.yaml").exists())


def _agent(case: Path) -> Agent:
    (agent,) = load_manifests([case / "input.yaml"]).agents.values()
    return agent


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
def test_every_child_is_owned_by_the_agent_but_the_claim_only_when_asked(name: str) -> None:
    children, _ = _render(CASES / name)
    sqlite = _agent(CASES / name).spec.state.sqlite
    for child in children:
        if child["kind"] == "PersistentVolumeClaim" and not (sqlite and sqlite.delete_claim_with_agent):
            assert "ownerReferences" not in child["metadata"]  # kept when the Agent is deleted
            continue
        (ref,) = child["metadata"]["ownerReferences"]
        assert ref["uid"] == OWNER_UID and ref["kind"] == "Agent" and ref["controller"] is True


# case -> (claim, strategy, the state volume's source, Durable reason)
LAYOUTS = {
    "file-manager": ("file-manager-state", "Recreate", "persistentVolumeClaim", "Sqlite"),
    "sqlite-claim": ("ledger-state", "Recreate", "persistentVolumeClaim", "Sqlite"),
    "secrets-and-overrides": (None, "RollingUpdate", None, "Postgres"),
    "ephemeral": (None, "RollingUpdate", "emptyDir", "Ephemeral"),
    "legacy-replicas": (None, "RollingUpdate", "emptyDir", "ReplicasNeedPostgres"),
}


def test_every_case_has_its_layout_listed() -> None:
    assert sorted(LAYOUTS) == _cases()


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_each_kind_of_state_has_its_volume_strategy_and_durable_condition(name: str) -> None:
    claim, strategy, source, reason = LAYOUTS[name]
    children, _ = _render(CASES / name)
    claims = [c["metadata"]["name"] for c in children if c["kind"] == "PersistentVolumeClaim"]
    assert claims == ([claim] if claim else [])
    deployment = next(c for c in children if c["kind"] == "Deployment")
    assert deployment["spec"]["strategy"]["type"] == strategy
    if strategy == "RollingUpdate":
        assert deployment["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
    else:
        assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"]["rollingUpdate"] is None
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    state = [v for v in pod["volumes"] if v["name"] == "state"]
    if source is None:
        assert state == [] and "--state-dir" not in container["command"]
    else:
        (volume,) = state
        assert source in volume
        assert container["command"][container["command"].index("--state-dir") + 1] == storage.STATE_DIR
    if claim:
        assert state[0]["persistentVolumeClaim"] == {"claimName": claim}
    assert storage.durable_condition(_agent(CASES / name)).reason == reason


def test_the_card_url_is_the_service_unless_the_agent_names_one() -> None:
    def url(name: str) -> str:
        children, _ = _render(CASES / name)
        command = next(c for c in children if c["kind"] == "Deployment")["spec"]["template"]["spec"]["containers"][0]["command"]
        return str(command[command.index("--public-url") + 1])

    assert url("file-manager") == "http://file-manager.default.svc.cluster.local:8080/"
    assert url("sqlite-claim") == "http://ledger.finance.svc.cluster.local:8080/"
    assert url("secrets-and-overrides") == "https://gh-bot.example.com/"  # spec.a2aConfig.publicUrl


def test_the_claim_names_a_storage_class_only_when_the_agent_does() -> None:
    (default,) = [c for c in _render(CASES / "file-manager")[0] if c["kind"] == "PersistentVolumeClaim"]
    assert default["spec"] == {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    (named,) = [c for c in _render(CASES / "sqlite-claim")[0] if c["kind"] == "PersistentVolumeClaim"]
    assert named["spec"]["storageClassName"] == "fast-ssd" and named["spec"]["resources"]["requests"]["storage"] == "5Gi"


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


@pytest.mark.parametrize("name", _cases())
@pytest.mark.parametrize("k8s_version", ["1.30", "1.35"])
def test_every_child_is_valid_for_kubernetes(name: str, k8s_version: str) -> None:
    """Strictly, against the API's own schemas: a misspelt field (say in a probe or a securityContext) fails here."""
    for child in json.loads((CASES / name / "expected.json").read_text()):
        kubernetes_validate.validate(child, k8s_version, strict=True)


def test_secret_values_never_appear_only_references() -> None:
    children, config = _render(CASES / "secrets-and-overrides")
    (container,) = next(c for c in children if c["kind"] == "Deployment")["spec"]["template"]["spec"]["containers"]
    refs = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in container["env"] if "secretKeyRef" in e.get("valueFrom", {})}
    expected = {r.env: {"name": r.secret, "key": r.key} for r in secret_env(config)}
    assert refs == {**expected, "GATEHOUSE_API_TOKEN": {"name": "gatehouse-api-token", "key": "token"},
                    DATABASE_URL_ENV: {"name": "gh-bot-db", "key": "url"}}
    assert "postgres" not in config.to_json()  # the database URL is never in the config, only its Secret's name
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


def test_the_runtime_reads_the_database_url_from_the_variable_the_operator_sets() -> None:
    import typer.main

    from agent_runtime.clients.cli import runtime_app

    serve = typer.main.get_command(runtime_app).commands["serve"]  # type: ignore[attr-defined]
    (option,) = [p for p in serve.params if p.name == "database_url"]
    assert option.envvar == DATABASE_URL_ENV and "--database-url" in option.opts
