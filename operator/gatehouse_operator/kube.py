"""A small dict-in, dict-out facade over the ``kubernetes`` client for the kinds the operator touches.

The generated client returns typed models; the operator works with plain dicts (what the builders render
and what is compared), so every call asks for the raw response (``_preload_content=False``). Patches are
always JSON merge patches. ``get`` answers ``None`` for a missing object instead of raising.

Handlers are synchronous (kopf runs them in worker threads), so the blocking client is fine here.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import kubernetes
from kubernetes.client.exceptions import ApiException

from agent_runtime.resources import GROUP, VERSION

__all__ = ["ApiException", "ChildrenApi", "connect"]

MERGE_PATCH = "application/merge-patch+json"


@dataclass(frozen=True)
class _Verbs:
    read: Callable[..., Any]
    create: Callable[..., Any]
    patch: Callable[..., Any]


def connect() -> kubernetes.client.ApiClient:
    """In-cluster credentials when running in a pod, else the kubeconfig (``$KUBECONFIG`` or ``~/.kube/config``)."""
    configuration = kubernetes.client.Configuration()
    try:
        kubernetes.config.load_incluster_config(client_configuration=configuration)
    except kubernetes.config.ConfigException:
        kubernetes.config.load_kube_config(client_configuration=configuration)
    return kubernetes.client.ApiClient(configuration)


class ChildrenApi:
    """get/create/patch by kind for the operator's children, plus reading the Agent and patching its status."""

    def __init__(self, api_client: kubernetes.client.ApiClient) -> None:
        core = kubernetes.client.CoreV1Api(api_client)
        apps = kubernetes.client.AppsV1Api(api_client)
        rbac = kubernetes.client.RbacAuthorizationV1Api(api_client)
        self._custom = kubernetes.client.CustomObjectsApi(api_client)
        self._verbs: dict[str, _Verbs] = {
            "Secret": _Verbs(core.read_namespaced_secret, core.create_namespaced_secret, core.patch_namespaced_secret),
            "ServiceAccount": _Verbs(
                core.read_namespaced_service_account,
                core.create_namespaced_service_account,
                core.patch_namespaced_service_account,
            ),
            "Service": _Verbs(core.read_namespaced_service, core.create_namespaced_service, core.patch_namespaced_service),
            "Deployment": _Verbs(
                apps.read_namespaced_deployment, apps.create_namespaced_deployment, apps.patch_namespaced_deployment
            ),
            "Role": _Verbs(rbac.read_namespaced_role, rbac.create_namespaced_role, rbac.patch_namespaced_role),
            "RoleBinding": _Verbs(
                rbac.read_namespaced_role_binding,
                rbac.create_namespaced_role_binding,
                rbac.patch_namespaced_role_binding,
            ),
        }

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return _json(self._verbs[kind].read(name, namespace, _preload_content=False))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        return _json(self._verbs[obj["kind"]].create(meta["namespace"], obj, _preload_content=False))

    def patch(self, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        verbs = self._verbs[obj["kind"]]
        return _json(verbs.patch(meta["name"], meta["namespace"], obj, _preload_content=False, _content_type=MERGE_PATCH))

    def get_agent(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            raw = self._custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "agents", name, _preload_content=False)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return _json(raw)

    def patch_agent_status(self, namespace: str, name: str, status: dict[str, Any]) -> dict[str, Any]:
        raw = self._custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, namespace, "agents", name, {"status": status},
            _preload_content=False, _content_type=MERGE_PATCH,
        )
        return _json(raw)


def _json(response: Any) -> dict[str, Any]:
    return json.loads(response.data)
