"""The dependency lookups over kopf indexes (plain mappings of key -> values stand in for kopf.Index), and the
Secrets an Agent references, read by name: problems, the secrets hash and the periodic check's comparison."""

from __future__ import annotations

from typing import Any

import pytest

import gatehouse_operator
from agent_runtime.contract.agent_config import AgentConfig
from agent_runtime.contract.manifests import load_manifests
from agent_runtime.contract.translator import access_files, translate
from gatehouse_operator import dependencies
from gatehouse_operator.dependencies import Dependencies, ReferencedSecrets, SeenSecret, changed_secrets, is_missing
from gatehouse_operator.kube import ApiException
from tests.gatehouse_operator.test_builders_golden import CASES


def _deps(**indexes: dict[Any, list[Any]]) -> Dependencies:
    names = Dependencies.__dataclass_fields__
    return Dependencies(**{name: indexes.get(name, {}) for name in names})  # type: ignore[arg-type]


class Secrets:
    """Secrets by name in one namespace, as the API would answer a GET; counts the GETs."""

    def __init__(self, **data: dict[str, str]) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.gets: list[str] = []
        self.fail: int | None = None
        for name, values in data.items():
            self.put(name, values)

    def put(self, name: str, data: dict[str, str]) -> None:
        version = int(self.objects.get(name, {}).get("metadata", {}).get("resourceVersion", "0")) + 1
        self.objects[name] = {"kind": "Secret", "metadata": {"name": name, "resourceVersion": str(version)}, "data": data}

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        assert (kind, namespace) == ("Secret", "dev")
        self.gets.append(name)
        if self.fail:
            raise ApiException(status=self.fail, reason="Forbidden")
        return self.objects.get(name)


def _config() -> tuple[AgentConfig, list[Any]]:
    manifests = load_manifests([CASES / "secrets-and-overrides" / "input.yaml"])
    (agent,) = manifests.agents.values()
    return translate(agent, manifests.model_configs, manifests.mcp_servers, in_cluster=True), access_files(agent)


def _read(kube: Secrets) -> ReferencedSecrets:
    return ReferencedSecrets(kube, "dev")  # type: ignore[arg-type]


ALL = {"anthropic": {"api-key": "czNjcjN0"}, "github-token": {"bearer": "czNjcjN0"},
       "gh-bot-tokens": {"api-tokens": "czNjcjN0"}, "login-jwks": {"jwks.json": "czNjcjN0"}}


def test_a_model_config_or_mcp_server_leads_to_the_agents_that_use_it() -> None:
    deps = _deps(agent_dependencies={("ModelConfig", "dev", "claude"): ["a", "b"], ("RemoteMCPServer", "dev", "github"): ["c"]})
    assert deps.agents_using("ModelConfig", "dev", "claude") == {"a", "b"}
    assert deps.agents_using("RemoteMCPServer", "dev", "github") == {"c"}
    assert deps.agents_using("ModelConfig", "prod", "claude") == set()


async def test_an_agent_names_only_custom_resources_in_the_index() -> None:
    spec = {"modelConfig": "m", "tools": [{"mcpServer": {"name": "s"}}],
            "access": {"tokenSecretRef": {"name": "tok"}, "jwt": {"jwksSecretRef": {"name": "keys"}}}}
    keys = await dependencies.agent_dependencies(namespace="team", name="a", spec=spec)  # type: ignore[arg-type]
    assert keys == {("ModelConfig", "team", "m"): "a", ("RemoteMCPServer", "team", "s"): "a"}


def test_nothing_indexes_or_watches_secrets() -> None:
    """kopf lists and watches every resource a handler or index names: none may name Secrets."""
    import kopf

    registry = kopf.get_default_registry()
    selectors = {str(h.selector) for handlers in (
        registry._indexing, registry._watching, registry._spawning, registry._changing, registry._webhooks,
    ) for h in handlers.get_all_handlers()}
    assert gatehouse_operator.handlers and any("'agents'" in s for s in selectors), selectors
    assert not [s for s in selectors if "secret" in s.lower()], selectors


def test_missing_secrets_and_keys_are_problems_from_key_names_only() -> None:
    config, files = _config()
    kube = Secrets(anthropic={"other": "x"}, **{"gh-bot-tokens": {"tokens": "1"}})
    problems = _read(kube).problems(config, files)
    assert [str(p) for p in problems] == [
        "env GATEHOUSE_MODEL_API_KEY: Secret 'anthropic' has no key 'api-key'",
        "env GATEHOUSE_MCP_GITHUB_AUTHORIZATION: Secret 'github-token' not found in namespace 'dev'",
        "spec.access.tokenSecretRef: Secret 'gh-bot-tokens' has no key 'api-tokens'",
        "spec.access.jwt.jwksSecretRef: Secret 'login-jwks' not found in namespace 'dev'",
    ]
    assert is_missing(problems)
    assert _read(Secrets(**ALL)).problems(config, files) == []


def test_each_secret_is_read_once_and_only_versions_and_key_names_are_kept() -> None:
    config, files = _config()
    kube = Secrets(**ALL)
    read = _read(kube)
    read.problems(config)
    assert kube.gets == ["anthropic", "github-token"]  # the environment's: no access file asked for yet
    read.problems(config, files)
    read.hash(config, files)
    assert kube.gets == ["anthropic", "github-token", "gh-bot-tokens", "login-jwks"]
    assert read.get("anthropic") == SeenSecret("1", frozenset({"api-key"}))
    assert read.versions() == {"anthropic": "1", "github-token": "1", "gh-bot-tokens": "1", "login-jwks": "1"}
    assert "czNjcjN0" not in repr(vars(read))  # the key names only, no value anywhere
    missing = _read(Secrets())
    missing.problems(config)
    assert missing.versions() == {"anthropic": None, "github-token": None}


def test_the_hash_follows_resource_versions_never_values() -> None:
    config, files = _config()
    kube = Secrets(**ALL)
    first = _read(kube).hash(config, files)
    assert first == _read(kube).hash(config, files) and len(first) == 64
    kube.put("anthropic", ALL["anthropic"])  # the same value, written again: a new resourceVersion
    second = _read(kube).hash(config, files)
    assert second != first
    same_versions = Secrets(**{name: {key: "other values" for key in data} for name, data in ALL.items()})
    assert _read(same_versions).hash(config, files) == first  # values are not part of it
    assert _read(kube).hash(config) != second  # the access files count
    manifests = load_manifests([CASES / "file-manager" / "input.yaml"])
    (agent,) = manifests.agents.values()
    assert _read(kube).hash(translate(agent, manifests.model_configs, manifests.mcp_servers)) == ""  # none needed


def test_a_secret_written_in_the_reconcile_is_known_without_a_read() -> None:
    kube = Secrets()
    read = _read(kube)
    read.saw({"metadata": {"name": "a-access", "resourceVersion": "9"}, "data": {"tokens": "dG9r"}})
    assert read.get("a-access") == SeenSecret("9", frozenset({"tokens"})) and kube.gets == []


def test_a_secret_that_cannot_be_read_is_an_error_not_a_missing_secret() -> None:
    config, _ = _config()
    kube = Secrets(**ALL)
    kube.fail = 403
    with pytest.raises(ApiException):
        _read(kube).problems(config)


def test_the_check_names_the_secrets_whose_version_moved() -> None:
    kube = Secrets(**ALL)
    versions = {"anthropic": "1", "github-token": "1", "new-one": None}
    assert changed_secrets(kube, "dev", versions) == []  # type: ignore[arg-type]
    kube.put("anthropic", {"api-key": "2"})
    kube.put("new-one", {"k": "v"})
    del kube.objects["github-token"]
    assert changed_secrets(kube, "dev", versions) == ["anthropic", "github-token", "new-one"]  # type: ignore[arg-type]
    assert changed_secrets(kube, "dev", {}) == []  # type: ignore[arg-type]


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


# -- Agents used as tools (sub-agents) -------------------------------------------------------------------------------


def _agent_body(name: str, *children: str, namespace: str = "team", **spec: Any) -> dict[str, Any]:
    tools = [{"type": "Agent", "agent": {"name": child}} for child in children]
    return {"apiVersion": "gatehouse.dev/v1alpha1", "kind": "Agent", "metadata": {"name": name, "namespace": namespace},
            "spec": {"modelConfig": "m", "tools": tools, **spec}}


class _Body(dict[str, Any]):
    """As much of kopf.Body as the index functions read."""

    @property
    def metadata(self) -> Any:
        from types import SimpleNamespace

        return SimpleNamespace(**self["metadata"])


async def test_an_agent_names_the_agents_of_its_namespace_it_uses_as_tools_in_the_index() -> None:
    spec = {"modelConfig": "m", "tools": [
        {"type": "Agent", "agent": {"name": "files"}},
        {"type": "Agent", "agent": {"name": "remote", "cardUrl": "https://r.example.com/"}},  # not an Agent here
        {"type": "McpServer", "mcpServer": {"name": "s"}}]}
    keys = await dependencies.agent_dependencies(namespace="team", name="o", spec=spec)  # type: ignore[arg-type]
    assert keys == {("ModelConfig", "team", "m"): "o", ("RemoteMCPServer", "team", "s"): "o", ("Agent", "team", "files"): "o"}
    body = _agent_body("o", "files")
    cached = await dependencies.agent_cache(namespace="team", body=_Body(body))  # type: ignore[arg-type]
    assert cached == {"team": body}


def test_reachable_agents_follow_agent_tools_and_parse_nothing_else() -> None:
    bodies = [_agent_body("o", "a", "ghost"), _agent_body("a", "b"), _agent_body("b", "o"), _agent_body("bystander"),
              {**_agent_body("broken"), "spec": {"tools": "not a list"}}, _agent_body("x", namespace="other")]
    deps = _deps(agent_cache={"team": bodies[:5], "other": bodies[5:]})
    from agent_runtime.contract.resources import Agent

    agents, problems = deps.reachable_agents(Agent.model_validate(bodies[0]))
    assert sorted(agents) == ["a", "b"] and problems == []  # not o itself (the translator has it), not the bystander
    with_broken = Agent.model_validate(_agent_body("p", "broken", "a"))
    agents, problems = deps.reachable_agents(with_broken)
    assert sorted(agents) == ["a", "b", "o"]
    assert problems and all(p.path.startswith("Agent 'broken'") for p in problems)
    deeper = Agent.model_validate(_agent_body("q", "r"))
    agents, problems = _deps(agent_cache={"team": [_agent_body("r", "broken"), bodies[4]]}).reachable_agents(deeper)
    assert sorted(agents) == ["r"] and problems == []  # an invalid Agent deeper down is its parent's problem
    assert _deps().reachable_agents(deeper) == ({}, [])


def test_only_a_changed_spec_concerns_the_agents_that_use_an_agent() -> None:
    from gatehouse_operator.settings import OperatorConfig, OperatorState

    state = OperatorState(config=OperatorConfig(), kube=None)  # type: ignore[arg-type]
    spec = {"modelConfig": "m", "description": "one"}
    assert state.agent_spec_changed("team", "files", spec)  # first seen
    assert not state.agent_spec_changed("team", "files", dict(spec))  # a status write: the same spec
    assert state.agent_spec_changed("team", "files", {**spec, "description": "two"})
    assert state.agent_spec_changed("other", "files", {**spec, "description": "two"})  # per namespace: first seen
    assert state.agent_spec_changed("team", "files", None, deleted=True)
    assert state.agent_spec_changed("team", "files", {**spec, "description": "two"})  # back after deletion: new
