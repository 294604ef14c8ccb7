"""Every runtime pod the operator builds meets the ``restricted`` Pod Security profile (tests/support/pod_security.py):
each golden case, each kind of state, and overrides that stay within the profile. The checker itself is shown to
catch a break of every one of its controls, so a pass means something."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent_runtime.contract.resources import Agent, ModelConfig
from agent_runtime.contract.translator import translate
from gatehouse_operator import builders, hardening
from tests.support.pod_security import BASELINE, RESTRICTED, violations

CASES = Path(__file__).resolve().parents[1] / "testdata" / "operator"
MODELS = {"m": ModelConfig.model_validate({"kind": "ModelConfig", "metadata": {"name": "m"},
                                           "spec": {"provider": "Scripted", "model": "s"}})}


def _deployment(**spec: Any) -> dict[str, Any]:
    agent = Agent.model_validate({"kind": "Agent", "metadata": {"name": "a", "namespace": "ns"},
                                  "spec": {"modelConfig": "m", **spec}})
    config = translate(agent, MODELS, {}, in_cluster=True)
    return builders.build_deployment(agent, config, builders.BuildInputs(runtime_image="gatehouse:test"))


@pytest.mark.parametrize("case", sorted(p.name for p in CASES.iterdir() if (p / "expected.json").exists()))
def test_every_golden_deployment_is_restricted(case: str) -> None:
    children = json.loads((CASES / case / "expected.json").read_text())
    (deployment,) = [c for c in children if c["kind"] == "Deployment"]
    assert violations(deployment) == []


VARIANTS: dict[str, dict[str, Any]] = {
    "sqlite (default)": {},
    "sqlite on a named class": {"state": {"sqlite": {"size": "5Gi", "storageClassName": "fast", "deleteClaimWithAgent": True}}},
    "postgres, three replicas": {"state": {"postgres": {"urlSecretRef": {"name": "db"}}}, "deployment": {"replicas": 3}},
    "ephemeral": {"state": {"ephemeral": True}},
    "another uid and group for another image": {
        "deployment": {"podSecurityContext": {"runAsUser": 4242, "runAsGroup": 4242, "fsGroup": 4242}}},
    "a Localhost seccomp profile": {
        "deployment": {"podSecurityContext": {"seccompProfile": {"type": "Localhost", "localhostProfile": "p.json"}}}},
    "NET_BIND_SERVICE added": {"deployment": {"securityContext": {"capabilities": {"add": ["NET_BIND_SERVICE"]}}}},
    "AppArmor and SELinux within bounds": {"deployment": {
        "podSecurityContext": {"appArmorProfile": {"type": "RuntimeDefault"}, "seLinuxOptions": {"level": "s0:c1,c2"}},
        "securityContext": {"seLinuxOptions": {"type": "container_t"}}}},
    "a safe sysctl": {
        "deployment": {"podSecurityContext": {"sysctls": [{"name": "net.ipv4.tcp_keepalive_time", "value": "60"}]}}},
    "a writable root filesystem and own resources": {"deployment": {
        "securityContext": {"readOnlyRootFilesystem": False}, "resources": {"limits": {"cpu": "2", "memory": "4Gi"}}}},
}


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_every_kind_of_state_and_compliant_overrides_stay_restricted(name: str) -> None:
    assert violations(_deployment(**VARIANTS[name])) == []


def test_overrides_merge_over_the_defaults_field_by_field() -> None:
    pod = _deployment(**VARIANTS["NET_BIND_SERVICE added"])["spec"]["template"]["spec"]
    assert pod["containers"][0]["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}
    pod = _deployment(**VARIANTS["another uid and group for another image"])["spec"]["template"]["spec"]
    assert pod["securityContext"] == {**hardening.POD_SECURITY_CONTEXT, "runAsUser": 4242, "runAsGroup": 4242, "fsGroup": 4242}
    assert _deployment()["spec"]["template"]["spec"]["containers"][0]["resources"] == hardening.RESOURCES


def test_every_pod_has_a_writable_tmp_and_state_beside_a_read_only_root() -> None:
    for spec in (VARIANTS["sqlite (default)"], VARIANTS["ephemeral"]):
        (container,) = _deployment(**spec)["spec"]["template"]["spec"]["containers"]
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert {m["mountPath"] for m in container["volumeMounts"] if not m.get("readOnly")} == {"/tmp", "/var/lib/gatehouse"}
        assert {"startupProbe", "readinessProbe", "livenessProbe"} <= set(container)


def test_the_default_user_is_the_image_s_own() -> None:
    """runAsUser/runAsGroup/fsGroup name the Dockerfile's numeric USER: the image's files and the pod agree."""
    dockerfile = (Path(__file__).resolve().parents[2] / "Dockerfile").read_text()
    (user,) = [line.split()[1] for line in dockerfile.splitlines() if line.startswith("USER ")]
    assert user == f"{hardening.RUNTIME_UID}:{hardening.RUNTIME_UID}"


def _container(deployment: dict[str, Any]) -> dict[str, Any]:
    return deployment["spec"]["template"]["spec"]["containers"][0]


def _pod(deployment: dict[str, Any]) -> dict[str, Any]:
    return deployment["spec"]["template"]["spec"]


def _set(path: Callable[[dict[str, Any]], dict[str, Any]], **fields: Any) -> Callable[[dict[str, Any]], None]:
    return lambda d: path(d).update(fields)


def _container_sc(d: dict[str, Any]) -> dict[str, Any]:
    return _container(d)["securityContext"]


def _pod_sc(d: dict[str, Any]) -> dict[str, Any]:
    return _pod(d)["securityContext"]


def _annotations(d: dict[str, Any]) -> dict[str, Any]:
    return d["spec"]["template"]["metadata"]["annotations"]


def _add_volume(d: dict[str, Any]) -> None:
    _pod(d)["volumes"].append({"name": "host", "hostPath": {"path": "/var/run/docker.sock"}})


def _add_nfs(d: dict[str, Any]) -> None:
    _pod(d)["volumes"].append({"name": "share", "nfs": {"server": "nfs", "path": "/"}})


def _add_bare_init_container(d: dict[str, Any]) -> None:
    _pod(d)["initContainers"] = [{"name": "init", "image": "busybox"}]


# control -> one way to break it (a mutation of a compliant Deployment)
BREAKS: dict[str, list[Callable[[dict[str, Any]], None]]] = {
    # Each break is a pod the API server's own validation accepts (tests/cluster/test_pod_security.py sends them to a
    # real one), so that it is Pod Security that refuses it: a hostProcess pod uses the host's network, a privileged
    # container may escalate, an Unmasked /proc needs a user namespace.
    "hostProcess": [lambda d: (_pod_sc(d).update(windowsOptions={"hostProcess": True}), _pod(d).update(hostNetwork=True))],
    "host namespaces": [_set(_pod, hostNetwork=True), _set(_pod, hostPID=True), _set(_pod, hostIPC=True)],
    "privileged containers": [_set(_container_sc, privileged=True, allowPrivilegeEscalation=True)],
    "capabilities (baseline)": [_set(_container_sc, capabilities={"drop": ["ALL"], "add": ["SYS_ADMIN"]})],
    "hostPath volumes": [_add_volume],
    "host ports": [lambda d: _container(d)["ports"][0].update(hostPort=8080)],
    "AppArmor": [_set(_pod_sc, appArmorProfile={"type": "Unconfined"}),
                 _set(_annotations, **{"container.apparmor.security.beta.kubernetes.io/runtime": "unconfined"})],
    "SELinux": [_set(_container_sc, seLinuxOptions={"type": "spc_t"}), _set(_pod_sc, seLinuxOptions={"user": "system_u"})],
    "/proc mount type": [lambda d: (_container_sc(d).update(procMount="Unmasked"), _pod(d).update(hostUsers=False))],
    "seccomp (baseline)": [_set(_container_sc, seccompProfile={"type": "Unconfined"})],
    "sysctls": [_set(_pod_sc, sysctls=[{"name": "kernel.msgmax", "value": "65536"}])],
    "volume types": [_add_nfs, _add_volume],
    "privilege escalation": [_set(_container_sc, allowPrivilegeEscalation=True),
                             lambda d: _container_sc(d).pop("allowPrivilegeEscalation")],
    "running as non-root": [_set(_container_sc, runAsNonRoot=False), lambda d: _pod_sc(d).pop("runAsNonRoot")],
    "running as non-root user": [_set(_pod_sc, runAsUser=0), _set(_container_sc, runAsUser=0)],
    "seccomp (restricted)": [lambda d: _pod_sc(d).pop("seccompProfile"), _set(_pod_sc, seccompProfile={"type": "Unconfined"})],
    "capabilities (restricted)": [_set(_container_sc, capabilities={"drop": ["NET_RAW"]}),
                                  _set(_container_sc, capabilities={"drop": ["ALL"], "add": ["CHOWN"]}),
                                  _add_bare_init_container],
}


def test_every_control_has_a_way_to_break_it() -> None:
    assert set(BREAKS) == set(RESTRICTED) and set(BASELINE) < set(RESTRICTED)


@pytest.mark.parametrize(("control", "index"), [(c, i) for c, ways in BREAKS.items() for i in range(len(ways))])
def test_the_checker_catches_each_break(control: str, index: int) -> None:
    deployment = copy.deepcopy(_deployment())
    BREAKS[control][index](deployment)
    found = violations(deployment)
    assert any(v.startswith(f"{control}: ") for v in found), found


def test_baseline_lets_through_what_only_restricted_refuses() -> None:
    deployment = _deployment()
    _set(_container_sc, allowPrivilegeEscalation=True, capabilities={"add": ["CHOWN"]})(deployment)
    _pod_sc(deployment).pop("runAsNonRoot")
    assert violations(deployment, "baseline") == []
    assert sorted({v.split(":")[0] for v in violations(deployment)}) == [
        "capabilities (restricted)", "privilege escalation", "running as non-root"]


def test_an_override_that_leaves_the_profile_is_caught() -> None:
    """The operator applies what the Agent asks for; a namespace enforcing ``restricted`` would refuse such pods."""
    found = violations(_deployment(deployment={"securityContext": {"privileged": True, "allowPrivilegeEscalation": True},
                                               "podSecurityContext": {"runAsUser": 0}}))
    assert {v.split(":")[0] for v in found} == {"privileged containers", "privilege escalation", "running as non-root user"}
