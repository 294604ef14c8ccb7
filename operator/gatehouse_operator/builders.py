"""Pure builders: the Kubernetes objects an Agent owns, as plain dicts.

No I/O, no clock, no environment: every input is an argument, so the same inputs always render the same
manifests and golden files (``tests/testdata/operator/<case>/``) pin every change. One Agent owns::

    Secret         <agent>-config   config.json (AgentConfig) + agent-card.json (A2A card data)
    ServiceAccount <agent>          (unless spec.deployment.serviceAccountName names another one)
    Role           <agent>-runtime  toolapprovals (+/status), events, this Agent's status
    RoleBinding    <agent>-runtime  the Role -> the ServiceAccount the pods run as
    Deployment     <agent>          gatehouse-runtime serve, config mounted from the Secret
    Service        <agent>          port 8080 "http"

:func:`desired_children` assembles them in that order (the order they are created in) and makes the
Agent their owner with ``kopf.adopt``. Secret values never appear here: environment variables that
carry secrets are ``secretKeyRef`` references.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import kopf

from agent_runtime.agent_config import AgentConfig
from agent_runtime.resources import GROUP, Agent
from agent_runtime.translator import secret_env

__all__ = [
    "CONFIG_HASH_ANNOTATION",
    "CONTAINER_PORT",
    "MANAGED_BY",
    "SECRETS_HASH_ANNOTATION",
    "BuildInputs",
    "build_config_secret",
    "build_deployment",
    "build_role",
    "build_role_binding",
    "build_service",
    "build_service_account",
    "config_hash",
    "desired_children",
    "labels_for",
]

CONTAINER_PORT = 8080
CONFIG_HASH_ANNOTATION = f"{GROUP}/config-hash"
SECRETS_HASH_ANNOTATION = f"{GROUP}/secrets-hash"
AGENT_LABEL = f"{GROUP}/agent"
MANAGED_BY = "gatehouse-operator"


@dataclass(frozen=True)
class BuildInputs:
    """Everything the builders need besides the Agent and its AgentConfig."""

    runtime_image: str
    secrets_hash: str = ""  # digest of the referenced Secret keys' values; rolls pods when they change
    api_token_secret: str = ""  # Secret (in the Agent's namespace) with the runtime's REST bearer tokens
    api_token_key: str = "token"


def config_json(config: AgentConfig) -> str:
    return config.to_json()


def config_hash(config: AgentConfig) -> str:
    """sha256 of ``config.json``: the pod-template annotation that rolls pods when the config changes."""
    return hashlib.sha256(config_json(config).encode()).hexdigest()


def labels_for(agent_name: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "gatehouse-agent",
        "app.kubernetes.io/instance": agent_name,
        "app.kubernetes.io/managed-by": MANAGED_BY,
        AGENT_LABEL: agent_name,
    }


def selector_for(agent_name: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": "gatehouse-agent", AGENT_LABEL: agent_name}


def config_secret_name(agent_name: str) -> str:
    return f"{agent_name}-config"


def role_name(agent_name: str) -> str:
    return f"{agent_name}-runtime"


def service_account_name(agent: Agent) -> str:
    return agent.spec.deployment.service_account_name or agent.name


def _meta(name: str, agent: Agent) -> dict[str, Any]:
    return {"name": name, "namespace": agent.namespace, "labels": labels_for(agent.name)}


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def build_config_secret(agent: Agent, config: AgentConfig) -> dict[str, Any]:
    card = json.dumps(config.card.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _meta(config_secret_name(agent.name), agent),
        "type": "Opaque",
        "data": {"config.json": _b64(config_json(config)), "agent-card.json": _b64(card)},
    }


def build_service_account(agent: Agent) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(agent.name, agent)}


def build_role(agent: Agent) -> dict[str, Any]:
    """Least privilege for the runtime: its ToolApprovals, Events, and its own Agent's status."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": _meta(role_name(agent.name), agent),
        "rules": [
            {
                "apiGroups": [GROUP],
                "resources": ["toolapprovals", "toolapprovals/status"],
                "verbs": ["get", "list", "watch", "create", "patch", "delete"],
            },
            {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
            {"apiGroups": [GROUP], "resources": ["agents/status"], "resourceNames": [agent.name], "verbs": ["get", "patch"]},
        ],
    }


def build_role_binding(agent: Agent) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": _meta(role_name(agent.name), agent),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role_name(agent.name)},
        "subjects": [{"kind": "ServiceAccount", "name": service_account_name(agent), "namespace": agent.namespace}],
    }


STATE_DIR = "/var/lib/gatehouse"


def _env(agent: Agent, config: AgentConfig, inputs: BuildInputs) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [
        {"name": ref.env, "valueFrom": {"secretKeyRef": {"name": ref.secret, "key": ref.key}}} for ref in secret_env(config)
    ]
    if inputs.api_token_secret:  # REST approvals need a bearer token in a cluster; never copied, only referenced
        ref = {"name": inputs.api_token_secret, "key": inputs.api_token_key}
        env.append({"name": "GATEHOUSE_API_TOKEN", "valueFrom": {"secretKeyRef": ref}})
    return env + [dict(item) for item in agent.spec.deployment.env]


def build_deployment(agent: Agent, config: AgentConfig, inputs: BuildInputs) -> dict[str, Any]:
    spec = agent.spec.deployment
    annotations = {CONFIG_HASH_ANNOTATION: config_hash(config)}
    if inputs.secrets_hash:
        annotations[SECRETS_HASH_ANNOTATION] = inputs.secrets_hash
    probe = {"httpGet": {"path": "/readyz", "port": CONTAINER_PORT}, "periodSeconds": 5}
    container: dict[str, Any] = {
        "name": "runtime",
        "image": spec.image or inputs.runtime_image,
        "command": [
            "gatehouse-runtime", "serve", "--config", "/config/config.json",
            "--host", "0.0.0.0", "--port", str(CONTAINER_PORT), "--state-dir", STATE_DIR,
        ],
        "ports": [{"name": "http", "containerPort": CONTAINER_PORT, "protocol": "TCP"}],
        "env": _env(agent, config, inputs),
        "readinessProbe": probe,
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": CONTAINER_PORT}, "periodSeconds": 10, "failureThreshold": 3},
        "resources": dict(spec.resources or {}),
        # The state volume outlives a container restart (kill -9 included), so pending approvals survive it.
        "volumeMounts": [
            {"name": "config", "mountPath": "/config", "readOnly": True},
            {"name": "state", "mountPath": STATE_DIR},
        ],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(agent.name, agent),
        "spec": {
            "replicas": spec.replicas,
            "selector": {"matchLabels": selector_for(agent.name)},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}},
            "template": {
                "metadata": {"labels": labels_for(agent.name), "annotations": annotations},
                "spec": {
                    "serviceAccountName": service_account_name(agent),
                    "containers": [container],
                    "volumes": [
                        {"name": "config", "secret": {"secretName": config_secret_name(agent.name)}},
                        {"name": "state", "emptyDir": {}},
                    ],
                },
            },
        },
    }


def build_service(agent: Agent) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(agent.name, agent),
        "spec": {
            "type": "ClusterIP",
            "selector": selector_for(agent.name),
            "ports": [{"name": "http", "port": CONTAINER_PORT, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def desired_children(
    agent: Agent, owner: Mapping[str, Any], config: AgentConfig, inputs: BuildInputs
) -> list[dict[str, Any]]:
    """Every object the Agent owns, in creation order, each adopted by ``owner`` (the Agent's raw body)."""
    children = [build_config_secret(agent, config)]
    if not agent.spec.deployment.service_account_name:
        children.append(build_service_account(agent))
    children += [build_role(agent), build_role_binding(agent), build_deployment(agent, config, inputs), build_service(agent)]
    for child in children:
        # kopf annotates ``Body`` but reads only Mapping keys (apiVersion, kind, metadata): the raw body works.
        kopf.adopt(child, owner=owner)  # type: ignore[arg-type]
    return children
