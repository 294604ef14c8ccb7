"""Service discovery without a DNS server or kube-proxy: each pod's ``/etc/hosts``.

A Service resolves to the addresses of the Ready, not terminating pods its ``selector`` matches in its namespace (as
a *headless* Service's DNS name does): ``<svc>.<ns>.svc.cluster.local``, ``<svc>.<ns>.svc``, ``<svc>.<ns>`` and, in
the pod's own namespace, ``<svc>`` (standing in for the search path). ``kubernetes.default.svc[.cluster.local]`` is
the API's listener on the bridge. There is no ClusterIP, so a client reaches the pod's port directly: a Service whose
``port`` differs from its ``targetPort`` works from the test process (:meth:`Kubelet.url_of` maps it) but not from
inside a pod. A name with no ready pod behind it does not resolve. The file is bind-mounted, so it is rewritten in
place (same inode) whenever endpoints change.

There is no DNS server: ``/etc/resolv.conf`` names ``127.0.0.1`` inside the pod's own namespace, where nothing
listens, so a name missing from the hosts file fails at once (a real lookup would wait for a timeout: e.g. Python's
``http.server`` looks up its own address's name at start) -- with the cluster's search path and ``ndots:5``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.kubelet.certs import API_NAMES

__all__ = ["Endpoint", "render_hosts", "render_resolv_conf", "selects", "service_endpoints", "service_names", "write_in_place"]


@dataclass(frozen=True)
class Endpoint:
    """A pod as Services see it."""

    namespace: str
    name: str
    ip: str
    labels: Mapping[str, str]
    ready: bool
    containers: Sequence[Mapping[str, Any]] = ()


def selects(service: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    selector = (service.get("spec") or {}).get("selector") or {}
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def service_endpoints(services: Iterable[Mapping[str, Any]], pods: Iterable[Endpoint]) -> dict[tuple[str, str], list[Endpoint]]:
    """(namespace, service) → its ready pods, by name."""
    pods = [p for p in pods if p.ready and p.ip]
    out: dict[tuple[str, str], list[Endpoint]] = {}
    for service in services:
        meta = service["metadata"]
        namespace = meta.get("namespace") or "default"
        out[(namespace, meta["name"])] = sorted(
            (p for p in pods if p.namespace == namespace and selects(service, p.labels)), key=lambda p: p.name)
    return out


def service_names(service: str, namespace: str, own_namespace: str) -> list[str]:
    names = [f"{service}.{namespace}.svc.cluster.local", f"{service}.{namespace}.svc", f"{service}.{namespace}"]
    return names + ([service] if namespace == own_namespace else [])


def render_hosts(ip: str, hostname: str, namespace: str, api_ip: str,
                 endpoints: Mapping[tuple[str, str], Sequence[Endpoint]]) -> str:
    lines = [
        "# Kubernetes-managed hosts file (the kubelet stand-in, tests/support/kubelet).",
        "127.0.0.1\tlocalhost",
        "::1\tlocalhost ip6-localhost ip6-loopback",
        f"{ip}\t{hostname}" if ip else f"# {hostname}: no address yet",
        f"{api_ip}\t{' '.join(reversed(API_NAMES))}",
    ]
    for (svc_namespace, service), pods in sorted(endpoints.items()):
        for pod in pods:
            lines.append(f"{pod.ip}\t{' '.join(service_names(service, svc_namespace, namespace))}")
    return "\n".join(lines) + "\n"


def render_resolv_conf(namespace: str) -> str:
    return (
        "# kubelet stand-in: no cluster DNS; names resolve through /etc/hosts only (nothing listens on 127.0.0.1:53)\n"
        "nameserver 127.0.0.1\n"
        f"search {namespace}.svc.cluster.local svc.cluster.local cluster.local\n"
        "options ndots:5 timeout:1 attempts:1\n"
    )


def write_in_place(path: Path, text: str) -> bool:
    """Rewrite ``path`` keeping its inode (a bind mount of it sees the change); ``False`` when nothing changed."""
    data = text.encode()
    try:
        if path.read_bytes() == data:
            return False
    except FileNotFoundError:
        pass
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, data)
    finally:
        os.close(fd)
    return True
