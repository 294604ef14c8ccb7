"""Kubeconfig files for the cluster's users: a client certificate or a bearer token, and the cluster's CA."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.support.cluster.pki import Pair

__all__ = ["write"]


def write(path: Path, server: str, ca: Path, user: str, *, client: Pair | None = None,
          token: str | None = None) -> Path:
    """A kubeconfig at ``path`` (0600) for ``user`` with one context, ``gatehouse-test``."""
    credentials: dict[str, str] = {}
    if client is not None:
        credentials = {"client-certificate": str(client.cert), "client-key": str(client.key)}
    if token is not None:
        credentials["token"] = token
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": "gatehouse-test",
        "clusters": [{"name": "gatehouse-test", "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": user, "user": credentials}],
        "contexts": [{"name": "gatehouse-test", "context": {"cluster": "gatehouse-test", "user": user}}],
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path
