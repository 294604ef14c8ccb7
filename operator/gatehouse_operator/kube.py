"""A small dict-in, dict-out facade over the ``kubernetes`` client for the kinds the operator touches; the operator's
one door to that client.

The client is only partly annotated, so every call into it is made here and what it answers is cast here, once
(mypy lets only this module call its unannotated functions: the override in ``pyproject.toml``); the operator's other
modules see typed functions: :class:`ChildrenApi`, :func:`quantity` (a claim's size), and the leader election over a
Lease (:class:`LeaseLock`, :func:`leader_elector`, :func:`release_lease`) that :mod:`gatehouse_operator.leadership`
runs. (The runtime's own door is :mod:`agent_runtime.kube.sdk`; the operator imports only the runtime's pure contract.)

The operator works with plain dicts (what the builders render and what is compared): each call is one request
through the client's transport, JSON in and out, without the generated client's typed models. Patches are
always JSON merge patches. ``get`` answers ``None`` for a missing object instead of raising, and ``delete``
answers ``False``. Cluster-scoped kinds (the runtime's TokenReview ClusterRoleBinding, the admission policy and
its bindings, which are only read) take ``namespace=None``. The lists: the admission policy's bindings, the operator's
TokenReview bindings (by label, to collect those of deleted Agents), and a namespace's ToolApprovals (only when an
Agent's state backend is about to switch).

Handlers are synchronous (kopf runs them in worker threads), so the blocking client is fine here.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, cast
from urllib.parse import quote

import kubernetes
from kubernetes.client import ApiClient, CoordinationV1Api
from kubernetes.client.exceptions import ApiException
from kubernetes.leaderelection import electionconfig, leaderelection
from kubernetes.leaderelection.resourcelock import leaselock
from kubernetes.utils import parse_quantity

from agent_runtime.contract.resources import GROUP, VERSION

__all__ = [
    "ApiClient", "ApiException", "ChildrenApi", "LeaseLock", "connect", "leader_elector", "quantity", "release_lease",
]

MERGE_PATCH = "application/merge-patch+json"


@dataclass(frozen=True)
class _Kind:
    """Where the API serves a kind: ``/api/v1`` or ``/apis/<group>/<version>``, its plural, whether it is namespaced,
    and the verbs the operator uses on it."""

    prefix: str
    plural: str
    namespaced: bool = True
    writable: bool = True
    deletable: bool = False

    def path(self, namespace: str | None, name: str | None = None) -> str:
        scope = f"/namespaces/{quote(namespace or '', safe='')}" if self.namespaced else ""
        return f"{self.prefix}{scope}/{self.plural}" + (f"/{quote(name, safe='')}" if name is not None else "")


_RBAC = "/apis/rbac.authorization.k8s.io/v1"
_ADMISSION = "/apis/admissionregistration.k8s.io/v1"
_KINDS: dict[str, _Kind] = {
    "Secret": _Kind("/api/v1", "secrets"),
    "ServiceAccount": _Kind("/api/v1", "serviceaccounts"),
    "Service": _Kind("/api/v1", "services"),
    "PersistentVolumeClaim": _Kind("/api/v1", "persistentvolumeclaims"),
    "Deployment": _Kind("/apis/apps/v1", "deployments"),
    "NetworkPolicy": _Kind("/apis/networking.k8s.io/v1", "networkpolicies"),  # only with the chart's networkPolicy
    "Role": _Kind(_RBAC, "roles"),
    "RoleBinding": _Kind(_RBAC, "rolebindings"),
    "ClusterRoleBinding": _Kind(_RBAC, "clusterrolebindings", namespaced=False, deletable=True),
    "Event": _Kind("/api/v1", "events"),  # created only, on an Agent
    "ValidatingAdmissionPolicy": _Kind(_ADMISSION, "validatingadmissionpolicies", namespaced=False, writable=False),
    "ValidatingAdmissionPolicyBinding": _Kind(
        _ADMISSION, "validatingadmissionpolicybindings", namespaced=False, writable=False
    ),
}
_AGENTS = _Kind(f"/apis/{GROUP}/{VERSION}", "agents")
_OWNERS = {"agents": _AGENTS, "mcpgateways": _Kind(f"/apis/{GROUP}/{VERSION}", "mcpgateways")}  # what owns a runtime
_TOOL_APPROVALS = _Kind(f"/apis/{GROUP}/{VERSION}", "toolapprovals", writable=False)


def connect() -> kubernetes.client.ApiClient:
    """In-cluster credentials when running in a pod, else the kubeconfig (``$KUBECONFIG`` or ``~/.kube/config``)."""
    configuration = kubernetes.client.Configuration()
    try:
        kubernetes.config.load_incluster_config(client_configuration=configuration)
    except kubernetes.config.ConfigException:
        kubernetes.config.load_kube_config(client_configuration=configuration)
    return kubernetes.client.ApiClient(configuration)


class ChildrenApi:
    """get/create/patch by kind for the operator's children, plus reading the Agent and patching its status.

    Requests go through the client's transport (configuration, credentials, User-Agent, TLS) but not its generated
    per-kind methods: those validate a plain-dict body into the kind's model and dump it again on every call, which
    was a seventh of the operator's CPU with thousands of Agents reconciled at once. Non-2xx answers raise
    :class:`ApiException`, as the generated methods do.
    """

    def __init__(self, api_client: kubernetes.client.ApiClient) -> None:
        self._client = api_client

    def _send(self, method: str, path: str, body: dict[str, Any] | None = None,
              content_type: str = "application/json", query: list[tuple[str, str]] | None = None) -> Any:
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        request = self._client.param_serialize(method=method, resource_path=path, header_params=headers, body=body,
                                               query_params=query, auth_settings=["BearerToken"])
        response = self._client.call_api(*request)
        data = response.read()
        if not 200 <= response.status <= 299:
            raise ApiException.from_response(http_resp=response, body=None, data=None)
        return json.loads(data or b"null")

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = self._send("GET", _KINDS[kind].path(namespace, name))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return found

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        kind = _KINDS[obj["kind"]]
        assert kind.writable, obj["kind"]
        created: dict[str, Any] = self._send("POST", kind.path(obj["metadata"].get("namespace")), obj)
        return created

    def patch(self, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        kind = _KINDS[obj["kind"]]
        assert kind.writable, obj["kind"]
        patched: dict[str, Any] = self._send("PATCH", kind.path(meta.get("namespace"), meta["name"]), obj, MERGE_PATCH)
        return patched

    def delete(self, kind: str, namespace: str | None, name: str) -> bool:
        """Delete one object; ``False`` if it was already gone."""
        assert _KINDS[kind].deletable, kind
        try:
            self._send("DELETE", _KINDS[kind].path(namespace, name))
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def list_cluster_role_bindings(self, label_selector: str) -> list[dict[str, Any]]:
        """The ClusterRoleBindings that match ``label_selector``, across the cluster."""
        found = self._send("GET", _KINDS["ClusterRoleBinding"].path(None), query=[("labelSelector", label_selector)])
        items: list[dict[str, Any]] = found.get("items") or []
        return items

    def list_admission_policy_bindings(self) -> list[dict[str, Any]]:
        """Every ValidatingAdmissionPolicyBinding in the cluster."""
        items: list[dict[str, Any]] = self._send("GET", _KINDS["ValidatingAdmissionPolicyBinding"].path(None)).get(
            "items") or []
        return items

    def list_tool_approvals(self, namespace: str) -> list[dict[str, Any]]:
        """The ToolApprovals of one namespace (read only when an Agent's state backend is about to switch)."""
        items: list[dict[str, Any]] = self._send("GET", _TOOL_APPROVALS.path(namespace)).get("items") or []
        return items

    def get_agent(self, namespace: str, name: str, plural: str = "agents") -> dict[str, Any] | None:
        """The Agent (``plural`` mcpgateways: the MCPGateway) ``namespace/name``; ``None`` if there is none."""
        try:
            found: dict[str, Any] = self._send("GET", _OWNERS[plural].path(namespace, name))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return found

    def patch_agent_status(
        self, namespace: str, name: str, status: dict[str, Any], resource_version: str | None = None,
        plural: str = "agents",
    ) -> dict[str, Any]:
        """Merge ``status`` into the Agent's; with ``resource_version``, only if nobody wrote in between (else 409)."""
        body: dict[str, Any] = {"status": status}
        if resource_version:
            body["metadata"] = {"resourceVersion": resource_version}
        patched: dict[str, Any] = self._send("PATCH", _OWNERS[plural].path(namespace, name) + "/status", body,
                                             MERGE_PATCH)
        return patched


def quantity(text: str) -> Decimal:
    """A Kubernetes quantity (``1Gi``, ``500M``) as a number, to compare sizes."""
    return cast(Decimal, parse_quantity(text))


class LeaseLock(leaselock.LeaseLock):
    """The client's Lease lock over our API client (it would build one from the global default configuration), which
    writes nothing once :attr:`stepped_down`: the election thread cannot be stopped, only made harmless."""

    def __init__(self, name: str, namespace: str, identity: str, api_client: ApiClient) -> None:
        super().__init__(name, namespace, identity)
        self.api_instance = CoordinationV1Api(api_client)
        self.stepped_down = False

    def create(self, name: str, namespace: str, election_record: Any) -> bool:
        return not self.stepped_down and bool(super().create(name, namespace, election_record))

    def update(self, name: str, namespace: str, updated_record: Any) -> bool:
        return not self.stepped_down and bool(super().update(name, namespace, updated_record))


def leader_elector(lock: LeaseLock, lease_duration: int, renew_deadline: int, retry_period: int,
                   on_started: Callable[[], None], on_stopped: Callable[[], None]) -> Callable[[], None]:
    """The client's leader election (client-go's algorithm) over ``lock``: the function that runs it, forever (in a
    thread of its own); ``on_started`` once the Lease is held, ``on_stopped`` when a held Lease could not be renewed."""
    elector = leaderelection.LeaderElection(electionconfig.Config(
        lock, lease_duration, renew_deadline, retry_period,
        onstarted_leading=on_started, onstopped_leading=on_stopped,
    ))
    return cast(Callable[[], None], elector.run)


def release_lease(api_client: ApiClient, name: str, namespace: str, identity: str) -> bool:
    """Clear the Lease's ``holderIdentity`` if ``identity`` holds it (guarded by its resourceVersion: a 409 if it
    changed in between); whether it did. Refusals raise :class:`ApiException`."""
    api = CoordinationV1Api(api_client)
    lease = api.read_namespaced_lease(name, namespace)
    if lease.spec is None or lease.spec.holder_identity != identity or lease.metadata is None:
        return False
    body = {"metadata": {"resourceVersion": lease.metadata.resource_version},
            "spec": {"holderIdentity": None, "acquireTime": None, "renewTime": None}}
    api.patch_namespaced_lease(name, namespace, body)
    return True
