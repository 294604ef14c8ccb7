"""A small async Kubernetes API client over httpx, for the runtime's few calls.

Credentials come from the ``kubernetes`` package's loaders (a kubeconfig file, or in-cluster service
account), read once at start-up; the in-cluster token is re-read through the loader's refresh hook, as
service account tokens rotate. Requests are plain JSON (merge patches for updates), so everything stays
in the runtime's event loop and a watch can be cancelled at shutdown.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import yaml


class KubeError(Exception):
    """An answer other than 2xx from the API server (``status`` 0: it could not be reached)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}" if status else message)
        self.status = status
        self.message = message

    @property
    def permanent(self) -> bool:
        """A request the API refused for good (retrying the same body cannot help)."""
        return 400 <= self.status < 500 and self.status not in (408, 409, 429)


class KubeConfigError(ValueError):
    """The cluster's credentials could not be read: a missing or malformed kubeconfig, no service account."""


class KubeClient:
    def __init__(self, client: httpx.AsyncClient, auth: Any = None) -> None:
        self._client = client
        self._auth = auth  # a kubernetes.client.Configuration, asked for a fresh token per request

    @classmethod
    def connect(cls, kubeconfig: Path | None, in_cluster: bool) -> KubeClient:
        from kubernetes import client as k8s
        from kubernetes import config as k8s_config

        configuration = k8s.Configuration()
        if kubeconfig is not None and not Path(kubeconfig).is_file():
            raise KubeConfigError(f"cannot use kubeconfig {kubeconfig}: no such file")
        try:
            if in_cluster:
                k8s_config.load_incluster_config(client_configuration=configuration)
            else:
                config_file = str(kubeconfig) if kubeconfig else None
                k8s_config.load_kube_config(config_file=config_file, client_configuration=configuration)
        except (k8s_config.ConfigException, OSError, yaml.YAMLError) as exc:
            where = "the in-cluster service account" if in_cluster else f"kubeconfig {kubeconfig or '(default)'}"
            raise KubeConfigError(f"cannot use {where}: {type(exc).__name__}: {exc}") from None
        verify: Any = (configuration.ssl_ca_cert or True) if configuration.verify_ssl else False
        cert: str | tuple[str, str] | None = None
        if configuration.cert_file:
            cert = (configuration.cert_file, configuration.key_file) if configuration.key_file else configuration.cert_file
        http = httpx.AsyncClient(
            base_url=configuration.host, verify=verify, cert=cert,
            timeout=httpx.Timeout(10.0), headers={"Accept": "application/json"},
        )
        return cls(http, configuration)

    def _headers(self) -> dict[str, str]:
        if self._auth is None:
            return {}
        # kubernetes' config loaders store the bearer token ("Bearer …") under "BearerToken" (older ones under
        # "authorization"); asking for it also runs their refresh hook (projected tokens are rotated).
        token = self._auth.get_api_key_with_prefix("BearerToken", alias="authorization")
        return {"Authorization": token} if token else {}

    async def aclose(self) -> None:
        await self._client.aclose()

    async def request(
        self, method: str, path: str, body: Any = None, params: dict[str, str] | None = None,
        content_type: str = "application/json",
    ) -> dict[str, Any]:
        headers = self._headers()
        if body is not None:
            headers["Content-Type"] = content_type
        try:
            reply = await self._client.request(
                method, path, params=params, headers=headers, content=json.dumps(body) if body is not None else None
            )
        except httpx.HTTPError as exc:
            raise KubeError(0, f"{method} {path}: {type(exc).__name__}: {exc}") from None
        if reply.status_code >= 300:
            try:
                message = reply.json().get("message") or reply.text
            except ValueError:
                message = reply.text
            raise KubeError(reply.status_code, f"{method} {path}: {message}")
        return reply.json() if reply.content else {}

    async def get(self, path: str, params: dict[str, str] | None = None) -> dict[str, Any]:
        return await self.request("GET", path, params=params)

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self.request("POST", path, body)

    async def merge_patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self.request("PATCH", path, body, content_type="application/merge-patch+json")

    async def delete(self, path: str) -> dict[str, Any]:
        return await self.request("DELETE", path)

    async def watch(self, path: str, params: dict[str, str], timeout: float) -> AsyncIterator[dict[str, Any]]:
        """Watch events (``{"type", "object"}``) until the server ends the stream after ``timeout`` seconds."""
        query = {**params, "watch": "true", "timeoutSeconds": str(int(timeout)), "allowWatchBookmarks": "true"}
        try:
            async with self._client.stream(
                "GET", path, params=query, headers=self._headers(), timeout=httpx.Timeout(10.0, read=timeout + 30)
            ) as reply:
                if reply.status_code >= 300:
                    await reply.aread()
                    raise KubeError(reply.status_code, f"watch {path}: {reply.text}")
                async for line in reply.aiter_lines():
                    if line.strip():
                        yield json.loads(line)
        except httpx.HTTPError as exc:
            raise KubeError(0, f"watch {path}: {type(exc).__name__}: {exc}") from None


__all__ = ["KubeClient", "KubeConfigError", "KubeError"]
