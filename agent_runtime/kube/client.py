"""A small async Kubernetes API client over httpx, for the runtime's few calls.

Credentials come from the ``kubernetes`` package's loaders (a kubeconfig file, or in-cluster service
account; :func:`agent_runtime.kube.sdk.credentials`), read once at start-up; the in-cluster token is re-read
through the loader's refresh hook, as service account tokens rotate. Requests are plain JSON (merge patches for
updates), so everything stays in the runtime's event loop and a watch can be cancelled at shutdown.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx

from agent_runtime.kube import sdk


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


MAX_LANES = 64  # lanes at most (the mirror's 32 writers and its Events need 33); past it, the shared client serves
ONE_CONNECTION = httpx.Limits(max_connections=1, max_keepalive_connections=1)


class KubeClient:
    """Requests over ``client``; or, given ``lanes`` (a maker of clients of one connection, as :meth:`connect` gives),
    each request borrows an idle lane (one is made when none is idle, up to :data:`MAX_LANES`) and gives it back when
    it ends, and only watches (and requests past the limit) use ``client``.

    Why lanes: httpx's pool looks at every connection it holds, twice per request (a ``poll`` on each idle one), so
    with the mirror's 32 writers in flight one pool cost ~1.8 ms of CPU per request, lanes ~0.7 ms (a ToolApproval
    is three requests: docs/kubectl.md, "Mirror"). The lanes stay as many as the requests once in flight at once,
    each keeping its connection alive."""

    def __init__(
        self, client: httpx.AsyncClient, auth: sdk.Credentials | None = None,
        lanes: Callable[[], httpx.AsyncClient] | None = None,
    ) -> None:
        self._client = client
        self._auth = auth  # asked for a fresh token per request
        self._new_lane = lanes
        self._lanes: list[httpx.AsyncClient] = []  # every lane made
        self._idle: list[httpx.AsyncClient] = []  # the lanes no request is using

    @classmethod
    def connect(cls, kubeconfig: Path | None, in_cluster: bool) -> KubeClient:
        if kubeconfig is not None and not Path(kubeconfig).is_file():
            raise KubeConfigError(f"cannot use kubeconfig {kubeconfig}: no such file")
        try:
            credentials = sdk.credentials(str(kubeconfig) if kubeconfig else None, in_cluster)
        except sdk.NoCredentials as exc:
            where = "the in-cluster service account" if in_cluster else f"kubeconfig {kubeconfig or '(default)'}"
            raise KubeConfigError(f"cannot use {where}: {exc}") from None
        # One TLS context, read once and shared by every lane.
        if not credentials.verify_ssl:
            tls = httpx.create_ssl_context(verify=False)
        elif credentials.ca_cert:
            tls = ssl.create_default_context(cafile=credentials.ca_cert)
        else:
            tls = httpx.create_ssl_context()  # certifi's, or $SSL_CERT_FILE / $SSL_CERT_DIR
        if credentials.cert_file:
            tls.load_cert_chain(credentials.cert_file, credentials.key_file)

        def client(limits: httpx.Limits) -> httpx.AsyncClient:
            return httpx.AsyncClient(base_url=credentials.host, verify=tls, timeout=httpx.Timeout(10.0),
                                     headers={"Accept": "application/json"}, limits=limits)

        return cls(client(httpx.Limits()), credentials, lanes=lambda: client(ONE_CONNECTION))

    def _headers(self) -> dict[str, str]:
        token = self._auth.token() if self._auth is not None else None
        return {"Authorization": token} if token else {}

    async def aclose(self) -> None:
        for lane in self._lanes:
            await lane.aclose()
        self._lanes.clear()
        self._idle.clear()
        await self._client.aclose()

    def _borrow(self) -> httpx.AsyncClient | None:
        if self._idle:
            return self._idle.pop()
        if self._new_lane is None or len(self._lanes) >= MAX_LANES:
            return None
        lane = self._new_lane()
        self._lanes.append(lane)
        return lane

    async def request(
        self, method: str, path: str, body: Any = None, params: dict[str, str] | None = None,
        content_type: str = "application/json",
    ) -> dict[str, Any]:
        headers = self._headers()
        if body is not None:
            headers["Content-Type"] = content_type
        lane = self._borrow()
        try:
            reply = await (lane or self._client).request(
                method, path, params=params, headers=headers, content=json.dumps(body) if body is not None else None
            )
        except httpx.HTTPError as exc:
            raise KubeError(0, f"{method} {path}: {type(exc).__name__}: {exc}") from None
        finally:
            if lane is not None:
                self._idle.append(lane)
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
