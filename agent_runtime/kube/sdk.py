"""The runtime's one door to the ``kubernetes`` Python client, typed.

The client is only partly annotated (its config loaders and helpers are not, and custom objects come back as
``object``), so every call into it is made here and what it answers is cast here, once: the rest of the runtime
sees :class:`Credentials` (what :class:`~agent_runtime.kube.client.KubeClient` needs from a kubeconfig or the
in-cluster service account) and :class:`Kube` (the blocking ToolApproval calls of ``kubectl gatehouse``, its inbox
and the Slack bridge's votes, under one identity). Only this module may call into ``kubernetes`` (mypy's
per-module override in ``pyproject.toml``). ``kubernetes`` is imported lazily, on first use: it takes a while to
load, and neither the runtime's start nor ``kubectl gatehouse --help`` needs it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from agent_runtime.contract.resources import GROUP, VERSION
from agent_runtime.contract.resources.tool_approval import PLURAL

if TYPE_CHECKING:
    from kubernetes.client import ApiClient, Configuration

__all__ = ["Credentials", "Kube", "NoCredentials", "UserInfo", "connect", "credentials", "kubeconfig_contexts"]

JsonObject = dict[str, Any]


class NoCredentials(Exception):
    """The loaders found no usable credentials; the message names what they raised (``ConfigException: …``)."""


@dataclass(frozen=True)
class Credentials:
    """How to reach the API server, as the ``kubernetes`` package's loaders read it from a kubeconfig or the
    in-cluster service account."""

    host: str
    verify_ssl: bool
    ca_cert: str | None
    cert_file: str | None
    key_file: str | None
    configuration: Configuration  # kept to be asked for the token per request (see :meth:`token`)

    def token(self) -> str | None:
        """The ``Authorization`` header's value (``Bearer …``), or None. The loaders store it under "BearerToken"
        (older ones under "authorization"); asking for it also runs their refresh hook (projected tokens rotate)."""
        return self.configuration.get_api_key_with_prefix("BearerToken", alias="authorization")


def _load(config_file: str | None, context: str | None, in_cluster: bool) -> Configuration:
    from kubernetes import client, config

    configuration = client.Configuration()
    if in_cluster:
        config.load_incluster_config(client_configuration=configuration)
    else:
        config.load_kube_config(config_file=config_file, context=context, client_configuration=configuration)
    return configuration


def credentials(config_file: str | None, in_cluster: bool) -> Credentials:
    """The in-cluster service account's credentials, else the kubeconfig's (``config_file``, else ``$KUBECONFIG`` or
    ``~/.kube/config``; its current context). Raises :class:`NoCredentials` when they cannot be read."""
    import yaml
    from kubernetes import config

    try:
        configuration = _load(config_file, None, in_cluster)
    except (config.ConfigException, OSError, yaml.YAMLError) as exc:
        raise NoCredentials(f"{type(exc).__name__}: {exc}") from None
    return Credentials(
        host=configuration.host,
        verify_ssl=bool(configuration.verify_ssl),
        ca_cert=configuration.ssl_ca_cert or None,
        cert_file=configuration.cert_file or None,
        key_file=configuration.key_file or None,
        configuration=configuration,
    )


def kubeconfig_contexts() -> tuple[list[JsonObject], JsonObject | None]:
    """The kubeconfig's contexts (each ``{"name", "context": {"cluster", "namespace", …}}``) and the current one.
    Raises whatever the loader raises when there is no kubeconfig."""
    from kubernetes import config

    contexts, active = config.list_kube_config_contexts()
    return cast(list[JsonObject], contexts), cast("JsonObject | None", active)


@dataclass(frozen=True)
class UserInfo:
    """Who the API server says the caller is (a SelfSubjectReview's ``status.userInfo``)."""

    username: str | None
    groups: list[str]


class Kube:
    """The ToolApproval calls of ``kubectl gatehouse``, its inbox and the Slack bridge's votes, under one identity
    (one ``ApiClient`` with a configuration of its own, so that several identities can be used in one process).
    Blocking, as the client is; objects are plain JSON. The API's refusals raise the client's ``ApiException``
    (``status``, ``reason``, ``body``), which :func:`agent_runtime.kube.toolapproval_client._explain` puts in words."""

    def __init__(self, api_client: ApiClient) -> None:
        self.api_client = api_client

    def get_tool_approval(self, namespace: str, name: str) -> JsonObject:
        from kubernetes import client

        found = client.CustomObjectsApi(self.api_client).get_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, name)
        return cast(JsonObject, found)

    def list_tool_approvals(self, namespace: str | None, label_selector: str | None = None) -> list[JsonObject]:
        """The ToolApprovals of ``namespace`` (None: of every namespace), only those ``label_selector`` matches."""
        from kubernetes import client

        api = client.CustomObjectsApi(self.api_client)
        selector = label_selector or None  # None: not sent
        if namespace is None:
            found = api.list_cluster_custom_object(GROUP, VERSION, PLURAL, label_selector=selector)
        else:
            found = api.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, label_selector=selector)
        return cast(list[JsonObject], cast(JsonObject, found)["items"])

    def patch_tool_approval(self, namespace: str, name: str, patch: JsonObject) -> JsonObject:
        """A merge patch (the client's choice for a JSON object body); the object as written."""
        from kubernetes import client

        written = client.CustomObjectsApi(self.api_client).patch_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, name, patch)
        return cast(JsonObject, written)

    def who_am_i(self) -> UserInfo | None:
        """The caller as the API server sees it (SelfSubjectReview, Kubernetes 1.28+); None when it says nothing."""
        from kubernetes import client

        review = client.AuthenticationV1Api(self.api_client).create_self_subject_review(client.V1SelfSubjectReview())
        user_info = review.status.user_info if review.status is not None else None
        if user_info is None:
            return None
        return UserInfo(user_info.username, list(user_info.groups or []))

    def list_events(self, namespace: str, field_selector: str) -> list[JsonObject]:
        """The Events of ``namespace`` that ``field_selector`` matches, as plain JSON like the other objects here."""
        from kubernetes import client

        reply = client.CoreV1Api(self.api_client).list_namespaced_event(
            namespace, field_selector=field_selector, _preload_content=False)
        # unloaded, the answer is the HTTP response, not the CoreV1EventList the method is annotated with
        return cast(list[JsonObject], json.loads(cast(Any, reply).data).get("items", []))


def connect(config_file: str | None = None, context: str | None = None, *, in_cluster: bool = False) -> Kube:
    """A :class:`Kube` over the kubeconfig (``config_file``, else ``$KUBECONFIG`` or ``~/.kube/config``; ``context``,
    else the current one), or over the in-cluster service account. Raises what the loader raises."""
    from kubernetes import client

    return Kube(client.ApiClient(_load(config_file, context, in_cluster)))
