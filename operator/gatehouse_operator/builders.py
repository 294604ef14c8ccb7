"""Pure builders: the Kubernetes objects an Agent owns, as plain dicts.

No I/O, no clock, no environment: every input is an argument, so the same inputs always render the same
manifests and golden files (``tests/testdata/operator/<case>/``) pin every change. One Agent owns::

    Secret         <agent>-config   config.json (AgentConfig) + agent-card.json (A2A card data)
    ServiceAccount <agent>          the runtime's one identity (not created when spec.deployment.serviceAccountName
                                    names it: then it is the user's own account of that name)
    Role           <agent>-runtime  toolapprovals (+/status), events, this Agent (get) and its status
    RoleBinding    <agent>-runtime  the Role -> the ServiceAccount <agent>
    PersistentVolumeClaim <agent>-state  the sqlite state (spec.state, :mod:`gatehouse_operator.storage`); owned only
                                    with deleteClaimWithAgent, applied by :mod:`gatehouse_operator.claims`
    Deployment     <agent>          gatehouse-runtime serve, config mounted from the Secret, access Secrets mounted
                                    read-only under ACCESS_DIR, the state volume at STATE_DIR; hardened
                                    (:mod:`gatehouse_operator.hardening`), its card URL the Service's; the
                                    ServiceAccount token mounted for certain when it calls Agents with it
    Service        <agent>          port 8080 "http"
    NetworkPolicy  <agent>          only when the chart's networkPolicy.enabled passes its settings
                                    (:mod:`gatehouse_operator.network_policy`): ingress to port 8080 from the
                                    namespace's Agent runtimes and the chart's peers

:func:`desired_children` assembles them in that order (the order they are created in) and makes the
Agent their owner with ``kopf.adopt`` (the claim only when the Agent asks). Secret values never appear here:
environment variables that carry secrets are ``secretKeyRef`` references and files are Secret volume items. One
more object is rendered here but applied apart, by :mod:`gatehouse_operator.access`: the generated token Secret
``<agent>-access`` (:func:`build_access_secret`, created once and never overwritten; the token is an argument).
The runtime's TokenReview right is a subject of one shared ClusterRoleBinding (:mod:`gatehouse_operator.tokenreview`).

An ``MCPGateway`` owns the same children, built by the same functions (:data:`Owner`), with these differences: its
labels say ``gatehouse-gateway`` and ``gatehouse.dev/gateway`` (the label the admission policy and the runtime read
for a gateway); the config Secret holds only ``config.json`` (a GatewayConfig; no agent card); the Role reads its own
MCPGateway (not an Agent); the Deployment runs ``gatehouse-runtime gateway``, without ``--public-url``.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import kopf

from agent_runtime.contract.agent_config import AgentConfig, GatewayConfig
from agent_runtime.contract.resources import GROUP, Agent, MCPGateway
from agent_runtime.contract.resources.agent import SqliteStateSpec
from agent_runtime.contract.translator import (
    ACCESS_DIR,
    AGENT_TOKEN_AUDIENCE,
    AGENT_TOKEN_DIR,
    AGENT_TOKEN_FILE,
    AGENT_TOKEN_SECONDS,
    GENERATED_TOKEN_KEY,
    RUNTIME_PORT,
    SecretFile,
    access_files,
    agent_url,
    secret_env,
)
from gatehouse_operator import hardening, network_policy, storage

__all__ = [
    "AGENT",
    "AGENT_NAMESPACE_LABEL",
    "CONFIG_HASH_ANNOTATION",
    "CONTAINER_PORT",
    "GATEWAY",
    "GATEWAY_LABEL",
    "MANAGED_BY",
    "SECRETS_HASH_ANNOTATION",
    "BuildInputs",
    "Owner",
    "OwnerKind",
    "build_access_secret",
    "build_claim",
    "build_config_secret",
    "build_deployment",
    "build_network_policy",
    "build_role",
    "build_role_binding",
    "build_service",
    "build_service_account",
    "config_hash",
    "desired_children",
    "kind_of",
    "labels_for",
    "needs_agent_token",
    "public_url",
]

CONTAINER_PORT = RUNTIME_PORT  # part of every Agent's in-cluster URL (translator.agent_url)
CONFIG_HASH_ANNOTATION = f"{GROUP}/config-hash"
SECRETS_HASH_ANNOTATION = f"{GROUP}/secrets-hash"
AGENT_LABEL = f"{GROUP}/agent"
GATEWAY_LABEL = f"{GROUP}/gateway"
AGENT_NAMESPACE_LABEL = f"{GROUP}/agent-namespace"
MANAGED_BY = "gatehouse-operator"


Owner = Agent | MCPGateway  # what owns runtime children: both have the same deployment, state and access blocks
Config = AgentConfig | GatewayConfig


@dataclass(frozen=True)
class OwnerKind:
    """What tells an Agent's children from an MCPGateway's: the label naming the owner, the app name, its plural."""

    kind: str
    plural: str
    label: str
    app: str


AGENT = OwnerKind("Agent", "agents", AGENT_LABEL, "gatehouse-agent")
GATEWAY = OwnerKind("MCPGateway", "mcpgateways", GATEWAY_LABEL, "gatehouse-gateway")


def kind_of(owner: Owner) -> OwnerKind:
    return GATEWAY if isinstance(owner, MCPGateway) else AGENT


@dataclass(frozen=True)
class BuildInputs:
    """Everything the builders need besides the Agent and its AgentConfig."""

    runtime_image: str
    secrets_hash: str = ""  # digest of the referenced Secret keys' values; rolls pods when they change
    api_token_secret: str = ""  # Secret (in the Agent's namespace) with the runtime's REST bearer tokens
    api_token_key: str = "token"
    # the chart's networkPolicy settings: None renders no NetworkPolicy (the default)
    network_policy: network_policy.NetworkPolicySettings | None = None


def config_json(config: Config) -> str:
    return config.to_json()


def config_hash(config: Config) -> str:
    """sha256 of ``config.json``: the pod-template annotation that rolls pods when the config changes."""
    return hashlib.sha256(config_json(config).encode()).hexdigest()


def labels_for(agent_name: str, of: OwnerKind = AGENT) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": of.app,
        "app.kubernetes.io/instance": agent_name,
        "app.kubernetes.io/managed-by": MANAGED_BY,
        of.label: agent_name,
    }


def selector_for(agent_name: str, of: OwnerKind = AGENT) -> dict[str, str]:
    return {"app.kubernetes.io/name": of.app, of.label: agent_name}


def config_secret_name(agent_name: str) -> str:
    return f"{agent_name}-config"


def role_name(agent_name: str) -> str:
    return f"{agent_name}-runtime"


def service_account_name(agent: Owner) -> str:
    """The runtime's identity: always the ServiceAccount named like the Agent (the reconcile refuses another name);
    a gateway's likewise, the name the admission policy expects of a gateway's ToolApprovals' writer."""
    return agent.name


def _meta(name: str, agent: Owner) -> dict[str, Any]:
    return {"name": name, "namespace": agent.namespace, "labels": labels_for(agent.name, kind_of(agent))}


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def build_config_secret(agent: Owner, config: Config) -> dict[str, Any]:
    data = {"config.json": _b64(config_json(config))}
    if isinstance(config, AgentConfig):  # a gateway has no agent card
        card = json.dumps(config.card.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"
        data["agent-card.json"] = _b64(card)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _meta(config_secret_name(agent.name), agent),
        "type": "Opaque",
        "data": data,
    }


def build_service_account(agent: Owner) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(agent.name, agent)}


def build_role(agent: Owner) -> dict[str, Any]:
    """Least privilege for the runtime: its ToolApprovals, Events, and its own Agent (a gateway: its own MCPGateway)
    (read) and status."""
    plural = kind_of(agent).plural
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": _meta(role_name(agent.name), agent),
        "rules": [
            {
                "apiGroups": [GROUP],
                "resources": ["toolapprovals"],
                "verbs": ["get", "list", "watch", "create", "patch", "delete"],
            },
            # a subresource has no list/watch/create/delete, and the operator may grant only what it holds
            {"apiGroups": [GROUP], "resources": ["toolapprovals/status"], "verbs": ["get", "patch"]},
            {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
            # its own Agent: the conditions the operator reports (AdmissionPolicy), and its status to write
            {"apiGroups": [GROUP], "resources": [plural], "resourceNames": [agent.name], "verbs": ["get"]},
            {"apiGroups": [GROUP], "resources": [f"{plural}/status"], "resourceNames": [agent.name],
             "verbs": ["get", "patch"]},
        ],
    }


def build_role_binding(agent: Owner) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": _meta(role_name(agent.name), agent),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role_name(agent.name)},
        "subjects": [{"kind": "ServiceAccount", "name": service_account_name(agent), "namespace": agent.namespace}],
    }


def build_access_secret(agent: Owner, owner: Mapping[str, Any], token: str) -> dict[str, Any]:
    """The token Secret generated for an Agent without ``spec.access.tokenSecretRef``: one token for
    ``<agent>-admin`` (the caller draws ``token``). Owned by the Agent, so it goes with it."""
    name = access_files(agent)[0].secret
    secret: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _meta(name, agent),
        "type": "Opaque",
        "data": {GENERATED_TOKEN_KEY: _b64(f"{agent.name}-admin:{token}\n")},
    }
    kopf.adopt(secret, owner=owner)  # type: ignore[arg-type]  # as in desired_children
    return secret


def _access_volume(files: Sequence[SecretFile]) -> dict[str, Any]:
    """One projected volume: each Secret key the runtime reads as a file, at its name under ACCESS_DIR."""
    by_secret: dict[str, list[dict[str, str]]] = {}
    for f in files:
        by_secret.setdefault(f.secret, []).append({"key": f.key, "path": f.file_name})
    sources = [{"secret": {"name": name, "items": items}} for name, items in by_secret.items()]
    return {"name": "access", "projected": {"sources": sources}}


def _env(agent: Owner, config: Config, inputs: BuildInputs, plan: storage.StateLayout) -> list[dict[str, Any]]:
    refs = secret_env(config) + ([plan.database] if plan.database is not None else [])
    env: list[dict[str, Any]] = [
        {"name": ref.env, "valueFrom": {"secretKeyRef": {"name": ref.secret, "key": ref.key}}} for ref in refs
    ]
    # REST approvals need a bearer token in a cluster (a gateway's runtime reads it too); never copied, only referenced
    if inputs.api_token_secret:
        ref = {"name": inputs.api_token_secret, "key": inputs.api_token_key}
        env.append({"name": "GATEHOUSE_API_TOKEN", "valueFrom": {"secretKeyRef": ref}})
    # Which pod wrote a condition, an Event or an Orphaned verdict (the downward API; the hostname may differ).
    env.append({"name": "GATEHOUSE_POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}})
    return env + [dict(item) for item in agent.spec.deployment.env]


def public_url(agent: Agent) -> str:
    """The URL the agent card announces: ``spec.a2aConfig.publicUrl``, else the Service's in-cluster address -- by
    :func:`agent_runtime.contract.translator.agent_url`, the same formula as the URL an Agent using this one as a tool calls."""
    return agent_url(agent.name, agent.namespace, agent.spec.a2a_config.public_url)


def needs_agent_token(config: Config) -> bool:
    """Whether the runtime presents a token of its ServiceAccount to an Agent it uses as a tool (read from the file the
    kubelet projects, :data:`agent_runtime.contract.translator.AGENT_TOKEN_FILE`); a gateway never does."""
    return isinstance(config, AgentConfig) and any(sub.token_file == AGENT_TOKEN_FILE for sub in config.sub_agents)


AGENT_TOKEN_VOLUME = {
    "name": "a2a-token",
    # A token of the pod's ServiceAccount for Agents only: its audience is not the API server's, so an Agent that
    # receives it cannot use it there; it expires within minutes and the kubelet replaces it before then.
    "projected": {"sources": [{"serviceAccountToken": {
        "audience": AGENT_TOKEN_AUDIENCE, "expirationSeconds": AGENT_TOKEN_SECONDS,
        "path": posixpath.basename(AGENT_TOKEN_FILE)}}]},
}


def build_claim(agent: Owner) -> dict[str, Any] | None:
    """The sqlite state's PersistentVolumeClaim ``<agent>-state``; ``None`` unless the Agent keeps sqlite on a claim.

    Without ``storageClassName`` the cluster's default StorageClass is used (the API server fills it in)."""
    plan = storage.layout(agent)
    if plan.claim is None:
        return None
    sqlite = agent.spec.state.sqlite or SqliteStateSpec()
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": sqlite.size}}}
    if sqlite.storage_class_name:
        spec["storageClassName"] = sqlite.storage_class_name
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": _meta(plan.claim, agent), "spec": spec}


def build_deployment(agent: Owner, config: Config, inputs: BuildInputs) -> dict[str, Any]:
    spec = agent.spec.deployment
    plan = storage.layout(agent)
    annotations = {CONFIG_HASH_ANNOTATION: config_hash(config)}
    if inputs.secrets_hash:
        annotations[SECRETS_HASH_ANNOTATION] = inputs.secrets_hash
    if isinstance(agent, MCPGateway):
        command = ["gatehouse-runtime", "gateway", "--config", "/config/config.json",
                   "--host", "0.0.0.0", "--port", str(CONTAINER_PORT)]
    else:
        command = [
            "gatehouse-runtime", "serve", "--config", "/config/config.json",
            "--host", "0.0.0.0", "--port", str(CONTAINER_PORT), "--public-url", public_url(agent),
        ]
    # The root filesystem is read-only: the runtime writes its state (sqlite) and temporary files to volumes.
    mounts: list[dict[str, Any]] = [{"name": "config", "mountPath": "/config", "readOnly": True}]
    volumes: list[dict[str, Any]] = [{"name": "config", "secret": {"secretName": config_secret_name(agent.name)}}]
    if plan.volume is not None:
        command += ["--state-dir", storage.STATE_DIR]
        mounts.append({"name": "state", "mountPath": storage.STATE_DIR})
        volumes.append(plan.volume)
    mounts += [{"name": "tmp", "mountPath": "/tmp"}, {"name": "access", "mountPath": ACCESS_DIR, "readOnly": True}]
    volumes += [{"name": "tmp", "emptyDir": {}}, _access_volume(access_files(agent))]
    if needs_agent_token(config):
        mounts.append({"name": "a2a-token", "mountPath": AGENT_TOKEN_DIR, "readOnly": True})
        volumes.append(copy.deepcopy(AGENT_TOKEN_VOLUME))
    container: dict[str, Any] = {
        "name": "runtime",
        "image": spec.image or inputs.runtime_image,
        "command": command,
        "ports": [{"name": "http", "containerPort": CONTAINER_PORT, "protocol": "TCP"}],
        "env": _env(agent, config, inputs, plan),
        **hardening.probes(CONTAINER_PORT),
        "resources": copy.deepcopy(spec.resources if spec.resources is not None else hardening.RESOURCES),
        "securityContext": hardening.merged(hardening.CONTAINER_SECURITY_CONTEXT, spec.security_context),
        "volumeMounts": mounts,
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(agent.name, agent),
        "spec": {
            "replicas": spec.replicas,
            "selector": {"matchLabels": selector_for(agent.name, kind_of(agent))},
            "strategy": plan.strategy,
            "template": {
                "metadata": {"labels": labels_for(agent.name, kind_of(agent)), "annotations": annotations},
                "spec": {
                    "serviceAccountName": service_account_name(agent),
                    "securityContext": hardening.merged(hardening.POD_SECURITY_CONTEXT, spec.pod_security_context),
                    "containers": [container],
                    "volumes": volumes,
                },
            },
        },
    }


def build_service(agent: Owner) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(agent.name, agent),
        "spec": {
            "type": "ClusterIP",
            "selector": selector_for(agent.name, kind_of(agent)),
            "ports": [{"name": "http", "port": CONTAINER_PORT, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def build_network_policy(agent: Owner, settings: network_policy.NetworkPolicySettings) -> dict[str, Any]:
    """Ingress to the runtime's port from the namespace's Agent runtimes and the chart's peers only."""
    agent_runtimes = {"app.kubernetes.io/name": AGENT.app, "app.kubernetes.io/managed-by": MANAGED_BY}
    return network_policy.build_network_policy(
        _meta(agent.name, agent), selector_for(agent.name, kind_of(agent)), CONTAINER_PORT, agent_runtimes, settings
    )


def desired_children(
    agent: Owner, owner: Mapping[str, Any], config: Config, inputs: BuildInputs
) -> list[dict[str, Any]]:
    """Every object the Agent owns, in creation order, each adopted by ``owner`` (the Agent's raw body)."""
    children = [build_config_secret(agent, config)]
    if not agent.spec.deployment.service_account_name:
        children.append(build_service_account(agent))
    children += [build_role(agent), build_role_binding(agent)]
    claim = build_claim(agent)
    if claim is not None:
        children.append(claim)
    children += [build_deployment(agent, config, inputs), build_service(agent)]
    if inputs.network_policy is not None:
        children.append(build_network_policy(agent, inputs.network_policy))
    keep_claim = not (agent.spec.state.sqlite or SqliteStateSpec()).delete_claim_with_agent
    for child in children:
        if child is claim and keep_claim:
            continue  # kept when the Agent goes: no ownerReference, so the garbage collector leaves it
        # kopf annotates ``Body`` but reads only Mapping keys (apiVersion, kind, metadata): the raw body works.
        kopf.adopt(child, owner=owner)  # type: ignore[arg-type]
    return children
