"""Unit tests of the runtime's identity and access in the operator: the generated token Secret, the TokenReview
binding, the AdmissionPolicy condition, the ServiceAccount rule, and the settings. (The Secrets an Agent names:
tests/operator_tests/test_dependencies.py.)"""

from __future__ import annotations

import base64
import os
from typing import Any

import pytest

from agent_runtime.resources import Agent
from agent_runtime.translator import access_files
from gatehouse_operator import __main__ as main_module
from gatehouse_operator import access, builders
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


def test_the_tokenreview_binding_is_created_replaced_deleted_and_never_taken_over() -> None:
    agent, kube = _agent(), FakeKube()
    name = "gatehouse-tokenreview-team-a"
    created = access.ensure_tokenreview_binding(kube, agent, "gh-tokenreview", wanted=True)  # type: ignore[arg-type]
    assert created is not None and created.action == "created"
    binding = kube.objects["ClusterRoleBinding", name]
    assert binding["roleRef"]["name"] == "gh-tokenreview"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "a", "namespace": "team"}]
    assert "ownerReferences" not in binding["metadata"]
    again = access.ensure_tokenreview_binding(kube, agent, "gh-tokenreview", wanted=True)  # type: ignore[arg-type]
    assert again is not None and again.action == "unchanged"
    moved = access.ensure_tokenreview_binding(kube, agent, "other-role", wanted=True)  # type: ignore[arg-type]
    assert moved is not None and moved.action == "replaced"  # roleRef is immutable
    gone = access.ensure_tokenreview_binding(kube, agent, "other-role", wanted=False)  # type: ignore[arg-type]
    assert gone is not None and gone.action == "deleted" and ("ClusterRoleBinding", name) not in kube.objects

    # "team-a"/"b" and "team"/"a-b" share a name: neither takes the other's binding over or deletes it.
    theirs = access.ensure_tokenreview_binding(kube, _agent("b", "team-a"), "r", wanted=True)  # type: ignore[arg-type]
    assert theirs is not None
    with pytest.raises(access.BindingConflict, match="belongs to Agent team-a/b"):
        access.ensure_tokenreview_binding(kube, _agent("a-b", "team"), "r", wanted=True)  # type: ignore[arg-type]
    assert not access.delete_tokenreview_binding(kube, "team", "a-b")  # type: ignore[arg-type]
    assert access.delete_tokenreview_binding(kube, "team-a", "b")  # type: ignore[arg-type]


def test_a_long_binding_name_is_shortened_with_a_digest() -> None:
    short = builders.tokenreview_binding_name("ns", "agent")
    assert short == "gatehouse-tokenreview-ns-agent"
    long_a, long_b = (builders.tokenreview_binding_name("ns", "x" * 250 + tail) for tail in ("a", "b"))
    assert len(long_a) <= 253 and len(long_b) <= 253 and long_a != long_b


def test_settings_and_the_trust_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    assert OperatorConfig.from_env({}) == OperatorConfig()
    assert OperatorConfig().admission_policy == "gatehouse-toolapproval-decision"
    assert OperatorConfig().tokenreview_cluster_role == "gatehouse-tokenreview"
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
