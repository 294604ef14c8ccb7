"""A container's environment, assembled as the kubelet and the container runtime do.

In order, later wins: the image's ``ENV`` (with ``PATH`` per :mod:`tests.support.kubelet.images`), ``HOSTNAME`` and
``HOME``; the ``kubernetes`` Service's variables (``KUBERNETES_SERVICE_HOST``/``_PORT`` and the docker-link style
``KUBERNETES_PORT*``) pointing at the API's TLS listener on the bridge; then ``envFrom`` (``secretRef``,
``configMapRef``, with ``prefix``) and ``env`` (``value`` with ``$(VAR)`` expansion against what came before,
``valueFrom`` ``secretKeyRef``/``configMapKeyRef``/``fieldRef``/``resourceFieldRef``). Nothing of the test process's
own environment leaks in (no ``KUBECONFIG``: the in-cluster configuration is what a pod finds). Other Services'
link variables (``enableServiceLinks``) are not set.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MissingKey", "PodFacts", "container_env", "expand", "field_value", "kubernetes_service_env", "quantity"]


def kubernetes_service_env(host: str, port: int | str) -> dict[str, str]:
    """The ``kubernetes`` Service's variables a kubelet gives every container: ``KUBERNETES_SERVICE_*`` and the
    docker-link style ``KUBERNETES_PORT*``, pointing at ``host:port``."""
    port = str(port)
    address = f"tcp://{host}:{port}"
    return {
        "KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port, "KUBERNETES_SERVICE_PORT_HTTPS": port,
        "KUBERNETES_PORT": address, f"KUBERNETES_PORT_{port}_TCP": address, f"KUBERNETES_PORT_{port}_TCP_PROTO": "tcp",
        f"KUBERNETES_PORT_{port}_TCP_PORT": port, f"KUBERNETES_PORT_{port}_TCP_ADDR": host,
    }


class MissingKey(LookupError):
    """An env reference to an absent Secret/ConfigMap or key (reason CreateContainerConfigError)."""


@dataclass(frozen=True)
class PodFacts:
    """What the downward API can tell about a pod."""

    namespace: str
    name: str
    uid: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    service_account: str = "default"
    node_name: str = ""
    pod_ip: str = ""
    host_ip: str = ""


def field_value(path: str, facts: PodFacts) -> str:
    simple = {
        "metadata.name": facts.name, "metadata.namespace": facts.namespace, "metadata.uid": facts.uid,
        "spec.nodeName": facts.node_name, "spec.serviceAccountName": facts.service_account,
        "status.podIP": facts.pod_ip, "status.podIPs": facts.pod_ip, "status.hostIP": facts.host_ip,
        "status.hostIPs": facts.host_ip,
    }
    if path in simple:
        return simple[path]
    if m := re.fullmatch(r"metadata\.(labels|annotations)\['([^']+)'\]", path):
        return (facts.labels if m.group(1) == "labels" else facts.annotations).get(m.group(2), "")
    if path in ("metadata.labels", "metadata.annotations"):
        table = facts.labels if path == "metadata.labels" else facts.annotations
        return "\n".join(f'{k}="{v}"' for k, v in sorted(table.items()))
    raise MissingKey(f"fieldRef {path} is not supported")


_UNITS = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "m": 1e-3}


def quantity(text: str) -> float:
    """``"500m"`` → 0.5, ``"128Mi"`` → 134217728."""
    m = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", str(text).strip())
    if not m:
        raise ValueError(f"not a quantity: {text}")
    return float(m.group(1)) * _UNITS.get(m.group(2), 1)


def _resource(ref: Mapping[str, Any], container: Mapping[str, Any]) -> str:
    kind, _, resource = str(ref["resource"]).partition(".")
    value = ((container.get("resources") or {}).get(kind) or {}).get(resource)
    if value is None:  # no limit: the node's capacity, as the kubelet reports it
        value = str(os.cpu_count() or 1) if resource == "cpu" else str(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    divisor = quantity(str(ref.get("divisor", "1")))
    return str(math.ceil(quantity(str(value)) / divisor))


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` expansion: defined names are replaced, ``$$`` is a literal ``$``, the rest stays."""

    def one(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))

    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)", one, text)


def container_env(
    container: Mapping[str, Any], facts: PodFacts, base: Mapping[str, str],
    data: Mapping[tuple[str, str], Mapping[str, bytes] | None],
) -> dict[str, str]:
    """``base``: image env, HOSTNAME, HOME and the API's variables. ``data``: ``("secret"|"configmap", name)`` →
    its keys (``None``: absent)."""
    env = dict(base)
    declared: dict[str, str] = {k: v for k, v in base.items() if k.startswith("KUBERNETES_")}

    def lookup(kind: str, ref: Mapping[str, Any]) -> str | None:
        table = data.get((kind, ref["name"]))
        if table is None or ref["key"] not in table:
            if ref.get("optional"):
                return None
            missing = f'{kind} "{ref["name"]}"' if table is None else f'key "{ref["key"]}" in {kind} "{ref["name"]}"'
            raise MissingKey(f"{missing} not found")
        return table[ref["key"]].decode(errors="replace")

    for item in container.get("envFrom") or []:
        kind, ref = ("secret", item["secretRef"]) if "secretRef" in item else ("configmap", item.get("configMapRef") or {})
        table = data.get((kind, ref.get("name", "")))
        if table is None:
            if ref.get("optional"):
                continue
            raise MissingKey(f'{kind} "{ref.get("name")}" not found')
        for key, raw in table.items():
            declared[f"{item.get('prefix', '')}{key}"] = raw.decode(errors="replace")
    for item in container.get("env") or []:
        name = item["name"]
        if "valueFrom" not in item:
            declared[name] = expand(str(item.get("value", "")), declared)
            continue
        source = item["valueFrom"]
        value: str | None
        if "secretKeyRef" in source:
            value = lookup("secret", source["secretKeyRef"])
        elif "configMapKeyRef" in source:
            value = lookup("configmap", source["configMapKeyRef"])
        elif "fieldRef" in source:
            value = field_value(source["fieldRef"]["fieldPath"], facts)
        elif "resourceFieldRef" in source:
            value = _resource(source["resourceFieldRef"], container)
        else:
            raise MissingKey(f"env {name}: valueFrom {sorted(source)} is not supported")
        if value is not None:
            declared[name] = value
    env.update(declared)
    return env
