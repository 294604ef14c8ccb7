"""The two objects of an Agent that are not plain children: its generated token Secret and its TokenReview binding.

``<agent>-access`` (Secret, owned by the Agent): for an Agent that names no ``spec.access.tokenSecretRef``, the
operator generates one token for ``<agent>-admin`` and mounts it as the runtime's token file, so an Agent
written before ``spec.access`` existed still starts with authentication on. It is created once and never
written again: not on a resync, not after an operator restart (the token lives in the Secret), not when someone
edits it (their tokens are theirs; the pods roll to read them). Deleted by hand, it is generated anew. Whether it
exists is read by name with the other Secrets the Agent references (one GET), except for an Agent never applied
before: then it is created straight away (and read only if that answers 409). Its edits and deletion are noticed
by the periodic Secret check, like those of any referenced Secret.

``gatehouse-tokenreview-<namespace>-<agent>`` (ClusterRoleBinding): binds the chart's TokenReview ClusterRole to
the runtime's ServiceAccount while ``spec.access.kubernetesTokens`` is true, and is deleted when it turns false or
when the Agent is gone (a cluster-scoped object cannot have a namespaced owner, and Agents carry no finalizer):
at once on the Agent's DELETED watch event, and by the periodic clean-up (:mod:`gatehouse_operator.periodic`,
at start-up and every resync period) for an Agent deleted while the operator was down or its event was missed.
It carries the Agent's name and namespace as labels (:data:`BINDING_SELECTOR` finds them all); one that names
another Agent is never taken over.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any

from agent_runtime.resources import Agent
from gatehouse_operator import builders
from gatehouse_operator.apply import Applied, owned_equal
from gatehouse_operator.dependencies import ReferencedSecrets
from gatehouse_operator.kube import ApiException, ChildrenApi

__all__ = [
    "BINDING_SELECTOR",
    "BindingConflict",
    "delete_tokenreview_binding",
    "ensure_access_secret",
    "ensure_tokenreview_binding",
    "owner_of",
]

BINDING = "ClusterRoleBinding"
# Every TokenReview binding the operator made (any release's): managed by it and labelled with an Agent's namespace.
BINDING_SELECTOR = f"app.kubernetes.io/managed-by={builders.MANAGED_BY},{builders.AGENT_NAMESPACE_LABEL}"
TOKEN_BYTES = 32


class BindingConflict(Exception):
    """The TokenReview binding's name is taken by a binding that belongs to another Agent."""


def ensure_access_secret(
    kube: ChildrenApi, referenced: ReferencedSecrets, agent: Agent, owner: Mapping[str, Any], *, create_first: bool = False
) -> Applied | None:
    """Generate the token Secret if the Agent needs it and it does not exist; ``None`` when nothing was done.

    ``referenced`` answers whether it exists, and records what was created or found (its version and keys).
    """
    if agent.spec.access.token_secret_ref is not None:
        return None
    desired = builders.build_access_secret(agent, owner, secrets.token_urlsafe(TOKEN_BYTES))
    name = desired["metadata"]["name"]
    if not create_first and referenced.get(name) is not None:
        return None
    try:
        created = kube.create(desired)
    except ApiException as exc:
        if exc.status != 409:
            raise
    else:
        referenced.saw(created)
        return Applied("Secret", name, "created", created)
    actual = kube.get("Secret", agent.namespace, name)  # there already: never overwritten
    if actual is None:
        return None
    referenced.saw(actual)
    return Applied("Secret", name, "unchanged", actual)


def owner_of(binding: Mapping[str, Any]) -> tuple[str, str] | None:
    """The (namespace, name) of the Agent a binding is labelled with."""
    labels = binding.get("metadata", {}).get("labels") or {}
    agent, namespace = labels.get(builders.AGENT_LABEL), labels.get(builders.AGENT_NAMESPACE_LABEL)
    return (namespace, agent) if agent and namespace else None


def _check_ours(actual: dict[str, Any], agent: Agent) -> None:
    owner = owner_of(actual)
    if owner is not None and owner != (agent.namespace, agent.name):
        raise BindingConflict(
            f"{BINDING} {actual['metadata']['name']!r} belongs to Agent {owner[0]}/{owner[1]}; "
            "the runtime cannot be allowed TokenReviews under that name"
        )


def ensure_tokenreview_binding(
    kube: ChildrenApi, agent: Agent, cluster_role: str, *, wanted: bool, create_first: bool = False
) -> Applied | None:
    """Make the binding exist (``wanted``) or not; ``None`` when it is absent and not wanted."""
    name = builders.tokenreview_binding_name(agent.namespace, agent.name)
    if not wanted:
        actual = kube.get(BINDING, None, name)
        if actual is None or owner_of(actual) != (agent.namespace, agent.name):
            return None
        kube.delete(BINDING, None, name)
        return Applied(BINDING, name, "deleted", actual)
    desired = builders.build_tokenreview_binding(agent, cluster_role)
    if create_first:
        try:
            return Applied(BINDING, name, "created", kube.create(desired))
        except ApiException as exc:
            if exc.status != 409:
                raise
    actual = kube.get(BINDING, None, name)
    if actual is None:
        return Applied(BINDING, name, "created", kube.create(desired))
    _check_ours(actual, agent)
    if actual.get("roleRef") != desired["roleRef"]:  # roleRef cannot change: replace the binding
        kube.delete(BINDING, None, name)
        return Applied(BINDING, name, "replaced", kube.create(desired))
    if owned_equal(desired, actual):
        return Applied(BINDING, name, "unchanged", actual)
    return Applied(BINDING, name, "patched", kube.patch(desired))


def delete_tokenreview_binding(kube: ChildrenApi, namespace: str, agent_name: str, name: str | None = None) -> bool:
    """Delete the Agent's binding (``name``, by default the one it is given), if it is there and its own; whether one
    was deleted."""
    name = name or builders.tokenreview_binding_name(namespace, agent_name)
    actual = kube.get(BINDING, None, name)
    if actual is None or owner_of(actual) not in (None, (namespace, agent_name)):
        return False
    return kube.delete(BINDING, None, name)
