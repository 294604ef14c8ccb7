"""The stand-in's pure parts: image configuration, environment, hosts files, volume layout (no root needed)."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest

from tests.support.kubelet import envs, fixture, hosts, images, volumes
from tests.support.kubelet.probes import Probe

DOCKERFILE_LINES = [line.strip() for line in images.DOCKERFILE.read_text().splitlines()]


def test_the_gatehouse_image_is_read_from_the_dockerfile() -> None:
    image = images.builtin_images()["gatehouse"]
    entrypoint = next(line for line in DOCKERFILE_LINES if line.startswith("ENTRYPOINT"))
    cmd = next(line for line in DOCKERFILE_LINES if line.startswith("CMD"))
    assert list(image.entrypoint) == json.loads(entrypoint.partition(" ")[2])
    assert list(image.cmd) == json.loads(cmd.partition(" ")[2])
    assert image.workdir == "/home/gatehouse" and image.home == "/home/gatehouse" and image.user == "10001:10001"
    assert image.env["PYTHONUNBUFFERED"] == "1" and image.env["LANG"] == "C.UTF-8"  # its own ENV over python:3.11-slim's


def test_image_refs_resolve_by_repository_name() -> None:
    known = images.builtin_images()
    for ref in ("ghcr.io/gatehouse-dev/gatehouse:0.1.0", "gatehouse:dev", "gatehouse@sha256:abc", "gatehouse"):
        assert images.resolve(ref, known) is known["gatehouse"]
    assert images.resolve("python:3.11-slim", known).cmd == ("python3",)
    with pytest.raises(images.UnknownImage):
        images.resolve("nginx:1", known)


def test_command_and_args_follow_kubernetes_rules() -> None:
    image = images.Image(entrypoint=("gatehouse-runtime",), cmd=("serve", "--config", "/etc/x"))
    assert images.argv({}, image) == ["gatehouse-runtime", "serve", "--config", "/etc/x"]
    assert images.argv({"args": ["version"]}, image) == ["gatehouse-runtime", "version"]
    assert images.argv({"command": ["kopf"]}, image) == ["kopf"]  # command drops CMD too
    assert images.argv({"command": ["kopf"], "args": ["run"]}, image) == ["kopf", "run"]


def test_path_puts_the_venv_first() -> None:
    assert images.path_env(Path("/venv/bin")).split(":")[:2] == ["/venv/bin", "/usr/local/sbin"]


def test_expand_follows_kubernetes() -> None:
    env = {"A": "1", "B": "x"}
    assert envs.expand("$(A)-$(B)-$(C)-$$(A)", env) == "1-x-$(C)-$(A)"


def test_container_env_sources_and_order() -> None:
    facts = envs.PodFacts("ns", "pod-1", "uid-1", {"app": "a"}, {}, "sa", "node", "10.0.0.2", "10.0.0.1")
    container = {
        "envFrom": [{"configMapRef": {"name": "cm"}, "prefix": "CM_"}],
        "env": [
            {"name": "SECRET", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
            {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
            {"name": "URL", "value": "http://$(IP):$(CM_PORT)"},
            {"name": "GONE", "valueFrom": {"secretKeyRef": {"name": "missing", "key": "k", "optional": True}}},
        ],
    }
    data = {("secret", "s"): {"k": b"v"}, ("configmap", "cm"): {"PORT": b"8080"}, ("secret", "missing"): None}
    env = envs.container_env(container, facts, {"PATH": "/bin", "KUBERNETES_SERVICE_HOST": "10.0.0.1"}, data)
    assert env == {"PATH": "/bin", "KUBERNETES_SERVICE_HOST": "10.0.0.1", "CM_PORT": "8080", "SECRET": "v",
                   "POD": "pod-1", "IP": "10.0.0.2", "APP": "a", "URL": "http://10.0.0.2:8080"}
    with pytest.raises(envs.MissingKey, match='key "nope" in secret "s"'):
        envs.container_env({"env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "s", "key": "nope"}}}]},
                           facts, {}, data)


def test_hosts_list_ready_pods_behind_each_service() -> None:
    pods = [hosts.Endpoint("default", "web-1", "10.0.0.2", {"app": "web"}, True),
            hosts.Endpoint("default", "web-2", "10.0.0.3", {"app": "web"}, False),
            hosts.Endpoint("other", "web-3", "10.0.0.4", {"app": "web"}, True)]
    services = [{"metadata": {"name": "web", "namespace": "default"}, "spec": {"selector": {"app": "web"}}}]
    endpoints = hosts.service_endpoints(services, pods)
    assert [p.ip for p in endpoints[("default", "web")]] == ["10.0.0.2"]
    text = hosts.render_hosts("10.0.0.9", "me", "default", "10.0.0.1", endpoints)
    assert "10.0.0.2\tweb.default.svc.cluster.local web.default.svc web.default web\n" in text
    assert "10.0.0.1\tkubernetes.default.svc.cluster.local" in text and "10.0.0.9\tme\n" in text
    elsewhere = hosts.render_hosts("10.0.0.9", "me", "other", "10.0.0.1", endpoints)
    assert "web.default\n" in elsewhere  # no short name outside the Service's namespace


def test_hosts_are_rewritten_in_place(tmp_path: Path) -> None:
    path = tmp_path / "hosts"
    assert hosts.write_in_place(path, "one\n")
    inode = os.stat(path).st_ino
    assert hosts.write_in_place(path, "two, longer\n") and not hosts.write_in_place(path, "two, longer\n")
    assert os.stat(path).st_ino == inode and path.read_text() == "two, longer\n"


def test_secret_volume_uses_the_atomic_writer_layout(tmp_path: Path) -> None:
    secret = {"data": {"config.json": base64.b64encode(b"{}").decode(), "other": base64.b64encode(b"x").decode()}}
    volume = {"name": "config", "secret": {"secretName": "s", "items": [{"key": "config.json", "path": "c/config.json"}],
                                           "defaultMode": 0o400}}
    facts = envs.PodFacts("ns", "p")
    path = volumes.write_volume(volume, tmp_path, tmp_path / "pvc", facts, {("secret", "s"): secret}, {})
    assert (path / "c" / "config.json").read_bytes() == b"{}" and not (path / "other").exists()
    assert os.readlink(path / "c") == "..data/c" and os.readlink(path / "..data").startswith("..20")
    assert oct((path / "c" / "config.json").stat().st_mode & 0o777) == oct(0o400)
    with pytest.raises(volumes.MissingObject):
        volumes.write_volume({"name": "x", "secret": {"secretName": "nope"}}, tmp_path, tmp_path, facts, {}, {})


def test_projected_volume_with_token_and_downward_api(tmp_path: Path) -> None:
    volume = {"name": "p", "projected": {"sources": [
        {"serviceAccountToken": {"path": "token"}},
        {"downwardAPI": {"items": [{"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]}},
        {"secret": {"name": "absent", "optional": True}},
    ]}}
    tokens = {volumes.TokenProjection(None): "tok"}
    path = volumes.write_volume(volume, tmp_path, tmp_path, envs.PodFacts("ns", "pod-7"), {("secret", "absent"): None},
                                tokens)
    assert (path / "token").read_text() == "tok" and (path / "name").read_text() == "pod-7"


def test_each_token_projection_gets_the_token_asked_for_its_audience_and_lifetime(tmp_path: Path) -> None:
    spec = {"volumes": [
        {"name": "a2a", "projected": {"sources": [
            {"serviceAccountToken": {"audience": "gatehouse.dev/a2a", "expirationSeconds": 600, "path": "token"}},
            {"serviceAccountToken": {"path": "api-token"}}]}},
        {"name": "again", "projected": {"sources": [
            {"serviceAccountToken": {"audience": "gatehouse.dev/a2a", "expirationSeconds": 600, "path": "t"}}]}}]}
    a2a, api = volumes.TokenProjection("gatehouse.dev/a2a", 600), volumes.TokenProjection(None, 3600)
    assert volumes.token_projections(spec) == [a2a, api]
    facts = envs.PodFacts("ns", "p")
    path = volumes.write_volume(spec["volumes"][0], tmp_path, tmp_path, facts, {}, {a2a: "for-agents", api: "for-api"})
    assert (path / "token").read_text() == "for-agents" and (path / "api-token").read_text() == "for-api"
    with pytest.raises(volumes.MissingObject):  # never another projection's token in its place
        volumes.write_volume(spec["volumes"][1], tmp_path, tmp_path, facts, {}, {api: "for-api"})


def test_a_refreshed_token_is_swapped_in_place(tmp_path: Path) -> None:
    """A container holds the volume's directory (a bind mount): a refresh must change what it reads there, not make
    a new directory, and leave no older payload behind."""
    volume = {"name": "a2a", "projected": {"sources": [{"serviceAccountToken": {"audience": "x", "path": "token"}}]}}
    projection, facts = volumes.TokenProjection("x"), envs.PodFacts("ns", "p")
    path = volumes.write_volume(volume, tmp_path, tmp_path, facts, {}, {projection: "first"})
    inode = os.stat(path).st_ino
    assert volumes.write_volume(volume, tmp_path, tmp_path, facts, {}, {projection: "second"}) == path
    assert os.stat(path).st_ino == inode and (path / "token").read_text() == "second"
    assert sorted(p.name for p in path.iterdir() if p.name.startswith("..")) == sorted(["..data", os.readlink(path / "..data")])


def test_claims_are_one_directory_per_claim(tmp_path: Path) -> None:
    facts = envs.PodFacts("ns", "p")
    a = volumes.write_volume({"name": "d", "persistentVolumeClaim": {"claimName": "c"}}, tmp_path / "pod1", tmp_path / "pvc",
                             facts, {}, {})
    b = volumes.write_volume({"name": "e", "persistentVolumeClaim": {"claimName": "c"}}, tmp_path / "pod2", tmp_path / "pvc",
                             facts, {}, {})
    assert a == b == tmp_path / "pvc" / "ns" / "c"


def test_references_collect_what_a_pod_needs() -> None:
    spec = {"volumes": [{"name": "a", "secret": {"secretName": "s1"}},
                        {"name": "b", "configMap": {"name": "c1", "optional": True}},
                        {"name": "c", "persistentVolumeClaim": {"claimName": "data"}}],
            "containers": [{"name": "x", "env": [{"name": "E", "valueFrom": {"secretKeyRef": {"name": "s2", "key": "k"}}}]}]}
    refs = volumes.references(spec)
    assert refs.secrets == {"s1": False, "s2": False} and refs.configmaps == {"c1": True} and refs.claims == ["data"]


def test_readiness_probes_poll_faster_with_the_same_window() -> None:
    probe = Probe.parse({"httpGet": {"path": "/readyz", "port": 8080}, "periodSeconds": 5}, period_cap=0.25)
    assert (probe.period, probe.failure_threshold) == (0.25, 60)
    liveness = Probe.parse({"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 10, "failureThreshold": 3})
    assert (liveness.period, liveness.failure_threshold) == (10.0, 3)
    probe.start(0.0)
    assert probe.record(False, 0.0) is None and probe.record(True, 0.25) == "success"


def test_missing_infrastructure_skips_but_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fixture, "unavailable_reason", lambda: "the kubelet stand-in needs root")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="needs root"):
        fixture.require()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"needs root.*CI must run"):
        fixture.require()


def test_the_package_s_public_names() -> None:
    import tests.support.kubelet as package

    assert package.__all__ == ["Image", "Kubelet", "Node", "PodEvent", "PodInfo", "Settings", "kubelet", "require",
                               "run_kubelet", "unavailable_reason"]
    assert all(hasattr(package, name) for name in package.__all__) and package.Kubelet is package.Node
