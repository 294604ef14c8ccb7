"""The operator's RBAC is least privilege and complete: no wildcards anywhere, every permission it needs
is granted (including what it must hold to grant it on to each agent's runtime), and with watched
namespaces nothing namespaced is granted cluster-wide. Of ClusterRoleBindings it may write one, the TokenReview
binding; while it migrates an earlier release's per-Agent bindings, an admission policy fences its DELETEs.

A rule with ``resourceNames`` grants ``<resource>:<name>`` here, so a right on one named object never passes for a
right on every object of its kind."""

from __future__ import annotations

from typing import Any

import pytest

from tests.chart.conftest import RELEASE_NAMESPACE, VALUES_SETS, Render, of_kind
from tests.support.admission import Admission

# (apiGroup, resource, verbs) the operator needs, by who needs it. Namespaced unless marked cluster.
OPERATOR_NEEDS: list[tuple[str, str, tuple[str, ...]]] = [
    # reconciling Agents and what they refer to (kopf patches its annotations/finalizers on each)
    ("gatehouse.dev", "agents", ("get", "list", "watch", "patch")),
    ("gatehouse.dev", "modelconfigs", ("get", "list", "watch", "patch")),
    ("gatehouse.dev", "remotemcpservers", ("get", "list", "watch", "patch")),
    ("gatehouse.dev", "agents/status", ("get", "patch", "update")),
    # reconciling MCPGateways as Agents are
    ("gatehouse.dev", "mcpgateways", ("get", "list", "watch", "patch")),
    ("gatehouse.dev", "mcpgateways/status", ("get", "patch", "update")),
    ("gatehouse.dev", "toolapprovals", ("get", "list", "watch")),
    # Secrets: read by name (those Agents, ModelConfigs and RemoteMCPServers reference), and written (<agent>-config,
    # <agent>-access); never listed or watched, checked below
    ("", "secrets", ("get", "create", "patch")),
    # an Agent's state claim: by name, and watched (when it binds: StateReady); deleted by the garbage collector
    # when the Agent owns it
    ("", "persistentvolumeclaims", ("get", "list", "watch", "create", "patch")),
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
    ("gatehouse.dev", "mcpgateways", ("get",)),  # a gateway's runtime: its own MCPGateway's, likewise
]
# kopf itself, cluster-scoped.
KOPF_CLUSTER_NEEDS: list[tuple[str, str, tuple[str, ...]]] = [
    ("apiextensions.k8s.io", "customresourcedefinitions", ("get", "list", "watch")),
    ("", "namespaces", ("list", "watch")),
]
TOKENREVIEW_ROLE = "gh-gatehouse-tokenreview"  # <release fullname>-tokenreview: the ClusterRole and its one binding
# The operator itself, cluster-scoped: the subjects of the one TokenReview ClusterRoleBinding (and bind on its role,
# so that it may grant that role), and the AdmissionPolicy condition (reading the ToolApproval policy and bindings).
OPERATOR_CLUSTER_NEEDS: list[tuple[str, str, tuple[str, ...]]] = [
    ("rbac.authorization.k8s.io", f"clusterrolebindings:{TOKENREVIEW_ROLE}", ("get", "patch")),
    ("rbac.authorization.k8s.io", f"clusterroles:{TOKENREVIEW_ROLE}", ("bind",)),
    ("admissionregistration.k8s.io", "validatingadmissionpolicies", ("get", "list", "watch")),
    ("admissionregistration.k8s.io", "validatingadmissionpolicybindings", ("get", "list", "watch")),
]
# Only while rbac.migrateTokenReviewBindings is on (the default, for the upgrade): the per-Agent bindings of earlier
# releases, found by label and deleted (fenced by the operator's ClusterRoleBinding admission policy).
MIGRATION_NEEDS: list[tuple[str, str, tuple[str, ...]]] = [
    ("rbac.authorization.k8s.io", "clusterrolebindings", ("list", "delete")),
]
CLUSTER_NEEDS = KOPF_CLUSTER_NEEDS + OPERATOR_CLUSTER_NEEDS
# Leader election among the replicas, in the release namespace only: the one Lease (checked below).
LEADER_ELECTION_NEEDS: list[tuple[str, str, tuple[str, ...]]] = [
    ("coordination.k8s.io", "leases", ("create",)),
    ("coordination.k8s.io", "leases:gh-gatehouse-operator", ("get", "update", "patch")),
]
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
        if {"kind": "ServiceAccount", "name": sa, "namespace": RELEASE_NAMESPACE} not in binding.get("subjects", []):
            continue
        ns = binding["metadata"].get("namespace") if binding["kind"] == "RoleBinding" else None
        ref = binding["roleRef"]
        role = roles[(ref["kind"], ns if ref["kind"] == "Role" else None, ref["name"])]
        for rule in role["rules"]:
            resources = [f"{r}:{n}" for r in rule["resources"] for n in rule["resourceNames"]] \
                if rule.get("resourceNames") else rule["resources"]
            out.setdefault(ns, set()).update((g, r, v) for g in rule["apiGroups"] for r in resources for v in rule["verbs"])
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
    assert sorted(grants, key=str) == sorted([None, RELEASE_NAMESPACE], key=str)  # the release namespace: the Lease
    assert _missing(grants[None], needs + MIGRATION_NEEDS) == []


def test_with_watched_namespaces_the_operator_gets_roles_there_only(render: Render) -> None:
    docs = render("--set", "operator.watchNamespaces={team-a,team-b}")
    grants = _grants(docs, _operator_sa(docs))
    assert sorted(grants, key=str) == sorted([None, RELEASE_NAMESPACE, *WATCHED], key=str)
    assert _missing(grants[None], CLUSTER_NEEDS) == []
    namespaced = {(g, r) for g, r, _ in OPERATOR_NEEDS + RUNTIME_ROLE_GRANTS}
    assert not {(g, r) for g, r, _ in grants[None]} & namespaced, "namespaced permissions granted cluster-wide"
    for ns in WATCHED:
        assert _missing(grants[ns], OPERATOR_NEEDS + RUNTIME_ROLE_GRANTS) == [], ns


def test_operator_gets_nothing_beyond_its_table(rendered: list[dict[str, Any]]) -> None:
    allowed = {(g, r, v) for g, r, verbs in OPERATOR_NEEDS + RUNTIME_ROLE_GRANTS + CLUSTER_NEEDS + MIGRATION_NEEDS
               for v in verbs}
    lease = {(g, r, v) for g, r, verbs in LEADER_ELECTION_NEEDS for v in verbs}
    for ns, granted in _grants(rendered, _operator_sa(rendered)).items():
        extra = granted - allowed - (lease if ns == RELEASE_NAMESPACE else set())
        assert extra == set(), f"extra permissions in {ns or 'cluster'}"


def test_the_operator_may_write_only_its_own_lease(rendered: list[dict[str, Any]]) -> None:
    """Leader election: create a Lease (RBAC cannot name what does not exist yet), read and renew only
    <release>-operator, in the release namespace alone."""
    grants = _grants(rendered, _operator_sa(rendered))
    assert _missing(grants[RELEASE_NAMESPACE], LEADER_ELECTION_NEEDS) == []
    assert all(not r.startswith("leases") for ns, granted in grants.items() if ns != RELEASE_NAMESPACE
               for _, r, _ in granted)
    (role,) = [r for r in of_kind(rendered, "Role") if "leader-election" in r["metadata"]["name"]]
    assert role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": ["gh-gatehouse-operator"],
         "verbs": ["get", "update", "patch"]},
    ]


def test_user_cluster_roles(render: Render) -> None:
    roles = {r["metadata"]["name"]: r for r in of_kind(render(), "ClusterRole")}
    assert roles["gatehouse-approver"]["rules"] == [
        {"apiGroups": ["gatehouse.dev"], "resources": ["toolapprovals"], "verbs": ["get", "list", "watch", "patch", "update"]},
    ]
    assert roles["gatehouse-viewer"]["rules"] == [
        {"apiGroups": ["gatehouse.dev"],
         "resources": ["agents", "toolapprovals", "modelconfigs", "remotemcpservers", "mcpgateways"],
         "verbs": ["get", "list", "watch"]},
    ]


def _cluster_rules(docs: list[dict[str, Any]], resource: str) -> list[dict[str, Any]]:
    """The operator's cluster-wide rules that name ``resource``."""
    sa = _operator_sa(docs)
    roles = {r["metadata"]["name"]: r for r in of_kind(docs, "ClusterRole")}
    out = []
    for binding in of_kind(docs, "ClusterRoleBinding"):
        if {"kind": "ServiceAccount", "name": sa, "namespace": RELEASE_NAMESPACE} in binding.get("subjects", []):
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
    (bound,) = [b for b in of_kind(rendered, "ClusterRoleBinding", "RoleBinding") if b["roleRef"]["name"] == TOKENREVIEW_ROLE]
    assert bound["kind"] == "ClusterRoleBinding" and bound["metadata"]["name"] == TOKENREVIEW_ROLE
    assert "subjects" not in bound, "the operator writes the subjects; helm upgrade must leave them alone"


@pytest.mark.parametrize("migrate", [True, False], ids=["migrating", "migrated"])
def test_the_operator_may_write_no_clusterrolebinding_but_the_tokenreview_one(render: Render, migrate: bool) -> None:
    """Issue 31, item 8: the operator may no longer create, patch or delete every ClusterRoleBinding in the cluster.
    Of bindings it may get and patch the TokenReview one; while it migrates, list and delete any (fenced by admission,
    test below); once migrated, nothing more."""
    for args in VALUES_SETS.values():
        docs = render(*args, "--set", f"rbac.migrateTokenReviewBindings={str(migrate).lower()}")
        on_bindings = {(r, v) for ns, granted in _grants(docs, _operator_sa(docs)).items() for g, r, v in granted
                       if r.split(":")[0] == "clusterrolebindings"}
        expected = {(f"clusterrolebindings:{TOKENREVIEW_ROLE}", "get"), (f"clusterrolebindings:{TOKENREVIEW_ROLE}", "patch")}
        if migrate:
            expected |= {("clusterrolebindings", "list"), ("clusterrolebindings", "delete")}
        assert on_bindings == expected, args
        fence = [d for d in of_kind(docs, "ValidatingAdmissionPolicy") if d["metadata"]["name"] == FENCE]
        assert len(fence) == int(migrate), "the operator's deletes are fenced exactly while it may delete"
        env = {e["name"]: e.get("value") for e in of_kind(docs, "Deployment")[0]["spec"]["template"]["spec"][
            "containers"][0]["env"]}
        assert env["GATEHOUSE_MIGRATE_TOKENREVIEW_BINDINGS"] == str(migrate).lower()


FENCE = "gh-gatehouse-operator-clusterrolebindings"
OPERATOR_USER = f"system:serviceaccount:{RELEASE_NAMESPACE}:gh-gatehouse-operator"


def _crb(name: str, role: str = TOKENREVIEW_ROLE, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name, "labels": labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": "a", "namespace": "team"}]}


LEGACY = _crb("gatehouse-tokenreview-team-a", **{"app.kubernetes.io/managed-by": "gatehouse-operator",
                                                  "gatehouse.dev/agent": "a", "gatehouse.dev/agent-namespace": "team"})
FENCE_CASES = {
    # (operation, user, old, new) -> admitted
    "the operator deletes an earlier release's per-Agent binding": ("DELETE", OPERATOR_USER, LEGACY, None, True),
    "the operator deletes cluster-admin's binding": ("DELETE", OPERATOR_USER, _crb("cluster-admin", "cluster-admin"), None,
                                                     False),
    "the operator deletes a labelled binding of another role": (
        "DELETE", OPERATOR_USER, {**LEGACY, "roleRef": {**LEGACY["roleRef"], "name": "cluster-admin"}}, None, False),
    "the operator deletes an unlabelled binding of the TokenReview role": (
        "DELETE", OPERATOR_USER, _crb("someone-elses", TOKENREVIEW_ROLE), None, False),
    "the operator deletes the shared TokenReview binding": ("DELETE", OPERATOR_USER, _crb(TOKENREVIEW_ROLE), None, False),
    "the operator patches the TokenReview binding's subjects": (
        "UPDATE", OPERATOR_USER, _crb(TOKENREVIEW_ROLE), _crb(TOKENREVIEW_ROLE), True),
    "the operator patches another binding": ("UPDATE", OPERATOR_USER, _crb("x", "edit"), _crb("x", "edit"), False),
    "the operator creates a binding": ("CREATE", OPERATOR_USER, None, _crb("mine", "cluster-admin"), False),
    "an administrator deletes any binding (not matched)": (
        "DELETE", "admin@example.com", _crb("cluster-admin", "cluster-admin"), None, True),
}


@pytest.mark.parametrize(("operation", "user", "old", "new", "admitted"), FENCE_CASES.values(), ids=FENCE_CASES.keys())
def test_the_fence_lets_the_operator_delete_only_earlier_per_agent_bindings(
    render: Render, operation: str, user: str, old: dict[str, Any] | None, new: dict[str, Any] | None, admitted: bool,
) -> None:
    docs = render()
    admission = Admission()
    assert admission.add_documents(d for d in docs if d["metadata"]["name"] == FENCE) == 1
    obj = new if new is not None else old
    assert obj is not None
    review = admission.review(
        operation=operation, group="rbac.authorization.k8s.io", version="v1", resource="clusterrolebindings",
        subresource=None, kind="ClusterRoleBinding", obj=new, old=old,
        user={"username": user, "groups": ["system:authenticated"]}, namespace=None, name=obj["metadata"]["name"])
    assert (review.denial is None) == admitted, review.denial
    if not admitted:
        assert review.denial is not None and "deletes only the per-Agent TokenReview bindings" in review.denial.message


def test_the_runtime_grants_of_the_operator_builders_are_covered(render: Render) -> None:
    """Every rule of the Role the operator renders for a runtime is one the chart lets the operator hold."""
    from agent_runtime.contract.resources import Agent
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
    """It names the runtimes that check Kubernetes tokens in the binding of `<release>-tokenreview` through `bind` on
    that one role; RBAC then does not ask it to hold the role's rights, and it does not."""
    for args in VALUES_SETS.values():
        docs = render(*args)
        for ns, granted in _grants(docs, _operator_sa(docs)).items():
            assert not {v for g, r, v in granted if r == "tokenreviews"}, (ns or "cluster", args)
