"""Golden files of the children an MCPGateway owns: tests/testdata/operator-gateway/<case>/{input.yaml,expected.json}.

The same builders as an Agent's (:func:`gatehouse_operator.builders.desired_children`); ``files-gate`` is the example
in examples/gateway/ in front of the demo tools' RemoteMCPServer, ``hooks-only`` a gateway with no upstream. Regenerate
with ``--update-golden`` and review the diff.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from agent_runtime.contract.agent_config import GatewayConfig
from agent_runtime.contract.manifests import load_manifests
from agent_runtime.contract.translator import translate_gateway
from gatehouse_operator import builders
from gatehouse_operator.settings import DEFAULT_RUNTIME_IMAGE
from tests.support.golden import assert_golden

ROOT = Path(__file__).resolve().parents[2]
CASES = ROOT / "tests" / "testdata" / "operator-gateway"
INPUTS = {
    "files-gate": [ROOT / "examples" / "gateway" / "gateway.yaml", ROOT / "examples" / "file-manager" / "mcp-server.yaml"],
    "hooks-only": [CASES / "hooks-only" / "input.yaml"],
}
OWNER_UID = "00000000-0000-4000-8000-000000000002"


def _render(case: str) -> tuple[list[dict[str, Any]], GatewayConfig]:
    manifests = load_manifests(INPUTS[case])
    (gateway,) = manifests.gateways.values()
    config = translate_gateway(gateway, manifests.mcp_servers, in_cluster=True)
    docs = [d for path in INPUTS[case] for d in yaml.safe_load_all(path.read_text()) if d]
    (doc,) = [d for d in docs if d["kind"] == "MCPGateway"]
    owner = {**doc, "metadata": {**doc["metadata"], "uid": OWNER_UID}}
    # The chart's REST token Secret (approval.bearerToken): a gateway's runtime reads GATEHOUSE_API_TOKEN as an Agent's.
    inputs = builders.BuildInputs(runtime_image=DEFAULT_RUNTIME_IMAGE, api_token_secret="gatehouse-api-token")
    return builders.desired_children(gateway, owner, config, inputs), config


@pytest.mark.parametrize("case", sorted(INPUTS))
def test_children_match_golden(case: str, update_golden: bool) -> None:
    children, _ = _render(case)
    assert_golden(children, CASES / case / "expected.json", update_golden)


@pytest.mark.parametrize("case", sorted(INPUTS))
def test_children_are_valid_kubernetes_objects(case: str) -> None:
    for child in _render(case)[0]:
        kubernetes_validate.validate(child, "1.31", strict=True)


@pytest.mark.parametrize("case", sorted(INPUTS))
def test_the_pod_runs_the_gateway_with_its_config_as_the_gateway_service_account(case: str) -> None:
    children, config = _render(case)
    by_kind = {c["kind"]: c for c in children if c["kind"] != "Secret"}
    pod = by_kind["Deployment"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["command"][:4] == ["gatehouse-runtime", "gateway", "--config", "/config/config.json"]
    assert "--public-url" not in container["command"]
    env = {e["name"]: e.get("valueFrom") for e in container["env"]}
    assert env["GATEHOUSE_API_TOKEN"] == {"secretKeyRef": {"name": "gatehouse-api-token", "key": "token"}}
    # the admission policy knows a gateway's runtime as the ServiceAccount named like it, by its gateway label
    assert pod["serviceAccountName"] == config.name == by_kind["ServiceAccount"]["metadata"]["name"]
    labels = by_kind["Deployment"]["metadata"]["labels"]
    assert labels[builders.GATEWAY_LABEL] == config.name and builders.AGENT_LABEL not in labels
    assert by_kind["Service"]["spec"]["selector"] == by_kind["Deployment"]["spec"]["selector"]["matchLabels"]
    secret = next(c for c in children if c["metadata"]["name"] == f"{config.name}-config")
    assert set(secret["data"]) == {"config.json"}
    assert GatewayConfig.from_json(base64.b64decode(secret["data"]["config.json"])) == config
    for child in children:
        (ref,) = child["metadata"].get("ownerReferences") or [{"kind": "MCPGateway", "uid": OWNER_UID}]
        assert ref["kind"] == "MCPGateway" and ref["uid"] == OWNER_UID


def test_the_role_lets_the_runtime_read_its_own_gateway_and_write_its_status() -> None:
    children, _ = _render("files-gate")
    (role,) = [c for c in children if c["kind"] == "Role"]
    rules = {(r["resources"][0], tuple(r.get("resourceNames", ()))): r["verbs"] for r in role["rules"]}
    assert rules[("mcpgateways", ("files-gate",))] == ["get"]
    assert rules[("mcpgateways/status", ("files-gate",))] == ["get", "patch"]
    assert not any(resource.startswith("agents") for resource, _ in rules)
    assert rules[("toolapprovals", ())] == ["get", "list", "watch", "create", "patch", "delete"]


def test_a_hooks_only_gateway_has_no_upstream_in_its_config() -> None:
    children, config = _render("hooks-only")
    assert config.upstream is None and config.mcp_servers == []
    deployment = next(c for c in children if c["kind"] == "Deployment")
    env = {e["name"]: e for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["GATEHOUSE_DATABASE_URL"]["valueFrom"]["secretKeyRef"] == {"name": "cli-gate-db", "key": "url"}
    assert json.loads(config.to_json())["upstream"] is None
