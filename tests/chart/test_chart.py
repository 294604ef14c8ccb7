"""The chart lints, renders, ships the repository's CRDs byte for byte, and every rendered manifest is one a
Kubernetes API server of a supported version would accept (checked offline with kubernetes-validate's
bundled OpenAPI schemas, strict: unknown fields fail)."""

from __future__ import annotations

import copy
import tomllib
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.chart.conftest import CHART, RELEASE_NAMESPACE, VALUES_SETS, Render, of_kind, run_helm, toolapproval_policy
from tests.support import crd_validation
from tests.support.helm import REPO

# Chart.yaml's kubeVersion floor (ValidatingAdmissionPolicy v1 is GA from 1.30) and the client helm v4.1 is built on.
K8S_VERSIONS = ["1.30.0", "1.35.0"]
EXAMPLES = sorted((REPO / "examples").glob("*/*.yaml"))


@pytest.mark.parametrize("values", sorted(VALUES_SETS), ids=str)
def test_helm_lint(helm: Path, values: str) -> None:
    out = run_helm(helm, "lint", "--strict", str(CHART), *VALUES_SETS[values])
    assert "0 chart(s) failed" in out


def test_chart_crds_are_the_repository_crds() -> None:
    repo = {p.name: p.read_bytes() for p in (REPO / "crds").glob("*.yaml")}
    chart = {p.name: p.read_bytes() for p in (CHART / "crds").glob("*.yaml")}
    assert sorted(chart) == sorted(repo), "charts/gatehouse/crds/ must hold exactly the files of crds/"
    stale = [name for name in repo if chart[name] != repo[name]]
    assert not stale, f"charts/gatehouse/crds/ differs from crds/ for {stale}: cp crds/*.yaml charts/gatehouse/crds/"


def test_rendering_includes_the_crds_and_every_template(rendered: list[dict[str, Any]]) -> None:
    kinds = sorted({d["kind"] for d in rendered})
    assert kinds == sorted({
        "CustomResourceDefinition", "ServiceAccount", "Deployment", "ClusterRole", "ClusterRoleBinding",
        "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "PodDisruptionBudget",
        "Role", "RoleBinding",  # the leader election's Lease, and the watched namespaces' rights
    })
    crd_names = sorted(d["metadata"]["name"] for d in of_kind(rendered, "CustomResourceDefinition"))
    assert crd_names == sorted(f"{k.lower()}s.gatehouse.dev" for k in crd_validation.load_crds())


@pytest.mark.parametrize("k8s_version", K8S_VERSIONS)
def test_every_rendered_manifest_is_valid_for_kubernetes(rendered: list[dict[str, Any]], k8s_version: str) -> None:
    """Built-in kinds and the CRDs themselves (apiextensions.k8s.io/v1) against the bundled schemas.

    A kind the bundle does not know fails the test: nothing is skipped."""
    problems = []
    for doc in rendered:
        where = f"{doc['kind']}/{doc['metadata'].get('namespace', '')}/{doc['metadata']['name']}"
        try:
            kubernetes_validate.validate(doc, k8s_version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            problems.append(f"{where}: {'.'.join(map(str, exc.path))}: {exc.message}")
        except kubernetes_validate.SchemaNotFoundError as exc:
            problems.append(f"{where}: {exc.message}")
    assert not problems, "\n".join(problems)


def test_strict_validation_catches_a_misspelt_field(render: Render) -> None:
    """Guards the test above: it would fail on a typo in a template."""
    deployment = copy.deepcopy(of_kind(render(), "Deployment")[0])
    deployment["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["httpGett"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, K8S_VERSIONS[0], strict=True)


def test_rendered_crd_schemas_accept_the_examples(render: Render) -> None:
    """The custom resources we ship (examples/) against the rendered CRDs' openAPIV3Schema and CEL rules."""
    crds = {d["spec"]["names"]["kind"]: d for d in of_kind(render(), "CustomResourceDefinition")}
    assert crds == crd_validation.load_crds()  # so crd_validation checks against exactly what the chart installs
    checked = 0
    for path in EXAMPLES:
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc["apiVersion"].startswith("gatehouse.dev/"):
                assert crd_validation.validate(doc) == [], f"{path.relative_to(REPO)}: {doc['kind']}"
                checked += 1
    assert checked >= 3


def test_no_custom_resource_is_rendered_without_its_crd(rendered: list[dict[str, Any]]) -> None:
    groups = {d["spec"]["group"] for d in of_kind(rendered, "CustomResourceDefinition")}
    for doc in rendered:
        if doc["apiVersion"].split("/")[0] in groups:
            assert crd_validation.validate(doc) == [], doc["metadata"]["name"]


def _operator_container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (deployment,) = of_kind(docs, "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return container


def test_operator_deployment_defaults(render: Render) -> None:
    docs = render()
    (deployment,) = of_kind(docs, "Deployment")
    spec = deployment["spec"]
    assert deployment["metadata"]["namespace"] == RELEASE_NAMESPACE
    assert spec["replicas"] == 2  # one leads, one stands by
    assert spec["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    pod = spec["template"]["spec"]
    (sa,) = of_kind(docs, "ServiceAccount")
    assert pod["serviceAccountName"] == sa["metadata"]["name"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    container = _operator_container(docs)
    assert container["command"] == ["kopf"]
    assert container["args"] == [
        "run", "-m", "gatehouse_operator", "--standalone", "--all-namespaces",
    ]
    # the operator's own endpoint, which a standby serves too (kopf's --liveness starts only on the leader)
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert {"name": "http", "containerPort": 8080, "protocol": "TCP"} in container["ports"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["GATEHOUSE_OPERATOR_LISTEN"] == "0.0.0.0:8080"
    assert env["GATEHOUSE_LEADER_ELECTION"] == "true"
    assert (env["GATEHOUSE_LEADER_ELECTION_LEASE"], env["GATEHOUSE_LEADER_ELECTION_NAMESPACE"]) == (
        "gh-gatehouse-operator", RELEASE_NAMESPACE)
    assert [env[f"GATEHOUSE_LEADER_ELECTION_{k}"] for k in ("LEASE_DURATION", "RENEW_DEADLINE", "RETRY_PERIOD")] == [
        "15s", "10s", "2s"]
    assert env["GATEHOUSE_RUNTIME_IMAGE"] == container["image"] == "ghcr.io/gatehouse-dev/gatehouse:0.1.0"
    assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()


def test_operator_deployment_follows_values(render: Render) -> None:
    docs = render(
        "--set", "operator.watchNamespaces={team-a,team-b}",
        "--set", "image.repository=registry.local/gh,image.tag=dev,image.pullPolicy=Never",
        "--set", "runtime.image.repository=registry.local/rt,runtime.image.tag=r1",
        "--set", "operator.nodeSelector.pool=ops",
        "--set", "operator.tolerations[0].key=ops,operator.tolerations[0].operator=Exists",
        "--set", "operator.resources.limits.memory=1Gi",
    )
    container = _operator_container(docs)
    assert container["args"][-2:] == ["--namespace=team-a", "--namespace=team-b"]
    assert "--all-namespaces" not in container["args"]
    assert container["image"] == "registry.local/gh:dev"
    assert container["imagePullPolicy"] == "Never"
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["GATEHOUSE_RUNTIME_IMAGE"] == "registry.local/rt:r1"
    assert container["resources"]["limits"]["memory"] == "1Gi"
    pod = of_kind(docs, "Deployment")[0]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"pool": "ops"}
    assert pod["tolerations"] == [{"key": "ops", "operator": "Exists"}]


def test_runtime_image_defaults_to_the_operator_image(render: Render) -> None:
    container = _operator_container(render("--set", "image.repository=registry.local/gh,image.tag=dev"))
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["GATEHOUSE_RUNTIME_IMAGE"] == "registry.local/gh:dev"


def test_optional_parts_can_be_switched_off(render: Render) -> None:
    docs = render("--set", "admissionPolicy.enabled=false,rbac.userRoles=false,rbac.migrateTokenReviewBindings=false")
    assert not of_kind(docs, "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
    names = {d["metadata"]["name"] for d in of_kind(docs, "ClusterRole")}
    assert not names & {"gatehouse-approver", "gatehouse-viewer"}


def test_notes_tell_how_to_apply_the_example_and_list_approvals() -> None:
    notes = (CHART / "templates" / "NOTES.txt").read_text()
    for line in ("kubectl apply -f examples/file-manager/", "kubectl get agents", "kubectl get toolapprovals"):
        assert line in notes


def test_chart_app_version_is_the_project_version() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert chart["appVersion"] == project["version"], "the default image tag is the chart's appVersion"


def test_the_operator_is_told_the_names_of_the_policy_and_the_tokenreview_role(render: Render) -> None:
    """The AdmissionPolicy condition checks the policy this chart installs; each runtime is bound to its TokenReview
    ClusterRole. Both names carry the release, so the chart passes them to the operator."""
    docs = render()
    env = {e["name"]: e.get("value") for e in _operator_container(docs)["env"]}
    policy, binding = toolapproval_policy(docs)
    assert env["GATEHOUSE_ADMISSION_POLICY"] == policy["metadata"]["name"] == binding["spec"]["policyName"]
    assert "Deny" in binding["spec"]["validationActions"]  # what the operator reports as Enforced
    roles = {r["metadata"]["name"]: r for r in of_kind(docs, "ClusterRole")}
    role = roles[env["GATEHOUSE_TOKENREVIEW_CLUSTER_ROLE"]]
    assert role["rules"] == [{"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]}]
    assert "GATEHOUSE_TRUST_KUBECTL_WITHOUT_ADMISSION_POLICY" not in env  # off by default


def test_trusting_kubectl_without_the_admission_policy_is_a_value(render: Render) -> None:
    docs = render("--set", "operator.trustKubectlWithoutAdmissionPolicy=true")
    env = {e["name"]: e.get("value") for e in _operator_container(docs)["env"]}
    assert env["GATEHOUSE_TRUST_KUBECTL_WITHOUT_ADMISSION_POLICY"] == "true"


def test_the_secret_check_interval_is_a_value(render: Render) -> None:
    """How often the operator reads the referenced Secrets again (it does not watch them): a valid duration."""
    from agent_runtime.contract.durations import parse_duration

    for args, expected in (((), "60s"), (("--set", "operator.secretCheckInterval=15s"), "15s")):
        env = {e["name"]: e.get("value") for e in _operator_container(render(*args))["env"]}
        assert env["GATEHOUSE_SECRET_CHECK_INTERVAL"] == expected
        assert parse_duration(expected) > 0


def test_two_replicas_have_a_disruption_budget_and_one_can_run_alone(render: Render) -> None:
    (budget,) = of_kind(render(), "PodDisruptionBudget")
    (deployment,) = of_kind(render(), "Deployment")
    assert budget["metadata"]["namespace"] == RELEASE_NAMESPACE
    assert budget["spec"]["minAvailable"] == 1
    assert budget["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    assert of_kind(render("--set", "operator.replicas=1"), "PodDisruptionBudget") == []

    docs = render("--set", "operator.leaderElection.enabled=false")
    (deployment,) = of_kind(docs, "Deployment")
    assert (deployment["spec"]["replicas"], deployment["spec"]["strategy"]) == (1, {"type": "Recreate"})
    env = {e["name"] for e in _operator_container(docs)["env"]}
    assert "GATEHOUSE_LEADER_ELECTION" not in env
    assert not [r for r in of_kind(docs, "Role") if "leader-election" in r["metadata"]["name"]]
