"""Who decides and who may call: ``spec.approval`` approvers/toolApprovers/grantTTL and ``spec.access``, from the
CRD (schema, CEL rules, descriptions) through the pydantic model to the AgentConfig. The golden cases
(tests/testdata/translator/approvers-and-access, bad-approvers, bad-access) pin whole translations; these pin
the rules one by one."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from agent_runtime.contract.errors import TranslationError
from agent_runtime.contract.resources import Agent, ModelConfig, RemoteMCPServer
from agent_runtime.contract.translator import ACCESS_DIR, JWKS_FILE, TOKEN_FILE, access_files, translate
from tests.support.crd_validation import cel_errors, schema_for, validate

MODELS = {"m": ModelConfig.model_validate({"kind": "ModelConfig", "metadata": {"name": "m"},
                                           "spec": {"provider": "Scripted", "model": "s"}})}
SERVERS = {"files": RemoteMCPServer.model_validate({"kind": "RemoteMCPServer", "metadata": {"name": "files"},
                                                   "spec": {"url": "http://files/mcp"}})}
TOOLS = [{"type": "McpServer", "mcpServer": {"name": "files", "toolNames": ["read_file", "delete_file"]}}]


def _doc(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "gatehouse.dev/v1alpha1", "kind": "Agent", "metadata": {"name": "a", "namespace": "ns"},
            "spec": {"modelConfig": "m", **spec}}


def _translate(in_cluster: bool = False, **spec: Any) -> Any:
    agent = Agent.model_validate(_doc(**spec))
    return translate(agent, MODELS, SERVERS, in_cluster=in_cluster)


def _problems(**spec: Any) -> list[str]:
    with pytest.raises(TranslationError) as exc:
        _translate(**spec)
    return [str(p) for p in exc.value.problems]


# -- the CRD and the model describe every field alike ----------------------------------------------------------


def _inner_model(annotation: Any) -> type[BaseModel] | None:
    for candidate in [annotation, *getattr(annotation, "__args__", ())]:
        for inner in [candidate, *getattr(candidate, "__args__", ())]:
            if isinstance(inner, type) and issubclass(inner, BaseModel):
                return inner
    return None


def _descriptions(schema: dict[str, Any], model: type[BaseModel], path: str, out: dict[str, tuple[Any, Any]]) -> None:
    for name, field in model.model_fields.items():
        alias = field.alias or name
        sub = schema.get("properties", {}).get(alias, {})
        out[f"{path}.{alias}"] = (sub.get("description"), field.description)
        items = sub.get("items", {}) if sub.get("type") == "array" else sub
        inner = _inner_model(field.annotation)
        if inner is not None and "properties" in items:
            _descriptions(items, inner, f"{path}.{alias}", out)


def test_every_agent_field_has_the_same_description_in_the_crd_and_the_model() -> None:
    found: dict[str, tuple[Any, Any]] = {}
    _descriptions(schema_for("Agent")["properties"]["spec"], Agent.model_fields["spec"].annotation, "spec", found)
    assert {"spec.access.jwt.jwksSecretRef.key", "spec.approval.toolApprovers.approvers.allowRequester",
            "spec.approval.rules.approvers.required", "spec.approval.grantTTL"} <= set(found)  # the walk goes deep
    missing = [path for path, (crd, model) in found.items() if not crd or not model]
    assert missing == []
    differ = {path: pair for path, pair in found.items() if pair[0] != pair[1]}
    assert differ == {}


# -- defaults: an Agent written before these fields translates as before, plus the defaults -----------------------


def test_an_agent_without_the_new_fields_gets_their_defaults() -> None:
    config = _translate(tools=TOOLS)
    assert config.approval.approvers is None and config.approval.tool_approvers == {}
    assert config.approval.grant_ttl_seconds == 3600.0
    access = config.access
    assert (access.token_file, access.jwt, access.kubernetes_tokens, access.identities, access.unowned_tasks_owner) == (
        None, None, True, [], None)
    assert validate(_doc(tools=TOOLS)) == []


def test_in_a_cluster_the_token_file_is_always_mounted() -> None:
    assert _translate(in_cluster=True).access.token_file == TOKEN_FILE
    assert _translate(access={"tokenSecretRef": {"name": "t"}}).access.token_file == TOKEN_FILE
    assert TOKEN_FILE.startswith(ACCESS_DIR + "/") and JWKS_FILE.startswith(ACCESS_DIR + "/")


def test_access_files_name_the_secret_keys_behind_each_file() -> None:
    generated = access_files(Agent.model_validate(_doc()))
    assert [(f.secret, f.key, f.path, f.file_name) for f in generated] == [("a-access", "tokens", TOKEN_FILE, "tokens")]
    named = access_files(Agent.model_validate(_doc(access={
        "tokenSecretRef": {"name": "t", "key": "k"},
        "jwt": {"issuer": "i", "audience": "a", "jwksSecretRef": {"name": "j"}}})))
    assert [(f.secret, f.key, f.file_name, f.field) for f in named] == [
        ("t", "k", "tokens", "spec.access.tokenSecretRef"),
        ("j", "jwks.json", "jwks.json", "spec.access.jwt.jwksSecretRef"),
    ]


def test_jwt_defaults() -> None:
    jwt = _translate(access={"jwt": {"issuer": "https://i", "audience": "a", "jwksSecretRef": {"name": "j"}}}).access.jwt
    assert (jwt.jwks_file, jwt.issuer, jwt.audience, jwt.principal_claim, jwt.groups_claim) == (
        JWKS_FILE, "https://i", "a", None, "groups")


# -- the rules, each refused with its field path and why --------------------------------------------------------


def test_an_approvers_block_must_name_somebody() -> None:
    assert _problems(approval={"approvers": {"required": 1}}) == [
        "spec.approval.approvers: lists neither users nor groups: nobody could approve; name at least one user or group, "
        "or set anyAuthenticated: true"]


def test_required_cannot_exceed_the_users_when_there_are_no_groups() -> None:
    (problem,) = _problems(tools=TOOLS, approval={"toolApprovers": [
        {"tool": "delete_file", "approvers": {"users": ["alice", "bob", "alice"], "required": 3}}]})
    assert problem.startswith("spec.approval.toolApprovers[0].approvers.required: 3 approvals are required but only 2 user(s)")
    assert "no call could ever be approved" in problem
    ok = _translate(tools=TOOLS, approval={"toolApprovers": [
        {"tool": "delete_file", "approvers": {"users": ["alice"], "groups": ["ops"], "required": 3}}]})
    assert ok.approval.tool_approvers["delete_file"].required == 3  # groups may hold more people


def test_approvers_on_a_rule_need_action_require() -> None:
    rule = {"tool": "read_file", "action": "deny", "approvers": {"users": ["alice"]}}
    assert _problems(tools=TOOLS, approval={"rules": [rule]}) == [
        "spec.approval.rules[0].approvers: approvers apply only to action require; this rule's action 'deny' never "
        "waits for a decision"]
    rule["action"] = "require"
    assert _translate(tools=TOOLS, approval={"rules": [rule]}).approval.rules[0].approvers.users == ["alice"]


def test_a_tool_gets_one_approvers_block() -> None:
    entry = {"tool": "delete_file", "approvers": {"users": ["alice"]}}
    assert _problems(tools=TOOLS, approval={"toolApprovers": [entry, entry]}) == [
        "spec.approval.toolApprovers[1].tool: tool 'delete_file' is already named in spec.approval.toolApprovers[0]; "
        "give each tool one approvers block"]


def test_grant_ttl_is_a_duration() -> None:
    assert _translate(approval={"grantTTL": "1h30m"}).approval.grant_ttl_seconds == 5400.0
    assert _problems(approval={"grantTTL": "0s"}) == ["spec.approval.grantTTL: invalid duration '0s': must be greater than zero"]


def test_an_alias_resolves_to_one_principal() -> None:
    identities = [{"principal": "alice", "aliases": ["al"]}, {"principal": "bob", "aliases": ["al"]}]
    assert _problems(access={"identities": identities}) == [
        "spec.access.identities[1].aliases[0]: alias 'al' is also given to principal 'alice' "
        "(spec.access.identities[0].aliases[0]): a name must resolve to one principal"]
    same_twice = [{"principal": "alice", "aliases": ["al", "al", "alice"]}]
    assert _translate(access={"identities": same_twice}).access.identities[0].aliases == ["al", "alice"]


def test_the_model_refuses_what_the_schema_refuses() -> None:
    with pytest.raises(ValidationError):
        Agent.model_validate(_doc(approval={"approvers": {"users": ["a"], "required": 0}}))
    with pytest.raises(ValidationError):
        Agent.model_validate(_doc(access={"jwt": {"issuer": "i", "audience": "a"}}))  # no jwksSecretRef
    with pytest.raises(ValidationError):
        Agent.model_validate(_doc(access={"tokenSecretRef": {"name": "t"}, "tokens": "x"}))  # unknown field


# -- the CRD's CEL rules: the API server refuses the same before the operator ever sees it -------------------------


NOBODY = "approvers need at least one user or group, or anyAuthenticated: true: with none, nobody could approve"
TOO_FEW = ("required is more than the number of users listed, and no groups are listed: no call could ever get enough "
           "approvals")


@pytest.mark.parametrize(
    ("approvers", "errors"),
    [({"users": ["a"]}, []), ({"groups": ["g"], "required": 5}, []), ({"users": ["a", "b"], "required": 2}, []),
     ({}, [NOBODY]), ({"users": [], "groups": []}, [NOBODY]), ({"users": ["a"], "required": 2}, [TOO_FEW])],
)
def test_cel_approvers_blocks(approvers: dict[str, Any], errors: list[str]) -> None:
    for path, spec in (
        ("spec.approval.approvers", {"approval": {"approvers": approvers}}),
        ("spec.approval.rules[0].approvers", {"approval": {"rules": [{"tool": "t", "approvers": approvers}]}}),
        ("spec.approval.toolApprovers[0].approvers", {"approval": {"toolApprovers": [{"tool": "t", "approvers": approvers}]}}),
    ):
        assert cel_errors(_defaulted(_doc(**spec))) == [f"{path}: {e}" for e in errors]


def _defaulted(doc: dict[str, Any]) -> dict[str, Any]:
    from tests.support.crd_validation import apply_defaults

    return apply_defaults(schema_for("Agent"), copy.deepcopy(doc))  # type: ignore[no-any-return]


def test_cel_rule_approvers_need_require_and_a_tool_is_named_once() -> None:
    rule = {"tool": "t", "action": "allow", "approvers": {"users": ["a"]}}
    assert cel_errors(_defaulted(_doc(approval={"rules": [rule]}))) == [
        "spec.approval.rules[0]: approvers apply only to a rule with action require: an allow or deny rule never waits "
        "for a decision"]
    entry = {"tool": "t", "approvers": {"users": ["a"]}}
    assert cel_errors(_doc(approval={"toolApprovers": [entry, {**entry, "tool": "u"}]})) == []
    assert cel_errors(_doc(approval={"toolApprovers": [entry, entry]})) == [
        "spec.approval.toolApprovers: a tool is named more than once in toolApprovers"]


def test_schema_defaults_match_the_model() -> None:
    doc = _defaulted(_doc(approval={"approvers": {"users": ["a"]}},
                          access={"tokenSecretRef": {"name": "t"},
                                  "jwt": {"issuer": "i", "audience": "a", "jwksSecretRef": {"name": "j"}}}))
    spec = doc["spec"]
    assert spec["approval"]["grantTTL"] == "1h"
    assert spec["approval"]["approvers"] == {"users": ["a"], "required": 1, "allowRequester": True, "anyAuthenticated": False}
    assert spec["access"]["tokenSecretRef"]["key"] == "tokens" and spec["access"]["kubernetesTokens"] is True
    assert spec["access"]["jwt"]["jwksSecretRef"]["key"] == "jwks.json" and spec["access"]["jwt"]["groupsClaim"] == "groups"
    model = Agent.model_validate(_doc(approval={"approvers": {"users": ["a"]}},
                                      access={"tokenSecretRef": {"name": "t"},
                                              "jwt": {"issuer": "i", "audience": "a", "jwksSecretRef": {"name": "j"}}}))
    dumped = model.model_dump(by_alias=True, exclude_none=True)["spec"]
    assert dumped["access"] == {**spec["access"], "identities": [], "delegators": []}
    assert dumped["approval"]["approvers"] == {**spec["approval"]["approvers"], "groups": []}
