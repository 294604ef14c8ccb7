"""What every runtime pod gets unless its Agent says otherwise: the ``restricted`` Pod Security profile,
resources, and probes (pure data and one merge).

The ``restricted`` profile (https://kubernetes.io/docs/concepts/security/pod-security-standards/) needs, on top of
``baseline`` (no host namespaces, ports or paths, not privileged): no privilege escalation, every capability
dropped, a non-root user, and a seccomp profile. The image runs as uid/gid 10001 (the Dockerfile's numeric
``USER``), so the pod says so too: ``runAsNonRoot`` can then be checked by the kubelet before the container starts,
and ``fsGroup`` makes the state claim writable by that user whatever owner the volume plugin gave it. The root
filesystem is read-only; the runtime writes only to its state directory and ``/tmp`` (both volumes, see
:mod:`gatehouse_operator.builders`).

``spec.deployment.podSecurityContext`` and ``securityContext`` are merged over these key by key (a nested mapping
merges, anything else replaces), so an Agent can change one field -- another uid for its own image, an added
``NET_BIND_SERVICE`` -- and keep the rest. ``spec.deployment.resources`` replaces :data:`RESOURCES` as a whole:
requests and limits must agree with each other, which a per-key merge could break (a request raised above the
default limit).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

__all__ = [
    "CONTAINER_SECURITY_CONTEXT",
    "POD_SECURITY_CONTEXT",
    "RESOURCES",
    "RUNTIME_UID",
    "merged",
    "probes",
]

RUNTIME_UID = 10001  # the Dockerfile's USER 10001:10001 (tests/image checks that it is numeric and not root)

POD_SECURITY_CONTEXT: dict[str, Any] = {
    "runAsNonRoot": True,
    "runAsUser": RUNTIME_UID,
    "runAsGroup": RUNTIME_UID,
    "fsGroup": RUNTIME_UID,
    # A claim's files already belong to the group after the first start: skip the recursive chown on every later one.
    "fsGroupChangePolicy": "OnRootMismatch",
    "seccompProfile": {"type": "RuntimeDefault"},
}

CONTAINER_SECURITY_CONTEXT: dict[str, Any] = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "readOnlyRootFilesystem": True,
}

# Measured: an idle runtime (google-adk, a2a-sdk, litellm imported; one agent) holds ~175 MiB resident, so 256Mi is
# what it needs to be scheduled with headroom; each conversation in flight adds model payloads and sessions, so the
# limit leaves four times that before the kernel kills it. No CPU limit: a throttled event loop stalls every
# conversation and approval at once, while 100m requested keeps an idle agent cheap to place.
RESOURCES: dict[str, Any] = {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}}


def merged(defaults: Mapping[str, Any], overrides: Mapping[str, Any] | None) -> dict[str, Any]:
    """``overrides`` over ``defaults``, key by key: mappings merge recursively, any other value replaces."""
    out = copy.deepcopy(dict(defaults))
    for key, value in (overrides or {}).items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def probes(port: int) -> dict[str, dict[str, Any]]:
    """Readiness (``/readyz``: stores open, tools listed), liveness (``/healthz``) and a startup probe.

    A cold start imports google-adk and the model clients: ~6 s on two idle cores, many times that on a busy
    node with 100m requested. Until ``/healthz`` first answers, the startup probe holds liveness back for up to
    5 minutes (60 x 5 s), so a slow start is not killed and restarted into the same slow start.
    """
    def get(path: str) -> dict[str, Any]:
        return {"httpGet": {"path": path, "port": port}}

    return {
        "startupProbe": {**get("/healthz"), "periodSeconds": 5, "failureThreshold": 60},
        "readinessProbe": {**get("/readyz"), "periodSeconds": 5},
        "livenessProbe": {**get("/healthz"), "periodSeconds": 10, "failureThreshold": 3},
    }
