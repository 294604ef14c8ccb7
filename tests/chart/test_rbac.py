"""The operator's RBAC is least privilege and complete: no wildcards anywhere, every permission it needs
is granted (including what it must hold to grant it on to each agent's runtime), and with watched
namespaces nothing namespaced is granted cluster-wide."""

from __future__ import annotations

from typing import Any

import pytest

from tests.chart.conftest import RELEASE_NAMESPACE, VALUES_SETS, Render, of_kind

# (apiGroup, resource, verbs) the operator needs, by who needs it. Namespaced unless marked cluster.
OPERATOR_NEEDS: list[tuple[str, str, tuple[str, ...]]] = [
    # reconciling Agents and what they refer to (kopf patches its annotations/finalizers on each)
    ("gatehouse.dev", "agents", ("get", "list", "watch", "patch")),
    ("gatehouse.dev", "modelconfigs", ("get", "list", "watch", "patch")),
    ("gatehouse.dev", "remotemcpservers", ("get", "list", "watch", "patch")),
    ("gatehouse.dev", "agents/status", ("get", "patch", "update")),
    ("gatehouse.dev", "toolapprovals", ("get", "list", "watch")),
    # Secrets: read by name (those Agents, ModelConfigs and RemoteMCPServers reference), and written (<agent>-config,
    # <agent>-access); never listed or watched, checked below
    ("", "secrets", ("get", "create", "patch")),
    # an Agent's state claim: by name, never listed; deleted by the garbage collector when the Agent owns it
    ("", "persistentvolumeclaims", ("get", "create", "patch")),
    # children of an Agent
    ("", "serviceaccounts", ("get", "list", "watch", "create", "patch", "delete")),
    ("", "services", ("get", "list", "watch", "create", "patch", "delete")),
    ("apps", "deployments", ("get", "list", "watch", "create", "patch", "delete")),
    ("rbac.authorization.k8s.io", "roles", ("get", "list", "watch", "create", "patch", "delete")),
    ("rbac.authorization.k8s.io", "rolebindings", ("get", "list", "watch", "create", "patch", "delete")),
    ("", "events", ("create", "patch")),
]
# What the operator's Role for each runtime grants; RBAC lets it grant only what it holds itself.
RUNTIME_ROLE_GRANTS: list[tuple[str, str, tuple[str, ...]]] = [
    ("gatehouse.dev", "toolapprovals", ("get", "list", "watch", "create", "patch", "delete")),
    ("gatehouse.dev", "toolapprovals/status", ("get", "patch", "update")),
    ("", "events", ("create", "patch")),
    ("gatehouse.dev", "agents", ("get",)),  # its own Agent's conditions (AdmissionPolicy)
]
# kopf itself, cluster-scoped.
KOPF_CLUSTER_NEEDS: list[tuple[str, str, tuple[str, ...]]] = [
    ("apiextensions.k8s.io", "customresourcedefinitions", ("get", "list", "watch")),
    ("", "namespaces", ("list", "watch")),
]
# The operator itself, cluster-scoped: each runtime's TokenReview ClusterRoleBinding (bind: on one role only,
# checked below) and the AdmissionPolicy condition (reading the ToolApproval policy and its bindings).
OPERATOR_CLUSTER_NEEDS: list[tuple[str, str, tuple[str, ...]]] = [
    ("rbac.authorization.k8s.io", "clusterrolebindings", ("get", "list", "create", "patch", "delete")),
    ("rbac.authorization.k8s.io", "clusterroles", ("bind",)),
    ("admissionregistration.k8s.io", "validatingadmissionpolicies", ("get", "list", "watch")),
    ("admissionregistration.k8s.io", "validatingadmissionpolicybindings", ("get", "list", "watch")),
]
CLUSTER_NEEDS = KOPF_CLUSTER_NEEDS + OPERATOR_CLUSTER_NEEDS
TOKENREVIEW_ROLE = "gh-gatehouse-tokenreview"  # <release fullname>-tokenreview
WATCHED = ["team-a", "team-b"]


def _roles(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return of_kind(docs, "Role", "ClusterRole")


def test_no_wildcards_in_any_role(rendered: list[dict[str, Any]]) -> None:
    roles = _roles(rendered)
    assert roles
    for role in roles:
        for rule in role["rules"]:
            for field in ("verbs", "resources", "apiGroups", "resourceNames", "nonResourceURLs"):
                assert not any("*" in item for item in rule.get(field, [])), (
                    f"{role['kind']} {role['metadata']['name']} has a wildcard in {field}: {rule}"
                )


def _grants(docs: list[dict[str, Any]], sa: str) -> dict[str | None, set[tuple[str, str, str]]]:
    """What ServiceAccount ``sa`` may do, keyed by namespace (None: cluster-wide)."""
    roles = {(r["kind"], r["metadata"].get("namespace"), r["metadata"]["name"]): r for r in _roles(docs)}
    out: dict[str | None, set[tuple[str, str, str]]] = {}
    for binding in of_kind(docs, "RoleBinding", "ClusterRoleBinding"):
        if {"kind": "ServiceAccount", "name": sa, "namespace": RELEASE_NAMESPACE} not in binding["subjects"]:
            continue
        ns = binding["metadata"].get("namespace") if binding["kind"] == "RoleBinding" else None
        ref = binding["roleRef"]
        role = roles[(ref["kind"], ns if ref["kind"] == "Role" else None, ref["name"])]
        for rule in role["rules"]:
            out.setdefault(ns, set()).update(
                (g, r, v) for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]
            )
    return out


def _operator_sa(docs: list[dict[str, Any]]) -> str:
    (deployment,) = of_kind(docs, "Deployment")
    return deployment["spec"]["template"]["spec"]["serviceAccountName"]


def _missing(granted: set[tuple[str, str, str]], needs: list[tuple[str, str, tuple[str, ...]]]) -> list[tuple[str, str, str]]:
    return [(g, r, v) for g, r, verbs in needs for v in verbs if (g, r, v) not in granted]


@pytest.mark.parametrize(
    "needs", [OPERATOR_NEEDS, RUNTIME_ROLE_GRANTS, CLUSTER_NEEDS], ids=["operator", "runtime-grants", "cluster"]
)
def test_operator_has_everything_it_needs_cluster_wide_by_default(render: Render, needs: list[Any]) -> None:
    docs = render()
    grants = _grants(docs, _operator_sa(docs))
    assert list(grants) == [None]
    assert _missing(grants[None], needs) == []


def test_with_watched_namespaces_the_operator_gets_roles_there_only(render: Render) -> None:
    docs = render("--set", "operator.watchNamespaces={team-a,team-b}")
    grants = _grants(docs, _operator_sa(docs))
    assert sorted(grants, key=str) == sorted([None, *WATCHED], key=str)
    assert _missing(grants[None], CLUSTER_NEEDS) == []
    namespaced = {(g, r) for g, r, _ in OPERATOR_NEEDS + RUNTIME_ROLE_GRANTS}
    assert not {(g, r) for g, r, _ in grants[None]} & namespaced, "namespaced permissions granted cluster-wide"
    for ns in WATCHED:
        assert _missing(grants[ns], OPERATOR_NEEDS + RUNTIME_ROLE_GRANTS) == [], ns


def test_operator_gets_nothing_beyond_its_table(rendered: list[dict[str, Any]]) -> None:
    allowed = {(g, r, v) for g, r, verbs in OPERATOR_NEEDS + RUNTIME_ROLE_GRANTS + CLUSTER_NEEDS for v in verbs}
    for ns, granted in _grants(rendered, _operator_sa(rendered)).items():
        assert granted - allowed == set(), f"extra permissions in {ns or 'cluster'}"


def test_user_cluster_roles(render: Render) -> None:
    roles = {r["metadata"]["name"]: r for r in of_kind(render(), "ClusterRole")}
    assert roles["gatehouse-approver"]["rules"] == [
        {"apiGroups": ["gatehouse.dev"], "resources": ["toolapprovals"], "verbs": ["get", "list", "watch", "patch", "update"]},
    ]
    assert roles["gatehouse-viewer"]["rules"] == [
        {"apiGroups": ["gatehouse.dev"], "resources": ["agents", "toolapprovals", "modelconfigs", "remotemcpservers"],
         "verbs": ["get", "list", "watch"]},
    ]


def _cluster_rules(docs: list[dict[str, Any]], resource: str) -> list[dict[str, Any]]:
    """The operator's cluster-wide rules that name ``resource``."""
    sa = _operator_sa(docs)
    roles = {r["metadata"]["name"]: r for r in of_kind(docs, "ClusterRole")}
    out = []
    for binding in of_kind(docs, "ClusterRoleBinding"):
        if {"kind": "ServiceAccount", "name": sa, "namespace": RELEASE_NAMESPACE} in binding["subjects"]:
            out += [rule for rule in roles[binding["roleRef"]["name"]]["rules"] if resource in rule["resources"]]
    return out


def test_the_operator_may_bind_only_the_tokenreview_role(rendered: list[dict[str, Any]]) -> None:
    """bind lets the operator grant a role it does not hold: only the one role that allows TokenReviews."""
    (rule,) = _cluster_rules(rendered, "clusterroles")
    assert rule == {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"],
                    "resourceNames": [TOKENREVIEW_ROLE], "verbs": ["bind"]}


def test_the_tokenreview_role_allows_tokenreviews_and_nothing_else(rendered: list[dict[str, Any]]) -> None:
    roles = {r["metadata"]["name"]: r for r in of_kind(rendered, "ClusterRole")}
    assert roles[TOKENREVIEW_ROLE]["rules"] == [
        {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
    ]
    bound = [b for b in of_kind(rendered, "ClusterRoleBinding", "RoleBinding") if b["roleRef"]["name"] == TOKENREVIEW_ROLE]
    assert bound == [], "the chart binds it to nobody: the operator binds it to each runtime that needs it"


def test_the_runtime_grants_of_the_operator_builders_are_covered(render: Render) -> None:
    """Every rule of the Role the operator renders for a runtime is one the chart lets the operator hold."""
    from agent_runtime.resources import Agent
    from gatehouse_operator.builders import build_role

    agent = Agent.model_validate({"kind": "Agent", "metadata": {"name": "a", "namespace": "team-a"},
                                  "spec": {"modelConfig": "m"}})
    wanted = [(g, r, v) for rule in build_role(agent)["rules"]
              for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]]
    docs = render()
    assert _missing(_grants(docs, _operator_sa(docs))[None], [(g, r, (v,)) for g, r, v in wanted]) == []


def test_the_operator_may_not_list_or_watch_secrets(render: Render) -> None:
    """RBAC cannot narrow a list or watch by label: either would show the operator every Secret in its scope."""
    for args in VALUES_SETS.values():
        docs = render(*args)
        for ns, granted in _grants(docs, _operator_sa(docs)).items():
            on_secrets = {v for g, r, v in granted if (g, r) == ("", "secrets")}
            assert on_secrets in (set(), {"get", "create", "patch"}), (ns or "cluster", args, on_secrets)


def test_the_operator_itself_may_not_create_tokenreviews(render: Render) -> None:
    """It binds `<release>-tokenreview` to the runtimes that check Kubernetes tokens through `bind` on that one role;
    RBAC then does not ask it to hold the role's rights, and it does not."""
    for args in VALUES_SETS.values():
        docs = render(*args)
        for ns, granted in _grants(docs, _operator_sa(docs)).items():
            assert not {v for g, r, v in granted if r == "tokenreviews"}, (ns or "cluster", args)
