"""The CRDs in crds/: structural, consistent with the pydantic models, and their CEL rules do what they say."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from agent_runtime.contract.resources import Agent, MCPGateway, ModelConfig, RemoteMCPServer, ToolApproval
from tests.support.crd_validation import cel_errors, load_crds, schema_for, validate

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
MODELS: dict[str, type[BaseModel]] = {
    "Agent": Agent,
    "MCPGateway": MCPGateway,
    "ModelConfig": ModelConfig,
    "RemoteMCPServer": RemoteMCPServer,
    "ToolApproval": ToolApproval,
}


def _example_docs() -> list[dict[str, Any]]:
    """The examples' Gatehouse objects (an example also ships plain Kubernetes objects, e.g. its tools server)."""
    docs = []
    for path in sorted(EXAMPLES.rglob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d and d["kind"] in MODELS]
    return docs


def test_all_five_crds_exist_with_status_and_printer_columns() -> None:
    crds = load_crds()
    assert set(crds) == set(MODELS)
    for kind, crd in crds.items():
        assert crd["spec"]["group"] == "gatehouse.dev"
        (version,) = crd["spec"]["versions"]
        assert version["name"] == "v1alpha1"
        assert version["subresources"] == {"status": {}}, kind
        assert version["additionalPrinterColumns"], kind
    columns = [c["name"].upper() for c in crds["ToolApproval"]["spec"]["versions"][0]["additionalPrinterColumns"]]
    assert columns == ["AGENT", "TOOL", "SUMMARY", "REQUESTED BY", "PHASE", "APPROVALS", "EXPIRES", "EXECUTION", "AGE",
                       "KIND", "DECIDED BY", "SOURCE", "WAITING FOR", "TASK", "GATEWAY"]
    wide = [c["name"].upper() for c in crds["ToolApproval"]["spec"]["versions"][0]["additionalPrinterColumns"]
            if c.get("priority", 0) > 0]  # only under -o wide
    assert wide == ["KIND", "DECIDED BY", "SOURCE", "WAITING FOR", "TASK", "GATEWAY"]


def _structural(schema: dict[str, Any], path: str) -> None:
    """Every node has a type (or preserves unknown fields), as the API server demands of a structural schema."""
    assert "type" in schema or schema.get("x-kubernetes-preserve-unknown-fields"), path
    for name, sub in schema.get("properties", {}).items():
        _structural(sub, f"{path}.{name}")
    if "items" in schema:
        _structural(schema["items"], f"{path}[]")
    for banned in ("$ref", "anyOf", "oneOf", "allOf"):
        assert banned not in schema, f"{path} uses {banned}"


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_schemas_are_structural(kind: str) -> None:
    _structural(schema_for(kind), kind)


def _schema_fields(schema: dict[str, Any]) -> set[str]:
    return set(schema.get("properties", {}))


def _model_fields(model: type[BaseModel]) -> set[str]:
    return {f.alias or name for name, f in model.model_fields.items()}


def _pairs(schema: dict[str, Any], model: type[BaseModel], path: str) -> list[tuple[str, set[str], set[str]]]:
    """Walk schema and model together; collect (path, schema fields, model fields) for every object."""
    out = [(path, _schema_fields(schema), _model_fields(model))]
    for name, field in model.model_fields.items():
        sub = schema.get("properties", {}).get(field.alias or name)
        if sub is None:
            continue
        if sub.get("type") == "array":
            sub = sub["items"]
        inner = _nested_model(field.annotation)
        if inner is not None and "properties" in sub:
            out += _pairs(sub, inner, f"{path}.{field.alias or name}")
    return out


def _nested_model(annotation: Any) -> type[BaseModel] | None:
    candidates = [annotation, *getattr(annotation, "__args__", ())]
    for c in candidates:
        for inner in [c, *getattr(c, "__args__", ())]:
            if isinstance(inner, type) and issubclass(inner, BaseModel):
                return inner
    return None


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_crd_spec_and_pydantic_model_declare_the_same_fields(kind: str) -> None:
    spec_schema = schema_for(kind)["properties"]["spec"]
    spec_model = MODELS[kind].model_fields["spec"].annotation
    for path, in_schema, in_model in _pairs(spec_schema, spec_model, "spec"):
        assert in_schema == in_model, f"{kind} {path}: only in CRD {in_schema - in_model}, only in model {in_model - in_schema}"


def test_examples_pass_schema_and_cel_and_parse() -> None:
    docs = _example_docs()
    assert {d["kind"] for d in docs} >= {"Agent", "ModelConfig", "RemoteMCPServer"}
    for doc in docs:
        assert validate(doc) == [], doc["metadata"]["name"]
        MODELS[doc["kind"]].model_validate(doc)


def _agent(**mcp: Any) -> dict[str, Any]:
    server = {"name": "files", "toolNames": ["read_file", "delete_file"], **mcp}
    return {
        "apiVersion": "gatehouse.dev/v1alpha1",
        "kind": "Agent",
        "metadata": {"name": "a"},
        "spec": {"modelConfig": "m", "tools": [{"type": "McpServer", "mcpServer": server}]},
    }


REQUIRE_MSG = "every requireApproval entry must also be listed in toolNames of the same mcpServer"


@pytest.mark.parametrize(
    ("require", "ok"),
    [(None, True), ([], True), (["delete_file"], True), (["delete_file", "read_file"], True),
     (["delete_files"], False), (["delete_file", "rm"], False)],
)
def test_cel_require_approval_subset_of_tool_names(require: list[str] | None, ok: bool) -> None:
    obj = _agent() if require is None else _agent(requireApproval=require)
    errors = cel_errors(obj)
    assert (errors == []) is ok
    if not ok:
        assert errors == [f"spec.tools[0].mcpServer: {REQUIRE_MSG}"]


def test_cel_verdicts_are_the_same_when_remembered() -> None:
    """The emulated API server remembers each rule's verdict per value: a repeated or moved value gets the
    same answer, at its own path, every time."""
    bad, good = _agent(requireApproval=["rm"]), _agent(requireApproval=["delete_file"])
    for _ in range(3):
        assert cel_errors(bad) == [f"spec.tools[0].mcpServer: {REQUIRE_MSG}"]
        assert cel_errors(good) == []
    two = _agent(requireApproval=["delete_file"])
    two["spec"]["tools"].append(copy.deepcopy(bad["spec"]["tools"][0]))
    assert cel_errors(two) == [f"spec.tools[1].mcpServer: {REQUIRE_MSG}"]


@pytest.mark.parametrize(
    ("when", "ok"),
    [({"arg": "path", "glob": "**/.env*"}, True), ({"arg": "path", "regex": "^/etc"}, True),
     ({"arg": "path"}, False), ({"arg": "path", "glob": "*", "regex": ".*"}, False)],
)
def test_cel_rule_needs_exactly_one_matcher(when: dict[str, str], ok: bool) -> None:
    obj = _agent()
    obj["spec"]["approval"] = {"rules": [{"tool": "read_file", "when": when}]}
    assert (cel_errors(obj) == []) is ok


@pytest.mark.parametrize(
    ("spec", "ok"),
    [({"provider": "Scripted", "model": "s", "scripted": {"rules": []}}, True),
     ({"provider": "OpenAI", "model": "gpt", "apiKeySecret": "k", "apiKeySecretKey": "key"}, True),
     ({"provider": "OpenAI", "model": "gpt", "apiKeySecret": "k"}, False),
     ({"provider": "OpenAI", "model": "gpt", "scripted": {"rules": []}}, False)],
)
def test_cel_model_config(spec: dict[str, Any], ok: bool) -> None:
    obj = {"apiVersion": "gatehouse.dev/v1alpha1", "kind": "ModelConfig", "metadata": {"name": "m"}, "spec": spec}
    assert (cel_errors(obj) == []) is ok


def test_schema_rejects_bad_values() -> None:
    obj = _agent()
    obj["spec"]["approval"] = {"timeout": "forever", "onTimeout": "maybe"}
    obj["spec"]["tools"][0]["type"] = "Http"
    errors = validate(obj)
    assert any("spec.approval.timeout" in e for e in errors)
    assert any("spec.approval.onTimeout" in e for e in errors)
    assert any("spec.tools[0].type" in e for e in errors)


def test_defaults_are_applied_like_the_api_server() -> None:
    obj = _agent()
    from tests.support.crd_validation import apply_defaults

    defaulted = apply_defaults(schema_for("Agent"), copy.deepcopy(obj))
    assert defaulted["spec"]["tools"][0]["mcpServer"]["kind"] == "RemoteMCPServer"


# -- spec.state and replicas (issue 14) -------------------------------------------------------------------------

REPLICAS_MSG = "more than one replica needs spec.state.postgres"
POSTGRES = {"postgres": {"urlSecretRef": {"name": "db"}}}


def _stateful(state: dict[str, Any] | None = None, replicas: int | None = None, **spec: Any) -> dict[str, Any]:
    obj = _agent()
    if state is not None:
        obj["spec"]["state"] = state
    if replicas is not None:
        obj["spec"]["deployment"] = {"replicas": replicas}
    obj["spec"].update(spec)
    return obj


@pytest.mark.parametrize(
    ("state", "ok"),
    [(None, True), ({}, True), ({"sqlite": {}}, True), ({"sqlite": {"size": "5Gi", "storageClassName": "fast"}}, True),
     (POSTGRES, True), ({"ephemeral": True}, True), ({"sqlite": {}, "ephemeral": False}, True),
     ({"sqlite": {}, **POSTGRES}, False), ({"sqlite": {}, "ephemeral": True}, False), ({**POSTGRES, "ephemeral": True}, False)],
)
def test_one_kind_of_state_at_most(state: dict[str, Any] | None, ok: bool) -> None:
    errors = validate(_stateful(state))
    assert (errors == []) is ok, errors
    if not ok:
        assert errors == ["spec.state: choose one kind of state: sqlite, postgres or ephemeral"]
    if ok:
        Agent.model_validate(_stateful(state))


def test_state_values_are_checked() -> None:
    errors = validate(_stateful({"sqlite": {"size": "lots"}, "postgres": {"urlSecretRef": {}}}))
    assert any(e.startswith("spec.state.sqlite.size") for e in errors), errors
    assert any("spec.state.postgres.urlSecretRef" in e and "'name' is a required property" in e for e in errors), errors


def test_an_agent_written_before_spec_state_still_validates_and_gets_no_state() -> None:
    from tests.support.crd_validation import apply_defaults

    old = _agent()
    assert validate(old) == []
    assert "state" not in apply_defaults(schema_for("Agent"), copy.deepcopy(old))["spec"]  # the operator defaults it
    assert Agent.model_validate(old).spec.state.kind == "sqlite"


@pytest.mark.parametrize(
    ("replicas", "state", "ok"),
    [(None, None, True), (0, None, True), (1, None, True), (2, None, False), (3, {"sqlite": {}}, False),
     (2, {"ephemeral": True}, False), (2, POSTGRES, True), (10, POSTGRES, True)],
)
def test_more_than_one_replica_needs_postgres(replicas: int | None, state: dict[str, Any] | None, ok: bool) -> None:
    errors = validate(_stateful(state, replicas))
    assert (errors == []) is ok, errors
    if not ok:
        (error,) = errors
        assert error.startswith(f"spec.deployment.replicas: {REPLICAS_MSG}: sqlite state lives on one pod's volume")


LEGACY = _stateful(None, 3)  # stored before spec.state existed, with three replicas


@pytest.mark.parametrize(
    ("change", "ok"),
    [
        ({}, True),  # kopf's finalizer and annotations: the spec is the same
        ({"systemMessage": "edited"}, True),  # edits that leave replicas and state alone
        ({"deployment": {"replicas": 1}}, True),
        ({"deployment": {"replicas": 0}}, True),
        ({"state": POSTGRES}, True),
        ({"deployment": {"replicas": 2}}, False),  # still more than one, now chosen anew
        ({"deployment": {"replicas": 4}}, False),
        ({"state": {"sqlite": {}}}, False),
        ({"state": {"ephemeral": True}}, False),
    ],
)
def test_an_agent_that_already_has_more_replicas_keeps_them_until_replicas_or_state_change(
    change: dict[str, Any], ok: bool
) -> None:
    """The rule is a transition rule (optionalOldSelf): on an update it refuses only a change that chooses more than
    one replica without Postgres, so an Agent stored before the rule keeps running and can still be edited."""
    assert validate(LEGACY) != []  # as a new object it is refused
    new = copy.deepcopy(LEGACY)
    new["metadata"]["finalizers"] = ["gatehouse.dev/finalizer"]
    new["spec"].update(change)
    errors = validate(new, old=LEGACY)
    assert (errors == []) is ok, errors


def test_transition_verdicts_are_not_shared_between_old_values() -> None:
    grown = _stateful(None, 3)
    assert validate(grown, old=LEGACY) == []
    assert validate(grown, old=_stateful(None, 1)) != []  # 1 -> 3: refused
    assert validate(grown, old=LEGACY) == []


@pytest.mark.parametrize(
    ("url", "ok"),
    [("https://agent.example.com/", True), ("http://a.ns.svc.cluster.local:8080/", True), ("https://x.io/a2a?v=1", True),
     ("agent.example.com", False), ("/relative", False), ("ftp://x/", False), ("https://", False), ("https://a b/", False)],
)
def test_public_url_must_be_an_absolute_http_url(url: str, ok: bool) -> None:
    obj = _stateful(a2aConfig={"publicUrl": url})
    assert (validate(obj) == []) is ok
    if ok:
        assert Agent.model_validate(obj).spec.a2a_config.public_url == url
    else:
        with pytest.raises(ValueError):
            Agent.model_validate(obj)


@pytest.mark.parametrize(("channel", "ok"), [
    ("C0123ABCD", True), ("G01ABCDEF2", True), ("#ops-approvals", True), ("#sre.oncall_2", True),
    ("ops-approvals", False), ("#Ops", False), ("#ops approvals", False), ("", False), ("C01", False),
])
def test_the_slack_channel_is_an_id_or_a_hash_name(channel: str, ok: bool) -> None:
    agent = _agent()
    agent["spec"]["approval"] = {"notify": {"slack": {"channel": channel}}}
    assert (validate(agent) == []) is ok
    if ok:
        assert Agent.model_validate(agent).spec.approval.notify.slack.channel == channel  # type: ignore[union-attr]
    else:
        with pytest.raises(ValueError):
            Agent.model_validate(agent)


def test_notify_is_read_by_the_bridge_not_put_into_the_runtimes_config(tmp_path: Path) -> None:
    from agent_runtime.contract.manifests import select_agent_config

    files = []
    for name in ("agent.yaml", "modelconfig.yaml", "mcp-server.yaml"):
        doc = yaml.safe_load((EXAMPLES / "file-manager" / name).read_text())
        if doc["kind"] == "Agent":
            doc["spec"]["approval"]["notify"] = {"slack": {"channel": "#ops-approvals"}}
        (tmp_path / name).write_text(yaml.safe_dump(doc))
        files.append(tmp_path / name)
    plain = select_agent_config([EXAMPLES / "file-manager" / n for n in ("agent.yaml", "modelconfig.yaml", "mcp-server.yaml")])
    assert select_agent_config(files) == plain  # the translator accepts it; the runtime's config does not change
