"""Sub-agents: ``spec.tools[].type: Agent`` and ``spec.access.delegators`` / ``maxDelegationDepth``, from the CRD (schema,
CEL rules) through the pydantic model to ``AgentConfig.sub_agents`` and ``AgentConfig.access``. The golden cases
(tests/testdata/translator/sub-agents, sub-agents-alone, bad-sub-agents) pin whole translations; these pin the rules
one by one, and two properties pin the graph checks: an Agent is refused for a cycle exactly when one is reachable
through its Agent tools, and for depth exactly when its longest chain is longer than its maxDelegationDepth."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from agent_runtime.contract.agent_config import AgentConfig, SecretEnvRef
from agent_runtime.contract.errors import TranslationError
from agent_runtime.contract.resources import Agent, ModelConfig, RemoteMCPServer
from agent_runtime.contract.translator import (
    AGENT_TOKEN_FILE,
    agent_url,
    env_name,
    referenced_secrets,
    secret_env,
    translate,
)
from tests.support.crd_validation import apply_defaults, cel_errors, schema_for, validate

NS = "team"
MODELS = {"m": ModelConfig.model_validate({"kind": "ModelConfig", "metadata": {"name": "m"},
                                           "spec": {"provider": "Scripted", "model": "s"}})}
SERVERS = {"notes": RemoteMCPServer.model_validate({"kind": "RemoteMCPServer", "metadata": {"name": "notes"},
                                                   "spec": {"url": "http://notes/mcp"}})}
NOTES = {"type": "McpServer", "mcpServer": {"name": "notes", "toolNames": ["write_note"]}}


def _tool(name: str, **agent: Any) -> dict[str, Any]:
    return {"type": "Agent", "agent": {"name": name, **agent}}


def _doc(name: str = "orchestrator", *tools: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "gatehouse.dev/v1alpha1", "kind": "Agent", "metadata": {"name": name, "namespace": NS},
            "spec": {"modelConfig": "m", "tools": list(tools), **spec}}


def _agent(name: str = "orchestrator", *tools: dict[str, Any], **spec: Any) -> Agent:
    return Agent.model_validate(_doc(name, *tools, **spec))


def _ns(*agents: Agent) -> dict[str, Agent]:
    return {a.name: a for a in agents}


FILES = _agent("files", description="Reads and writes files.")


def _translate(agent: Agent, agents: dict[str, Agent] | None = None, in_cluster: bool = False) -> AgentConfig:
    return translate(agent, MODELS, SERVERS, in_cluster=in_cluster, agents=agents)


def _problems(agent: Agent, agents: dict[str, Agent] | None = None, in_cluster: bool = False) -> list[str]:
    with pytest.raises(TranslationError) as exc:
        _translate(agent, agents, in_cluster)
    return [str(p) for p in exc.value.problems]


# -- the model and the CRD: one source per tool, matching its type; delegators name one thing ---------------------


MCP_MSG = "a tool of type McpServer needs an mcpServer block and takes no agent block"
AGENT_MSG = "a tool of type Agent needs an agent block and takes no mcpServer block"


@pytest.mark.parametrize(
    ("tool", "error"),
    [
        (NOTES, None),
        ({"mcpServer": NOTES["mcpServer"]}, None),  # type defaults to McpServer
        (_tool("files"), None),
        ({"type": "McpServer"}, MCP_MSG),
        ({"type": "McpServer", **NOTES, "agent": {"name": "files"}}, MCP_MSG),
        ({"agent": {"name": "files"}}, MCP_MSG),  # no type: an McpServer tool, which has no mcpServer block
        ({"type": "Agent"}, AGENT_MSG),
        ({"type": "Agent", "agent": {"name": "files"}, "mcpServer": NOTES["mcpServer"]}, AGENT_MSG),
    ],
)
def test_a_tool_has_exactly_the_source_its_type_says(tool: dict[str, Any], error: str | None) -> None:
    doc = _doc("orchestrator", tool)
    assert cel_errors(apply_defaults(schema_for("Agent"), copy.deepcopy(doc))) == ([f"spec.tools[0]: {error}"] if error else [])
    if error is None:
        Agent.model_validate(doc)
    else:
        with pytest.raises(ValidationError, match=error):
            Agent.model_validate(doc)


@pytest.mark.parametrize(
    ("name", "ok"),
    [("files", True), ("web_search", True), ("_x", True), ("A-b_9", True), ("a" * 64, True),
     ("a" * 65, False), ("9lives", False), ("-x", False), ("a.b", False), ("", False), ("a b", False)],
)
def test_tool_names_are_names_a_model_can_call(name: str, ok: bool) -> None:
    doc = _doc("orchestrator", _tool(name))
    assert (validate(doc) == []) is ok
    if ok:
        Agent.model_validate(doc)
    else:
        with pytest.raises(ValidationError):
            Agent.model_validate(doc)


def test_credentials_need_a_card_url_in_the_crd() -> None:
    ref = {"name": "s"}
    assert validate(_doc("o", _tool("x", cardUrl="https://x.example.com/", credentialsSecretRef=ref))) == []
    assert validate(_doc("o", _tool("x", credentialsSecretRef=ref))) == [
        "spec.tools[0].agent: credentialsSecretRef needs cardUrl: only a remote agent takes credentials; an Agent of "
        "this namespace is called with this Agent's ServiceAccount token"]
    assert validate(_doc("o", _tool("x", cardUrl="ftp://x/")))[0].startswith("spec.tools[0].agent.cardUrl: 'ftp://x/' does not")


@pytest.mark.parametrize(
    ("entry", "ok"),
    [({"agent": "orchestrator"}, True), ({"principal": "system:serviceaccount:chat:bridge"}, True),
     ({}, False), ({"agent": "a", "principal": "p"}, False)],
)
def test_a_delegator_names_an_agent_or_a_principal(entry: dict[str, str], ok: bool) -> None:
    doc = _doc("files", access={"delegators": [entry]})
    errors = cel_errors(doc)
    assert errors == ([] if ok else ["spec.access.delegators[0]: a delegator names exactly one of agent or principal"])
    if ok:
        Agent.model_validate(doc)
    else:
        with pytest.raises(ValidationError, match="a delegator names exactly one of agent or principal"):
            Agent.model_validate(doc)


@pytest.mark.parametrize(("depth", "ok"), [(1, True), (3, True), (10, True), (0, False), (11, False)])
def test_max_delegation_depth_is_1_to_10(depth: int, ok: bool) -> None:
    doc = _doc("files", access={"maxDelegationDepth": depth})
    assert (validate(doc) == []) is ok
    if ok:
        assert Agent.model_validate(doc).spec.access.max_delegation_depth == depth
    else:
        with pytest.raises(ValidationError):
            Agent.model_validate(doc)


def test_schema_defaults_match_the_model() -> None:
    doc = _doc("o", {"mcpServer": NOTES["mcpServer"]},
               _tool("x", cardUrl="https://x.example.com/", credentialsSecretRef={"name": "s"}), access={})
    defaulted = apply_defaults(schema_for("Agent"), copy.deepcopy(doc))["spec"]
    assert defaulted["tools"][0]["type"] == "McpServer"
    agent = defaulted["tools"][1]["agent"]
    assert (agent["timeout"], agent["credentialsSecretRef"]["key"]) == ("5m", "token")
    assert defaulted["access"]["maxDelegationDepth"] == 3
    model = Agent.model_validate(doc).spec
    tool = model.tools[1].agent
    assert tool is not None and tool.credentials_secret_ref is not None
    assert (model.tools[0].type, tool.timeout, tool.credentials_secret_ref.key, model.access.max_delegation_depth) == (
        "McpServer", "5m", "token", 3)


# -- the translation ------------------------------------------------------------------------------------------


def test_an_agent_of_the_namespace_becomes_a_sub_agent() -> None:
    parent = _agent("orchestrator", _tool("files", timeout="90s"))
    (sub,) = _translate(parent, _ns(parent, FILES)).sub_agents
    assert (sub.name, sub.agent, sub.card_url, sub.description, sub.token, sub.token_file, sub.timeout_seconds) == (
        "files", "team/files", "http://files.team.svc.cluster.local:8080/", "Reads and writes files.", None, None, 90.0)


def test_in_a_cluster_an_agent_of_the_namespace_is_called_with_a_token_for_agents() -> None:
    parent = _agent("orchestrator", _tool("files"), _tool("remote", cardUrl="https://r.example.com/"))
    local, remote = _translate(parent, _ns(FILES), in_cluster=True).sub_agents
    assert local.token_file == AGENT_TOKEN_FILE == "/var/run/secrets/gatehouse.dev/a2a/token"
    assert (remote.token, remote.token_file) == (None, None)  # never the ServiceAccount token to a remote agent


def test_the_childs_public_url_and_description_are_used_and_the_tool_wins() -> None:
    child = _agent("files", description="Files.", a2aConfig={"publicUrl": "https://files.example.com/"})
    (sub,) = _translate(_agent("o", _tool("files")), _ns(child)).sub_agents
    assert (sub.card_url, sub.description) == ("https://files.example.com/", "Files.")
    (sub,) = _translate(_agent("o", _tool("files", description="Use for files.")), _ns(child)).sub_agents
    assert sub.description == "Use for files."
    (sub,) = _translate(_agent("o", _tool("files")), _ns(_agent("files"))).sub_agents
    assert sub.description == "Ask the agent files to do something: send it a request in plain words and get its answer."


def test_the_card_url_is_the_formula_the_operator_announces() -> None:
    """One function for both: the parent's card_url of a child is what the child's Deployment announces."""
    from gatehouse_operator import builders

    for child in (_agent("files"), _agent("files", a2aConfig={"publicUrl": "https://f.example.com/x"})):
        (sub,) = _translate(_agent("o", _tool("files")), _ns(child)).sub_agents
        assert sub.card_url == builders.public_url(child) == agent_url("files", NS, child.spec.a2a_config.public_url)
    assert builders.CONTAINER_PORT == 8080


def test_a_remote_agent_with_credentials() -> None:
    parent = _agent("o", _tool("web_search", cardUrl="https://s.example.com/a2a", credentialsSecretRef={"name": "creds"}))
    config = _translate(parent)
    (sub,) = config.sub_agents
    token = SecretEnvRef(env="GATEHOUSE_AGENT_WEB_SEARCH_TOKEN", secret="creds", key="token")
    assert (sub.agent, sub.card_url, sub.token, sub.token_file, sub.timeout_seconds) == (
        "https://s.example.com/a2a", "https://s.example.com/a2a", token, None, 300.0)
    assert secret_env(config) == [token] and referenced_secrets(config) == {"creds"}


def test_sub_agent_tools_are_known_to_the_approval_policy() -> None:
    parent = _agent("o", _tool("files"), approval={"rules": [{"tool": "files"}], "exempt": ["files"],
                                                   "toolApprovers": [{"tool": "files", "approvers": {"users": ["a"]}}],
                                                   "editableTools": ["files"]})
    config = _translate(parent, _ns(FILES))
    assert config.approval.rules[0].tool == "files" and "files" in config.approval.tool_approvers
    assert _problems(_agent("o", approval={"rules": [{"tool": "files"}]})) == [
        "spec.approval.rules[0].tool: unknown tool 'files'; known tools: []"]


def test_delegators_resolve_agents_to_their_service_accounts_once() -> None:
    access = _translate(_agent("files", access={"maxDelegationDepth": 5, "delegators": [
        {"agent": "orchestrator"}, {"principal": "system:serviceaccount:chat:bridge"},
        {"principal": "system:serviceaccount:team:orchestrator"}, {"agent": "orchestrator"}]})).access
    assert access.delegators == ["system:serviceaccount:team:orchestrator", "system:serviceaccount:chat:bridge"]
    assert access.max_delegation_depth == 5
    assert _translate(_agent("files")).access.delegators == []


# -- each problem, with its field path ----------------------------------------------------------------------------


def test_a_tool_name_is_offered_once() -> None:
    parent = _agent("o", NOTES, _tool("files"), _tool("files", cardUrl="https://f.example.com/"), _tool("write_note"),
                    _tool("hitl_request"), _tool("human_intervention_request"), humanTools={"hitlRequest": True})
    assert _problems(parent, _ns(FILES)) == [
        "spec.tools[2].agent.name: tool 'files' is also the Agent tool spec.tools[1]",
        "spec.tools[3].agent.name: tool 'write_note' is also offered by server 'notes'",
        "spec.tools[4].agent.name: 'hitl_request' is reserved for the built-in human tool",
        "spec.tools[5].agent.name: 'human_intervention_request' is reserved for the built-in human tool",
    ]
    questions = _agent("hitl_request")
    assert _translate(_agent("o", _tool("hitl_request")), _ns(questions)).sub_agents[0].name == "hitl_request"  # not offered


def test_two_tools_may_not_share_a_token_variable() -> None:
    parent = _agent("o", _tool("web-search", cardUrl="https://a/", credentialsSecretRef={"name": "a"}),
                    _tool("web_search", cardUrl="https://b/", credentialsSecretRef={"name": "b"}))
    assert _problems(parent) == [
        "spec.tools[1].agent.credentialsSecretRef: its environment variable GATEHOUSE_AGENT_WEB_SEARCH_TOKEN is also "
        "that of spec.tools[0]; rename one of the tools"]


def test_an_agent_cannot_be_its_own_tool() -> None:
    for agents in (None, {}, _ns(_agent("o", _tool("o")))):
        assert _problems(_agent("o", _tool("o")), agents) == [
            "spec.tools[0].agent.name: names this Agent itself: an Agent cannot be its own tool"]
    assert _translate(_agent("o", _tool("o", cardUrl="https://o.example.com/"))).sub_agents[0].name == "o"  # remote: a name


def test_an_agent_of_the_namespace_must_exist_when_the_namespace_is_known() -> None:
    parent = _agent("o", _tool("ghost"))
    assert _problems(parent, _ns(FILES)) == ["spec.tools[0].agent.name: Agent 'ghost' not found in namespace 'team'"]
    assert _translate(parent).sub_agents[0].card_url == "http://ghost.team.svc.cluster.local:8080/"  # unknown: as given


def test_credentials_only_for_a_remote_agent() -> None:
    assert _problems(_agent("o", _tool("files", credentialsSecretRef={"name": "s"})), _ns(FILES)) == [
        "spec.tools[0].agent.credentialsSecretRef: only a remote agent (cardUrl) takes credentials: an Agent of this "
        "namespace is called with this Agent's ServiceAccount token"]


@pytest.mark.parametrize("url", ["ftp://x.example.com/", "x.example.com", "/relative", "https://", "https://a b/"])
def test_a_card_url_is_an_absolute_http_url(url: str) -> None:
    assert _problems(_agent("o", _tool("x", cardUrl=url))) == [
        f"spec.tools[0].agent.cardUrl: must be an absolute http:// or https:// URL, got {url!r}"]


def test_a_timeout_is_a_duration() -> None:
    assert _problems(_agent("o", _tool("x", cardUrl="https://x/", timeout="0s"))) == [
        "spec.tools[0].agent.timeout: invalid duration '0s': must be greater than zero"]


def test_a_cycle_is_refused_naming_every_agent_on_it() -> None:
    a, b, c = _agent("a", _tool("b")), _agent("b", _tool("c")), _agent("c", _tool("a"))
    ns = _ns(a, b, c)
    assert _problems(a, ns) == [
        "spec.tools[0].agent.name: the Agent tools form a cycle: a → b → c → a; a request would go round it for ever"]
    assert _problems(b, ns) == [
        "spec.tools[0].agent.name: the Agent tools form a cycle: b → c → a → b; a request would go round it for ever"]
    top = _agent("top", _tool("b"))
    assert _problems(top, {**ns, "top": top}) == [
        "spec.tools[0].agent.name: the Agent tools lead into a cycle: top → b → c → a → b; a request would go round it "
        "for ever"]


def test_the_agent_as_given_wins_over_its_entry_in_the_namespace() -> None:
    """The operator's cache may still hold the Agent's previous spec: the tools checked are those being translated."""
    b = _agent("b", _tool("a"))
    stale, fresh = _agent("a", _tool("b")), _agent("a", NOTES, _tool("c"))
    assert _problems(stale, _ns(stale, b)) != []  # a → b → a
    (sub,) = _translate(fresh, _ns(stale, b, _agent("c"))).sub_agents
    assert sub.name == "c"


def test_a_chain_longer_than_max_delegation_depth_is_refused_by_name() -> None:
    c = _agent("c", _tool("far", cardUrl="https://far.example.com/"))
    b, a = _agent("b", _tool("c")), _agent("a", _tool("b"), access={"maxDelegationDepth": 3})
    ns = _ns(a, b, c)
    assert len(_translate(a, ns).sub_agents) == 1  # a → b → c → far: 3, within 3
    shallow = _agent("a", _tool("b"), access={"maxDelegationDepth": 2})
    assert _problems(shallow, ns) == [
        "spec.tools[0].agent.name: the chain of Agent tools a → b → c → https://far.example.com/ is 3 agents deep, "
        "more than spec.access.maxDelegationDepth (2)"]
    assert _translate(_agent("a", _tool("b"), access={"maxDelegationDepth": 1})).sub_agents  # unknown namespace: 1 hop


def test_an_agent_that_refuses_service_account_tokens_cannot_be_called_from_the_cluster() -> None:
    closed = _agent("files", access={"kubernetesTokens": False})
    parent = _agent("o", _tool("files"))
    assert _problems(parent, _ns(closed), in_cluster=True) == [
        "spec.tools[0].agent.name: Agent 'files' does not accept Kubernetes ServiceAccount tokens (its "
        "spec.access.kubernetesTokens is false), so this Agent could not authenticate to it"]
    assert _translate(parent, _ns(closed)).sub_agents  # outside a cluster no ServiceAccount token is presented


# -- properties: the graph checks against an independent computation ----------------------------------------------

NAMES = ["a0", "a1", "a2", "a3", "a4", "a5"]
graphs = st.fixed_dictionaries({n: st.lists(st.sampled_from(NAMES), unique=True, max_size=3) for n in NAMES})


def _reach(graph: dict[str, list[str]]) -> dict[str, set[str]]:
    """Every node reachable in one step or more (transitive closure by repeated union)."""
    reach = {n: set(edges) for n, edges in graph.items()}
    changed = True
    while changed:
        changed = False
        for n in reach:
            more = set().union(*(reach[m] for m in reach[n])) - reach[n]
            if more:
                reach[n] |= more
                changed = True
    return reach


def _namespace(graph: dict[str, list[str]], depth: int = 10) -> dict[str, Agent]:
    return {n: _agent(n, *(_tool(m) for m in edges), access={"maxDelegationDepth": depth}) for n, edges in graph.items()}


@settings(max_examples=300, deadline=None)
@given(graphs)
def test_an_agent_is_refused_exactly_when_a_cycle_is_reachable_through_its_tools(graph: dict[str, list[str]]) -> None:
    reach = _reach(graph)
    agents = _namespace(graph)
    refused = set()
    for name, agent in agents.items():
        cyclic = any(m in reach[m] for m in {name} | reach[name])
        try:
            _translate(agent, agents)
        except TranslationError as exc:
            refused.add(name)
            assert cyclic, exc.problems
            assert all("cycle" in p.message or "names this Agent itself" in p.message for p in exc.problems)
        else:
            assert not cyclic
    assert bool(refused) == any(n in reach[n] for n in graph)  # a graph is refused somewhere exactly when it has a cycle


dags = st.fixed_dictionaries({n: st.lists(st.sampled_from(NAMES[i + 1:]), unique=True, max_size=3)
                              for i, n in enumerate(NAMES[:-1])}).map(lambda g: {**g, "a5": []})


def _longest(graph: dict[str, list[str]], node: str) -> int:
    return max((1 + _longest(graph, m) for m in graph[node]), default=0)


@settings(max_examples=200, deadline=None)
@given(dags, st.integers(min_value=1, max_value=5))
def test_an_acyclic_agent_is_refused_exactly_when_its_longest_chain_is_too_deep(graph: dict[str, list[str]], depth: int) -> None:
    agents = _namespace(graph, depth)
    for name, agent in agents.items():
        too_deep = _longest(graph, name) > depth
        try:
            _translate(agent, agents)
        except TranslationError as exc:
            assert too_deep, exc.problems
            assert all("agents deep, more than spec.access.maxDelegationDepth" in p.message for p in exc.problems)
        else:
            assert not too_deep


def test_the_two_agent_example_in_the_docs_is_valid_and_translates() -> None:
    """docs/operator.md's orchestrator/files example passes the CRD (schema and CEL) and translates as it says."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "operator.md").read_text()
    (block,) = [b for b in re.findall(r"```yaml\n(.*?)```", text, re.S) if "name: orchestrator, namespace: team" in b]
    docs = [d for d in yaml.safe_load_all(block) if d]
    assert [validate(d) for d in docs] == [[], []]
    agents = {a.name: a for a in (Agent.model_validate(d) for d in docs)}
    models = {"my-model": MODELS["m"]}
    servers = {"file-tools": SERVERS["notes"]}
    config = translate(agents["orchestrator"], models, servers, in_cluster=True, agents=agents)
    files, search = config.sub_agents
    assert (files.agent, files.card_url, files.token_file) == (
        "team/files", "http://files.team.svc.cluster.local:8080/", AGENT_TOKEN_FILE)
    assert search.token == SecretEnvRef(env="GATEHOUSE_AGENT_WEB_SEARCH_TOKEN", secret="search-credentials", key="token")
    child = translate(agents["files"], models, servers, in_cluster=True, agents=agents)
    assert child.access.delegators == ["system:serviceaccount:team:orchestrator"]


def test_the_two_runtimes_recipe_in_the_docs_is_valid_and_names_the_token_variable(tmp_path: Path) -> None:
    """docs/operator.md's "Two runtimes on one machine": the orchestrator's manifests pass the CRDs and translate to a
    remote agent at the card URL whose token is read from GATEHOUSE_AGENT_FILES_TOKEN; the example file manager with
    the access lines added trusts the orchestrator as a delegator."""
    from agent_runtime.contract.manifests import select_agent_config

    root = Path(__file__).resolve().parents[2]
    text = (root / "docs" / "operator.md").read_text()
    recipe = text[text.index("#### Two runtimes on one machine"):text.index("## Manifests")]
    access, parent = re.findall(r"```yaml\n(.*?)```", recipe, re.S)
    docs = [d for d in yaml.safe_load_all(parent) if d]
    assert [validate(d) for d in docs] == [[], []]
    (tmp_path / "orchestrator.yaml").write_text(parent)
    (sub,) = select_agent_config([tmp_path / "orchestrator.yaml"]).sub_agents
    assert (sub.name, sub.card_url) == ("files", "http://127.0.0.1:8081/")
    assert sub.token == SecretEnvRef(env="GATEHOUSE_AGENT_FILES_TOKEN", secret="files-credentials", key="token")
    assert env_name("AGENT", "web-search.v2", "TOKEN") == "GATEHOUSE_AGENT_WEB_SEARCH_V2_TOKEN"  # as the docs say
    example = root / "examples" / "file-manager"
    (tmp_path / "files.yaml").write_text((example / "agent.yaml").read_text().rstrip("\n") + "\n" + access)
    child = select_agent_config([tmp_path / "files.yaml", example / "modelconfig.yaml", example / "local" / "mcp-server.yaml"])
    assert child.access.delegators == ["orchestrator"]


def test_an_mcp_tool_may_not_take_the_name_of_the_built_in_human_tool() -> None:
    """The same reservation for MCP tools (translator._servers), while humanTools.hitlRequest is on."""
    clash = {"type": "McpServer", "mcpServer": {"name": "notes", "toolNames": ["write_note", "hitl_request"]}}
    assert _problems(_agent("o", clash, humanTools={"hitlRequest": True})) == [
        "spec.tools[0].mcpServer.toolNames[1]: 'hitl_request' is reserved for the built-in human tool",
    ]
    assert _translate(_agent("o", clash)).mcp_servers[0].tool_names == ["write_note", "hitl_request"]  # off: a plain name
