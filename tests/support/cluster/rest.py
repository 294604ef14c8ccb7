"""A plain HTTP client for one of this cluster's kubeconfigs, for tests that look at the API server's answers
(status code and message) themselves rather than through kubectl's wording."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import httpx
import yaml

__all__ = ["client", "message"]


def client(kubeconfig: Path) -> httpx.Client:
    """An httpx client with the kubeconfig's server, CA and credentials (client certificate or token)."""
    config = yaml.safe_load(kubeconfig.read_text())
    cluster, user = config["clusters"][0]["cluster"], config["users"][0]["user"]
    tls = ssl.create_default_context(cafile=cluster["certificate-authority"])
    if "client-certificate" in user:
        tls.load_cert_chain(user["client-certificate"], user["client-key"])
    headers = {"Accept": "application/json"}
    if "token" in user:
        headers["Authorization"] = f"Bearer {user['token']}"
    return httpx.Client(base_url=cluster["server"], verify=tls, headers=headers, timeout=30)


def message(reply: httpx.Response) -> str:
    """The API server's message of a refusal (a Status object), or the body."""
    try:
        body: Any = reply.json()
    except ValueError:
        return reply.text
    return str(body.get("message", reply.text)) if isinstance(body, dict) else reply.text
