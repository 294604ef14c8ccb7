"""Unit tests of the runtime's identity and access in the operator: the generated token Secret, the TokenReview
binding's subjects (and the migration from per-Agent bindings), the AdmissionPolicy condition, the ServiceAccount
rule, and the settings. (The Secrets an Agent names: tests/gatehouse_operator/test_dependencies.py.)"""

from __future__ import annotations

import base64
import copy
import os
import threading
import time
from typing import Any

import pytest

from agent_runtime.contract.resources import Agent
from agent_runtime.contract.translator import access_files
from gatehouse_operator import __main__ as main_module
from gatehouse_operator import access, builders, tokenreview
from gatehouse_operator.admission import admission_condition
from gatehouse_operator.dependencies import ReferencedSecrets, SeenSecret
from gatehouse_operator.kube import ApiException
from gatehouse_operator.reconcile import service_account_problem
from gatehouse_operator.settings import SECRET_CHECK_ENV, TRUST_KUBECTL_ENV, OperatorConfig

POLICY = "gh-toolapproval-decision"


def _agent(name: str = "a", namespace: str = "team", **spec: Any) -> Agent:
    return Agent.model_validate({"kind": "Agent", "metadata": {"name": name, "namespace": namespace},
                                 "spec": {"modelConfig": "m", **spec}})


class FakeKube:
    """Cluster-scoped objects by (kind, name); ``fail`` makes every read answer that status."""

    def __init__(self, *objects: dict[str, Any], fail: int | None = None) -> None:
        self.objects = {(o["kind"], o["metadata"]["name"]): o for o in objects}
        self.fail = fail
        self.calls: list[str] = []

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        self.calls.append(f"get {kind}/{name}")
        if self.fail:
            raise ApiException(status=self.fail, reason="Forbidden")
        return self.objects.get((kind, name))

    def list_admission_policy_bindings(self) -> list[dict[str, Any]]:
        self.calls.append("list bindings")
        return [o for (kind, _), o in self.objects.items() if kind == "ValidatingAdmissionPolicyBinding"]

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(f"create {obj['kind']}/{obj['metadata']['name']}")
        if (obj["kind"], obj["metadata"]["name"]) in self.objects:
            raise ApiException(status=409, reason="Conflict")
        self.objects[obj["kind"], obj["metadata"]["name"]] = obj
        return obj

    def patch(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(f"patch {obj['kind']}/{obj['metadata']['name']}")
        self.objects[obj["kind"], obj["metadata"]["name"]] = obj
        return obj

    def delete(self, kind: str, namespace: str | None, name: str) -> bool:
        self.calls.append(f"delete {kind}/{name}")
        return self.objects.pop((kind, name), None) is not None


def _policy() -> dict[str, Any]:
    return {"kind": "ValidatingAdmissionPolicy", "metadata": {"name": POLICY}}


def _binding(name: str, actions: list[str], policy: str = POLICY) -> dict[str, Any]:
    return {"kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": name},
            "spec": {"policyName": policy, "validationActions": actions}}


def _condition(kube: FakeKube, trust: bool = False) -> tuple[bool, str, str]:
    config = OperatorConfig(admission_policy=POLICY, trust_kubectl_without_admission_policy=trust)
    c = admission_condition(kube, config)  # type: ignore[arg-type]
    assert c.type == "AdmissionPolicy"
    return c.status, c.reason, c.message


def test_admission_policy_enforced_only_with_a_deny_binding() -> None:
    assert _condition(FakeKube())[:2] == (False, "NotInstalled")
    assert _condition(FakeKube(_policy()))[:2] == (False, "NotEnforcing")
    status, reason, message = _condition(FakeKube(_policy(), _binding(POLICY, ["Warn", "Audit"])))
    assert (status, reason) == (False, "NotEnforcing")
    assert "['Warn', 'Audit'], without Deny" in message and "ignored until it is enforced" in message
    enforced = FakeKube(_policy(), _binding(POLICY, ["Deny", "Audit"]))
    assert _condition(enforced)[:2] == (True, "Enforced")
    assert enforced.calls == [f"get ValidatingAdmissionPolicy/{POLICY}", f"get ValidatingAdmissionPolicyBinding/{POLICY}"]


def test_a_binding_under_another_name_is_found_by_listing() -> None:
    kube = FakeKube(_policy(), _binding("unrelated", ["Deny"], policy="other"), _binding("mine", ["Warn"]),
                    _binding("also-mine", ["Deny"]))
    status, reason, message = _condition(kube)
    assert (status, reason) == (True, "Enforced") and "'also-mine'" in message
    assert kube.calls[-1] == "list bindings"


def test_an_unreadable_policy_is_unknown_and_trust_turns_every_doubt_true() -> None:
    status, reason, message = _condition(FakeKube(fail=403))
    assert (status, reason) == (False, "Unknown") and "(403 Forbidden)" in message
    assert _condition(FakeKube(fail=403), trust=True)[:2] == (True, "TrustedByOperator")
    assert _condition(FakeKube(), trust=True)[:2] == (True, "TrustedByOperator")
    assert _condition(FakeKube(_policy(), _binding(POLICY, ["Deny"])), trust=True)[:2] == (True, "Enforced")


def test_only_the_agents_own_service_account_is_allowed() -> None:
    assert service_account_problem(_agent()) is None
    assert service_account_problem(_agent(deployment={"serviceAccountName": "a"})) is None
    problem = service_account_problem(_agent(deployment={"serviceAccountName": "robot"}))
    assert problem is not None and problem.path == "spec.deployment.serviceAccountName"
    assert "the admission policy can tell the runtime from users" in problem.message
    assert builders.service_account_name(_agent(deployment={"serviceAccountName": "robot"})) == "a"


def test_the_generated_token_secret() -> None:
    agent = _agent()
    owner = {"apiVersion": "gatehouse.dev/v1alpha1", "kind": "Agent", "metadata": {"name": "a", "namespace": "team",
                                                                                    "uid": "u-1"}}
    secret = builders.build_access_secret(agent, owner, "TOKEN")
    assert secret["metadata"]["name"] == "a-access" == access_files(agent)[0].secret
    assert base64.b64decode(secret["data"]["tokens"]) == b"a-admin:TOKEN\n"
    assert secret["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    assert secret["metadata"]["labels"][builders.AGENT_LABEL] == "a"  # its edits reach the Agent (child events)


def _read(kube: FakeKube) -> ReferencedSecrets:
    return ReferencedSecrets(kube, "team")  # type: ignore[arg-type]


def test_the_token_secret_is_created_only_when_missing_and_never_overwritten() -> None:
    agent, owner = _agent(), {"apiVersion": "gatehouse.dev/v1alpha1", "kind": "Agent", "metadata": {"name": "a"}}
    kube = FakeKube()
    read = _read(kube)
    done = access.ensure_access_secret(kube, read, agent, owner)  # type: ignore[arg-type]
    assert done is not None and done.action == "created"
    assert kube.calls == ["get Secret/a-access", "create Secret/a-access"]
    assert read.get("a-access") == SeenSecret("", frozenset({"tokens"}))  # as created: no read back
    first = kube.objects["Secret", "a-access"]["data"]["tokens"]
    kube.calls.clear()
    assert access.ensure_access_secret(kube, _read(kube), agent, owner) is None  # type: ignore[arg-type]
    assert kube.calls == ["get Secret/a-access"]
    kube.calls.clear()
    again = access.ensure_access_secret(kube, _read(kube), agent, owner, create_first=True)  # type: ignore[arg-type]
    assert again is not None and again.action == "unchanged"  # a new Agent's first try: 409, read, kept
    assert kube.calls == ["create Secret/a-access", "get Secret/a-access"]
    assert kube.objects["Secret", "a-access"]["data"]["tokens"] == first
    named = _agent(access={"tokenSecretRef": {"name": "mine"}})
    assert access.ensure_access_secret(kube, _read(kube), named, owner) is None  # type: ignore[arg-type]
    assert not any(c.startswith("patch") for c in kube.calls)


class FakeBindings:
    """ClusterRoleBindings by name, with resourceVersions: a merge patch carrying a stale one answers 409."""

    def __init__(self, *objects: dict[str, Any]) -> None:
        self.objects = {o["metadata"]["name"]: {**o, "metadata": {**o["metadata"], "resourceVersion": "1"}} for o in objects}
        self.calls: list[str] = []

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        self.calls.append(f"get {name}")
        return copy.deepcopy(self.objects.get(name))

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(f"create {obj['metadata']['name']}")
        self.objects[obj["metadata"]["name"]] = {**obj, "metadata": {**obj["metadata"], "resourceVersion": "1"}}
        return copy.deepcopy(self.objects[obj["metadata"]["name"]])

    def patch(self, obj: dict[str, Any]) -> dict[str, Any]:
        name = obj["metadata"]["name"]
        self.calls.append(f"patch {name}")
        current = self.objects[name]
        if obj["metadata"]["resourceVersion"] != current["metadata"]["resourceVersion"]:
            raise ApiException(status=409, reason="Conflict")
        rv = str(int(current["metadata"]["resourceVersion"]) + 1)
        self.objects[name] = {**current, "subjects": obj["subjects"], "metadata": {**current["metadata"], "resourceVersion": rv}}
        return copy.deepcopy(self.objects[name])

    def delete(self, kind: str, namespace: str | None, name: str) -> bool:
        self.calls.append(f"delete {name}")
        return self.objects.pop(name, None) is not None

    def someone_else_writes(self, name: str, subjects: list[dict[str, str]]) -> None:
        current = self.objects[name]
        rv = str(int(current["metadata"]["resourceVersion"]) + 1)
        self.objects[name] = {**current, "subjects": subjects, "metadata": {**current["metadata"], "resourceVersion": rv}}


def _role_binding(name: str = "gh-tokenreview", role: str = "gh-tokenreview") -> dict[str, Any]:
    return {"kind": "ClusterRoleBinding", "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role}}


def _sa(namespace: str, name: str) -> dict[str, str]:
    return {"kind": "ServiceAccount", "name": name, "namespace": namespace}


def test_a_runtime_is_granted_and_revoked_tokenreviews_as_a_subject_of_the_one_binding() -> None:
    kube = FakeBindings(_role_binding())
    binding = tokenreview.TokenReviewBinding(kube, "gh-tokenreview")  # type: ignore[arg-type]
    assert binding.grant("team", "a") and binding.grant("team-b", "a")
    assert kube.objects["gh-tokenreview"]["subjects"] == [_sa("team", "a"), _sa("team-b", "a")]
    assert kube.calls == ["get gh-tokenreview", "patch gh-tokenreview", "patch gh-tokenreview"]  # read once, then kept
    assert not binding.grant("team", "a") and len(kube.calls) == 3  # there already: no request
    assert binding.revoke("team", "a") and not binding.revoke("team", "a")
    assert kube.objects["gh-tokenreview"]["subjects"] == [_sa("team-b", "a")]
    assert binding.refresh() == {("team-b", "a")}


def test_a_write_in_between_is_read_again_and_kept() -> None:
    kube = FakeBindings(_role_binding())
    binding = tokenreview.TokenReviewBinding(kube, "gh-tokenreview")  # type: ignore[arg-type]
    binding.grant("team", "a")
    kube.someone_else_writes("gh-tokenreview", [_sa("team", "a"), {"kind": "User", "name": "admin"}])
    assert binding.grant("team", "b")  # 409, read again, patched
    assert kube.objects["gh-tokenreview"]["subjects"] == [_sa("team", "a"), {"kind": "User", "name": "admin"}, _sa("team", "b")]


class SlowFirstPatch(FakeBindings):
    """The first patch waits until it is released: meanwhile other reconciles ask for their changes."""

    def __init__(self, *objects: dict[str, Any]) -> None:
        super().__init__(*objects)
        self.in_flight, self.release = threading.Event(), threading.Event()

    def patch(self, obj: dict[str, Any]) -> dict[str, Any]:
        if not self.in_flight.is_set():
            self.in_flight.set()
            assert self.release.wait(10)
        return super().patch(obj)


def test_changes_asked_for_during_a_write_go_out_together_in_the_next() -> None:
    """A group commit: while one grant's patch is in flight, eight more grants and a revoke wait; the next patch carries
    all of them, and each caller learns whether a write carried its change (the revoke of a subject never named: no)."""
    kube = SlowFirstPatch(_role_binding())
    binding = tokenreview.TokenReviewBinding(kube, "gh-tokenreview")  # type: ignore[arg-type]
    results: dict[str, bool] = {}

    def ask(name: str, present: bool = True) -> None:
        results[name] = binding.grant("team", name) if present else binding.revoke("team", name)

    first = threading.Thread(target=ask, args=("a0",))
    first.start()
    assert kube.in_flight.wait(10)
    others = [threading.Thread(target=ask, args=(f"a{i}",)) for i in range(1, 9)]
    others.append(threading.Thread(target=ask, args=("never", False)))
    for t in others:
        t.start()
    deadline = time.monotonic() + 10
    while len(binding._pending) < len(others) and time.monotonic() < deadline:  # all nine asked, none written yet
        time.sleep(0.01)
    kube.release.set()
    for t in [first, *others]:
        t.join(10)
    assert [c for c in kube.calls if c.startswith("patch")] == ["patch gh-tokenreview"] * 2
    assert kube.objects["gh-tokenreview"]["subjects"] == [_sa("team", f"a{i}") for i in range(9)]
    assert results == {**{f"a{i}": True for i in range(9)}, "never": False}
    assert not binding.grant("team", "a5") and len(kube.calls) == 3  # there already: no request


def test_a_failed_group_write_leaves_the_others_wishes_for_the_next_writer() -> None:
    """The caller whose patch fails gets the error; the changes it carried for others are not lost with it."""
    kube = FakeBindings(_role_binding())
    binding = tokenreview.TokenReviewBinding(kube, "gh-tokenreview")  # type: ignore[arg-type]
    binding._pending[("team", "waiting")] = True  # asked by a reconcile still waiting for the lock
    broken = kube.patch
    kube.patch = lambda obj: (_ for _ in ()).throw(ApiException(status=500, reason="boom"))  # type: ignore[method-assign]
    with pytest.raises(ApiException):
        binding.grant("team", "a")
    kube.patch = broken  # type: ignore[method-assign]
    assert binding._pending == {("team", "waiting"): True}
    assert binding.grant("team", "b")
    assert kube.objects["gh-tokenreview"]["subjects"] == [_sa("team", "waiting"), _sa("team", "b")]


def test_a_binding_of_another_role_is_never_written() -> None:
    kube = FakeBindings(_role_binding(role="cluster-admin"))
    binding = tokenreview.TokenReviewBinding(kube, "gh-tokenreview")  # type: ignore[arg-type]
    with pytest.raises(tokenreview.BindingUnusable, match="binds ClusterRole 'cluster-admin'"):
        binding.grant("team", "a")
    assert not any(c.startswith("patch") for c in kube.calls)


def test_a_missing_binding_is_created_where_the_operator_may() -> None:
    kube = FakeBindings()
    assert tokenreview.TokenReviewBinding(kube, "gatehouse-tokenreview").grant("team", "a")  # type: ignore[arg-type]
    made = kube.objects["gatehouse-tokenreview"]
    assert made["roleRef"]["name"] == "gatehouse-tokenreview" and made["subjects"] == [_sa("team", "a")]


def test_an_earlier_releases_binding_is_migrated_subject_first() -> None:
    legacy = {"kind": "ClusterRoleBinding", "metadata": {"name": "gatehouse-tokenreview-team-a", "labels": {
        "app.kubernetes.io/managed-by": "gatehouse-operator", "gatehouse.dev/agent": "a",
        "gatehouse.dev/agent-namespace": "team"}}, "roleRef": _role_binding()["roleRef"], "subjects": [_sa("team", "a")]}
    kube = FakeBindings(_role_binding(), legacy)
    binding = tokenreview.TokenReviewBinding(kube, "gh-tokenreview")  # type: ignore[arg-type]
    assert binding.migrate(kube.objects["gatehouse-tokenreview-team-a"], wanted=True)
    assert kube.calls[-2:] == ["patch gh-tokenreview", "delete gatehouse-tokenreview-team-a"]  # never a moment without
    assert kube.objects["gh-tokenreview"]["subjects"] == [_sa("team", "a")]
    assert tokenreview.legacy_owner(legacy) == ("team", "a")
    assert tokenreview.legacy_owner(_role_binding()) is None


def test_settings_and_the_trust_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    assert OperatorConfig.from_env({}) == OperatorConfig()
    assert OperatorConfig().admission_policy == "gatehouse-toolapproval-decision"
    assert OperatorConfig().tokenreview_cluster_role == "gatehouse-tokenreview"
    assert OperatorConfig().migrate_tokenreview_bindings is True
    assert OperatorConfig.from_env({"GATEHOUSE_MIGRATE_TOKENREVIEW_BINDINGS": "false"}).migrate_tokenreview_bindings is False
    assert OperatorConfig().trust_kubectl_without_admission_policy is False
    assert OperatorConfig().secret_check_seconds == 60
    assert OperatorConfig.from_env({SECRET_CHECK_ENV: "1m30s"}).secret_check_seconds == 90
    with pytest.raises(ValueError, match="GATEHOUSE_SECRET_CHECK_INTERVAL: invalid duration '90'"):
        OperatorConfig.from_env({SECRET_CHECK_ENV: "90"})
    config = OperatorConfig.from_env({"GATEHOUSE_ADMISSION_POLICY": "p", "GATEHOUSE_TOKENREVIEW_CLUSTER_ROLE": "r",
                                      TRUST_KUBECTL_ENV: "true"})
    assert (config.admission_policy, config.tokenreview_cluster_role, config.trust_kubectl_without_admission_policy) == (
        "p", "r", True)

    seen: list[list[str]] = []
    monkeypatch.setattr(main_module.cli, "main", lambda args, prog_name: seen.append(args))
    monkeypatch.setenv(TRUST_KUBECTL_ENV, "false")  # restored (to unset) after the test
    main_module.main(["--trust-kubectl-without-admission-policy", "--namespace=x"])
    assert seen == [["run", "-m", "gatehouse_operator", "--namespace=x"]]
    assert os.environ[TRUST_KUBECTL_ENV] == "true"
    monkeypatch.setenv(SECRET_CHECK_ENV, "60s")
    main_module.main(["--secret-check-interval", "15s", "-n", "x"])
    main_module.main(["--secret-check-interval=2m"])
    assert seen[1:] == [["run", "-m", "gatehouse_operator", "-n", "x"], ["run", "-m", "gatehouse_operator", "--all-namespaces"]]
    assert os.environ[SECRET_CHECK_ENV] == "2m"
    with pytest.raises(SystemExit, match="--secret-check-interval: invalid duration 'soon'"):
        main_module.main(["--secret-check-interval", "soon"])
