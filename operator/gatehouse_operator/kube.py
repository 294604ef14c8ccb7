"""A small dict-in, dict-out facade over the ``kubernetes`` client for the kinds the operator touches.

The generated client returns typed models; the operator works with plain dicts (what the builders render
and what is compared), so every call asks for the raw response (``_preload_content=False``). Patches are
always JSON merge patches. ``get`` answers ``None`` for a missing object instead of raising, and ``delete``
answers ``False``. Cluster-scoped kinds (the runtime's TokenReview ClusterRoleBinding, the admission policy and
its bindings, which are only read) take ``namespace=None``.

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
    create: Callable[..., Any] | None = None
    patch: Callable[..., Any] | None = None
    delete: Callable[..., Any] | None = None
    namespaced: bool = True

    def args(self, namespace: str | None, name: str | None = None) -> tuple[str, ...]:
        """The positional arguments before the body: (name,) namespace, as the generated client orders them."""
        scope = (namespace or "",) if self.namespaced else ()
        return ((name,) if name is not None else ()) + scope


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
        admission = kubernetes.client.AdmissionregistrationV1Api(api_client)
        self._custom = kubernetes.client.CustomObjectsApi(api_client)
        self._verbs: dict[str, _Verbs] = {
            "Secret": _Verbs(core.read_namespaced_secret, core.create_namespaced_secret, core.patch_namespaced_secret),
            "ServiceAccount": _Verbs(
                core.read_namespaced_service_account,
                core.create_namespaced_service_account,
                core.patch_namespaced_service_account,
            ),
            "Service": _Verbs(core.read_namespaced_service, core.create_namespaced_service, core.patch_namespaced_service),
            "PersistentVolumeClaim": _Verbs(
                core.read_namespaced_persistent_volume_claim,
                core.create_namespaced_persistent_volume_claim,
                core.patch_namespaced_persistent_volume_claim,
            ),
            "Deployment": _Verbs(
                apps.read_namespaced_deployment, apps.create_namespaced_deployment, apps.patch_namespaced_deployment
            ),
            "Role": _Verbs(rbac.read_namespaced_role, rbac.create_namespaced_role, rbac.patch_namespaced_role),
            "RoleBinding": _Verbs(
                rbac.read_namespaced_role_binding,
                rbac.create_namespaced_role_binding,
                rbac.patch_namespaced_role_binding,
            ),
            "ClusterRoleBinding": _Verbs(
                rbac.read_cluster_role_binding,
                rbac.create_cluster_role_binding,
                rbac.patch_cluster_role_binding,
                rbac.delete_cluster_role_binding,
                namespaced=False,
            ),
            "ValidatingAdmissionPolicy": _Verbs(admission.read_validating_admission_policy, namespaced=False),
            "ValidatingAdmissionPolicyBinding": _Verbs(
                admission.read_validating_admission_policy_binding, namespaced=False
            ),
        }
        self._list_policy_bindings = admission.list_validating_admission_policy_binding

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        verbs = self._verbs[kind]
        try:
            return _json(verbs.read(*verbs.args(namespace, name), _preload_content=False))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        verbs = self._verbs[obj["kind"]]
        assert verbs.create is not None, obj["kind"]
        return _json(verbs.create(*verbs.args(obj["metadata"].get("namespace")), obj, _preload_content=False))

    def patch(self, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        verbs = self._verbs[obj["kind"]]
        assert verbs.patch is not None, obj["kind"]
        args = verbs.args(meta.get("namespace"), meta["name"])
        return _json(verbs.patch(*args, obj, _preload_content=False, _content_type=MERGE_PATCH))

    def delete(self, kind: str, namespace: str | None, name: str) -> bool:
        """Delete one object; ``False`` if it was already gone."""
        verbs = self._verbs[kind]
        assert verbs.delete is not None, kind
        try:
            verbs.delete(*verbs.args(namespace, name), _preload_content=False)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def list_admission_policy_bindings(self) -> list[dict[str, Any]]:
        """Every ValidatingAdmissionPolicyBinding in the cluster."""
        items: list[dict[str, Any]] = _json(self._list_policy_bindings(_preload_content=False)).get("items") or []
        return items

    def get_agent(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            raw = self._custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "agents", name, _preload_content=False)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return _json(raw)

    def patch_agent_status(
        self, namespace: str, name: str, status: dict[str, Any], resource_version: str | None = None
    ) -> dict[str, Any]:
        """Merge ``status`` into the Agent's; with ``resource_version``, only if nobody wrote in between (else 409)."""
        body: dict[str, Any] = {"status": status}
        if resource_version:
            body["metadata"] = {"resourceVersion": resource_version}
        raw = self._custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, namespace, "agents", name, body, _preload_content=False, _content_type=MERGE_PATCH,
        )
        return _json(raw)


def _json(response: Any) -> dict[str, Any]:
    return json.loads(response.data)
