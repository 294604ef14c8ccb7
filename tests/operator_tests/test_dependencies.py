"""The dependency lookups over kopf indexes (plain mappings of key -> values stand in for kopf.Index)."""

from __future__ import annotations

from typing import Any

from agent_runtime.manifests import load_manifests
from agent_runtime.translator import translate
from gatehouse_operator.dependencies import Dependencies, is_missing
from tests.operator_tests.test_builders_golden import CASES


def _deps(**indexes: dict[Any, list[Any]]) -> Dependencies:
    names = Dependencies.__dataclass_fields__
    return Dependencies(**{name: indexes.get(name, {}) for name in names})  # type: ignore[arg-type]


def test_a_secret_leads_to_the_agents_through_model_configs_and_mcp_servers() -> None:
    deps = _deps(
        agent_dependencies={("ModelConfig", "dev", "claude"): ["a", "b"], ("RemoteMCPServer", "dev", "github"): ["c"]},
        model_config_secrets={("dev", "anthropic"): ["claude"]},
        mcp_server_secrets={("dev", "shared"): ["github"]},
    )
    assert deps.agents_using("Secret", "dev", "anthropic") == {"a", "b"}
    assert deps.agents_using("Secret", "dev", "shared") == {"c"}
    assert deps.agents_using("Secret", "prod", "anthropic") == set()
    assert deps.agents_using("ModelConfig", "dev", "claude") == {"a", "b"}


def test_missing_secrets_and_keys_are_problems_and_the_hash_follows_values() -> None:
    manifests = load_manifests([CASES / "secrets-and-overrides" / "input.yaml"])
    (agent,) = manifests.agents.values()
    config = translate(agent, manifests.model_configs, manifests.mcp_servers)
    deps = _deps(secret_digests={("dev", "anthropic"): [{"other": "x"}]})
    problems = deps.secret_problems("dev", config)
    assert [p.message for p in problems] == [
        "Secret 'anthropic' has no key 'api-key'",
        "Secret 'github-token' not found in namespace 'dev'",
    ]
    assert is_missing(problems)
    one = _deps(secret_digests={("dev", "anthropic"): [{"api-key": "1"}], ("dev", "github-token"): [{"bearer": "1"}]})
    two = _deps(secret_digests={("dev", "anthropic"): [{"api-key": "2"}], ("dev", "github-token"): [{"bearer": "1"}]})
    assert one.secret_problems("dev", config) == []
    assert one.secrets_hash("dev", config) != two.secrets_hash("dev", config)


def test_resolve_reads_the_caches_and_reports_invalid_dependencies() -> None:
    manifests = load_manifests([CASES / "file-manager" / "input.yaml"])
    (agent,) = manifests.agents.values()
    model = manifests.model_configs["scripted-file-manager"].model_dump(by_alias=True, exclude_none=True)
    deps = _deps(
        model_config_cache={("default", "scripted-file-manager"): [model]},
        mcp_server_cache={("default", "file-tools"): [{"apiVersion": "gatehouse.dev/v1alpha1", "kind": "RemoteMCPServer",
                                                       "metadata": {"name": "file-tools"}, "spec": {"url": 1}}]},
    )
    models, servers, problems = deps.resolve(agent)
    assert list(models) == ["scripted-file-manager"] and servers == {}
    assert problems and problems[0].path.startswith("RemoteMCPServer 'file-tools'")
