"""The generated token Secret of an Agent, which is not a plain child (it is created once and never overwritten).

``<agent>-access`` (Secret, owned by the Agent): for an Agent that names no ``spec.access.tokenSecretRef``, the
operator generates one token for ``<agent>-admin`` and mounts it as the runtime's token file, so an Agent
written before ``spec.access`` existed still starts with authentication on. It is created once and never
written again: not on a resync, not after an operator restart (the token lives in the Secret), not when someone
edits it (their tokens are theirs; the pods roll to read them). Deleted by hand, it is generated anew. Whether it
exists is read by name with the other Secrets the Agent references (one GET), except for an Agent never applied
before: then it is created straight away (and read only if that answers 409). Its edits and deletion are noticed
by the periodic Secret check, like those of any referenced Secret.

The runtime's TokenReview right is :mod:`gatehouse_operator.tokenreview`.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any

from gatehouse_operator import builders
from gatehouse_operator.apply import Applied
from gatehouse_operator.dependencies import ReferencedSecrets
from gatehouse_operator.kube import ApiException, ChildrenApi

__all__ = ["ensure_access_secret"]

TOKEN_BYTES = 32


def ensure_access_secret(
    kube: ChildrenApi, referenced: ReferencedSecrets, agent: builders.Owner, owner: Mapping[str, Any], *,
    create_first: bool = False,
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
