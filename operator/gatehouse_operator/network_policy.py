"""The NetworkPolicy each Agent's and MCPGateway's runtime gets when the chart turns ``networkPolicy.enabled`` on.

Agents live in any namespace and their pods are the operator's, so the chart cannot render this (a NetworkPolicy
selects pods of its own namespace only, and the chart has one): the operator renders one per runtime, named like its
Deployment and owned by the Agent or MCPGateway, so it goes with it. It admits TCP to the runtime's one port (A2A,
REST, the inbox's login, a gateway's MCP, ``/metrics``) only from

- the runtimes of Agents of the same namespace: an Agent calls the Agents of its namespace as tools
  (``spec.tools[].agent``) and reaches an MCPGateway of its namespace through a RemoteMCPServer;
- the peers the chart lists in ``networkPolicy.runtimeFrom`` (your ingress controller, the namespaces your people's
  A2A and REST clients run in, Prometheus), the same for every runtime.

Everything else is refused by any enforcing network plugin. What a NetworkPolicy does not cover, by design of
Kubernetes: the kubelet's probes (from the node itself) and ``kubectl port-forward`` (it connects from inside the
pod's network namespace). Egress is left alone. Every channel still authenticates its caller; this only narrows who
can try.

``GATEHOUSE_NETWORK_POLICY`` (JSON, the chart renders it from its values) turns it on: ``{"from": [<peer>, ...]}``,
each peer a NetworkPolicyPeer (``podSelector``, ``namespaceSelector`` or ``ipBlock``), validated at start-up -- an
operator with a malformed value does not start. Unset: no NetworkPolicy is rendered. Turning it off again leaves the
ones already made in place (the operator does not list NetworkPolicies): delete them with
``kubectl delete networkpolicies -A -l app.kubernetes.io/managed-by=gatehouse-operator``.

:func:`build_network_policy` is pure; :func:`settings_from_env` is the only reader of the environment.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

__all__ = [
    "ENV",
    "NetworkPolicySettings",
    "Peer",
    "build_network_policy",
    "settings_from_env",
]

ENV = "GATEHOUSE_NETWORK_POLICY"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class LabelRequirement(_Strict):
    key: str = Field(min_length=1)
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] | None = None


class LabelSelector(_Strict):
    match_labels: dict[str, str] | None = Field(default=None, alias="matchLabels")
    match_expressions: list[LabelRequirement] | None = Field(default=None, alias="matchExpressions")


class IpBlock(_Strict):
    cidr: str = Field(min_length=1)
    except_: list[str] | None = Field(default=None, alias="except")


class Peer(_Strict):
    """A NetworkPolicyPeer (networking.k8s.io/v1): pods by label (with ``namespaceSelector``: in the namespaces it
    selects; alone: in the runtime's own namespace), whole namespaces by label, or addresses."""

    pod_selector: LabelSelector | None = Field(default=None, alias="podSelector")
    namespace_selector: LabelSelector | None = Field(default=None, alias="namespaceSelector")
    ip_block: IpBlock | None = Field(default=None, alias="ipBlock")

    @model_validator(mode="after")
    def _one_kind(self) -> Peer:
        selectors = self.pod_selector is not None or self.namespace_selector is not None
        if selectors == (self.ip_block is not None):
            raise ValueError("a peer is podSelector and/or namespaceSelector, or ipBlock alone")
        return self


class NetworkPolicySettings(_Strict):
    """What the chart passes: the peers besides the namespace's own Agent runtimes."""

    from_: list[Peer] = Field(default_factory=list, alias="from")


def settings_from_env(environ: Mapping[str, str]) -> NetworkPolicySettings | None:
    """The settings of ``GATEHOUSE_NETWORK_POLICY``; ``None`` when it is unset or empty (no NetworkPolicy)."""
    raw = environ.get(ENV, "").strip()
    if not raw:
        return None
    try:
        return NetworkPolicySettings.model_validate(json.loads(raw))
    except (ValueError, ValidationError) as exc:  # json.JSONDecodeError is a ValueError
        raise ValueError(f"{ENV}: {exc}") from None


def build_network_policy(
    metadata: Mapping[str, Any],
    pod_selector: Mapping[str, str],
    port: int,
    agent_runtimes: Mapping[str, str],
    settings: NetworkPolicySettings,
) -> dict[str, Any]:
    """The NetworkPolicy of one runtime (``metadata``: name and namespace its Deployment's), selecting its pods
    (``pod_selector``): ingress to ``port`` from the pods of its namespace labelled ``agent_runtimes`` (the Agents'
    runtimes; a pod labelled so by hand gets in too, but whoever may create pods there may run an Agent as well) and
    from ``settings``' peers, nothing else."""
    peers: list[dict[str, Any]] = [{"podSelector": {"matchLabels": dict(agent_runtimes)}}]
    peers += [peer.model_dump(by_alias=True, exclude_none=True) for peer in settings.from_]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": dict(metadata),
        "spec": {
            "podSelector": {"matchLabels": dict(pod_selector)},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": peers, "ports": [{"protocol": "TCP", "port": port}]}],
        },
    }
