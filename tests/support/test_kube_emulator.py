"""The emulated API server (tests/support/kube_emulator.py): each gap of kmock 0.8 it closes, over real HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import kubernetes
import pytest

from tests.support.kube_server import RunningEmulator, serve, write_kubeconfig
from tests.support.kube_wire import json_path

pytestmark = pytest.mark.e2e

AGENT = {
    "apiVersion": "gatehouse.dev/v1alpha1",
    "kind": "Agent",
    "metadata": {"name": "a", "labels": {"team": "x"}},
    "spec": {"modelConfig": "m"},
}


@pytest.fixture
def api(tmp_path: Path) -> Iterator[tuple[RunningEmulator, kubernetes.client.ApiClient]]:
    with serve() as running:
        configuration = kubernetes.client.Configuration()
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", running.url)
        kubernetes.config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
        with kubernetes.client.ApiClient(configuration) as client:
            yield running, client


def test_namespaces_and_object_metadata(api: tuple[RunningEmulator, kubernetes.client.ApiClient]) -> None:
    _, client = api
    core = kubernetes.client.CoreV1Api(client)
    assert [n.metadata.name for n in core.list_namespace().items] == ["default"]
    core.create_namespace({"metadata": {"name": "team-a"}})
    assert core.read_namespace("team-a").metadata.uid
    custom = kubernetes.client.CustomObjectsApi(client)
    created = custom.create_namespaced_custom_object("gatehouse.dev", "v1alpha1", "team-a", "agents", AGENT)
    meta = created["metadata"]
    assert meta["uid"] and meta["resourceVersion"] and meta["creationTimestamp"] and meta["generation"] == 1
    patched = custom.patch_namespaced_custom_object(
        "gatehouse.dev", "v1alpha1", "team-a", "agents", "a", {"metadata": {"labels": {"x": "y"}}}
    )
    assert patched["metadata"]["generation"] == 1  # metadata changes do not bump the generation
    spec = {"spec": {"systemMessage": "hi"}}
    patched = custom.patch_namespaced_custom_object("gatehouse.dev", "v1alpha1", "team-a", "agents", "a", spec)
    assert patched["metadata"]["generation"] == 2
    status = custom.patch_namespaced_custom_object_status(
        "gatehouse.dev", "v1alpha1", "team-a", "agents", "a",
        {"status": {"configHash": "h"}, "spec": {"systemMessage": "ignored"}},
    )
    assert status["status"] == {"configHash": "h"} and status["spec"]["systemMessage"] == "hi"  # status subresource isolation
    listed = custom.list_namespaced_custom_object("gatehouse.dev", "v1alpha1", "team-a", "agents")
    assert listed["kind"] == "AgentList" and listed["apiVersion"] == "gatehouse.dev/v1alpha1"


def test_json_patch_test_and_stale_resource_versions_are_refused(
    api: tuple[RunningEmulator, kubernetes.client.ApiClient],
) -> None:
    _, client = api
    custom = kubernetes.client.CustomObjectsApi(client)
    custom.create_namespaced_custom_object("gatehouse.dev", "v1alpha1", "default", "agents", AGENT)
    stale = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "0"},
        {"op": "add", "path": "/metadata/finalizers", "value": ["f"]},
    ]
    with pytest.raises(kubernetes.client.ApiException) as exc:
        custom.patch_namespaced_custom_object(
            "gatehouse.dev", "v1alpha1", "default", "agents", "a", stale, _content_type="application/json-patch+json"
        )
    assert exc.value.status == 422
    with pytest.raises(kubernetes.client.ApiException) as exc:
        custom.patch_namespaced_custom_object(
            "gatehouse.dev", "v1alpha1", "default", "agents", "a", {"metadata": {"resourceVersion": "1"}, "spec": {}}
        )
    assert exc.value.status == 409


def test_invalid_custom_resources_get_422_with_the_crd_message(
    api: tuple[RunningEmulator, kubernetes.client.ApiClient],
) -> None:
    _, client = api
    custom = kubernetes.client.CustomObjectsApi(client)
    bad = {**AGENT, "spec": {"modelConfig": "m", "approval": {"rules": [{"tool": "t", "when": {"arg": "p"}}]}}}
    with pytest.raises(kubernetes.client.ApiException) as exc:
        custom.create_namespaced_custom_object("gatehouse.dev", "v1alpha1", "default", "agents", bad)
    assert exc.value.status == 422 and "exactly one of glob or regex" in json.loads(exc.value.body)["message"]


def test_watch_resumes_from_a_resource_version_and_honours_selectors(
    api: tuple[RunningEmulator, kubernetes.client.ApiClient],
) -> None:
    _, client = api
    core = kubernetes.client.CoreV1Api(client)
    listed = core.list_namespaced_config_map("default")
    for name, team in (("one", "x"), ("two", "y"), ("three", "x")):
        core.create_namespaced_config_map("default", {"metadata": {"name": name, "labels": {"team": team}}})
    seen: list[tuple[str, str]] = []
    watch = kubernetes.watch.Watch()
    stream = watch.stream(core.list_namespaced_config_map, "default", resource_version=listed.metadata.resource_version,
                          label_selector="team=x", timeout_seconds=2)
    for event in stream:
        seen.append((event["type"], event["object"].metadata.name))
        if len(seen) == 2:
            watch.stop()
    assert seen == [("ADDED", "one"), ("ADDED", "three")]  # created before the watch began, after the list
    by_field = core.list_namespaced_config_map("default", field_selector="metadata.name=two").items
    assert [c.metadata.name for c in by_field] == ["two"]


def test_finalizers_and_owner_garbage_collection(api: tuple[RunningEmulator, kubernetes.client.ApiClient]) -> None:
    _, client = api
    custom = kubernetes.client.CustomObjectsApi(client)
    core = kubernetes.client.CoreV1Api(client)
    owner = custom.create_namespaced_custom_object(
        "gatehouse.dev", "v1alpha1", "default", "agents", {**AGENT, "metadata": {"name": "a", "finalizers": ["x/y"]}}
    )
    ref = {"apiVersion": "gatehouse.dev/v1alpha1", "kind": "Agent", "name": "a", "uid": owner["metadata"]["uid"]}
    core.create_namespaced_service_account("default", {"metadata": {"name": "child", "ownerReferences": [ref]}})
    custom.delete_namespaced_custom_object("gatehouse.dev", "v1alpha1", "default", "agents", "a")
    deleting = custom.get_namespaced_custom_object("gatehouse.dev", "v1alpha1", "default", "agents", "a")
    assert deleting["metadata"]["deletionTimestamp"]
    assert core.read_namespaced_service_account("child", "default")  # still there: the owner is not gone yet
    release = {"metadata": {"finalizers": None}}
    custom.patch_namespaced_custom_object("gatehouse.dev", "v1alpha1", "default", "agents", "a", release)
    for read in (lambda: custom.get_namespaced_custom_object("gatehouse.dev", "v1alpha1", "default", "agents", "a"),
                 lambda: core.read_namespaced_service_account("child", "default")):
        with pytest.raises(kubernetes.client.ApiException) as exc:
            read()
        assert exc.value.status == 404


def test_writes_are_logged_and_no_op_patches_change_nothing(
    api: tuple[RunningEmulator, kubernetes.client.ApiClient],
) -> None:
    running, client = api
    core = kubernetes.client.CoreV1Api(client)
    created = core.create_namespaced_config_map("default", {"metadata": {"name": "c"}, "data": {"k": "v"}})
    mark = running.emulator.request_count
    same = core.patch_namespaced_config_map("c", "default", {"data": {"k": "v"}})
    assert same.metadata.resource_version == created.metadata.resource_version
    assert [(r.method.value, str(r.url.path)) for r in running.emulator.writes(mark)] == [
        ("PATCH", "/api/v1/namespaces/default/configmaps/c")
    ]


def test_json_path_subset() -> None:
    obj = {"status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "Accepted", "status": "False"}]}}
    assert json_path(obj, '.status.conditions[?(@.type=="Accepted")].status') == ["False"]
    assert json_path(obj, ".status.conditions[0].type") == ["Ready"]
    assert json_path(obj, ".spec.missing") == []
