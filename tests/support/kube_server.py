"""Serve a :class:`tests.support.kube_emulator.KubeEmulator` on 127.0.0.1 from a background thread.

:func:`serve` gives the emulator its own thread and event loop -- so kopf (in another thread, via
``KopfRunner``), the ``kubernetes`` client and ``kubectl`` all reach it over real HTTP -- and
:func:`write_kubeconfig` writes a kubeconfig pointing at it.

The emulator listens twice: plain HTTP (:attr:`RunningEmulator.url`, credential-free kubeconfigs: the admin)
and HTTPS with a throwaway self-signed certificate (:attr:`RunningEmulator.tls_url`). kubectl (client-go)
sends a kubeconfig's bearer token only over TLS, so :meth:`RunningEmulator.kubeconfig_for` -- a kubeconfig
for one user, e.g. ``KUBECONFIG=<alice's file> kubectl auth whoami`` -- points at the HTTPS listener and
trusts its certificate.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ssl
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp.test_utils
import aiohttp.web
import aiohttp.web_runner
import kmock
import yaml

from tests.support import crd_validation
from tests.support.kube_emulator import KubeEmulator
from tests.support.tls import self_signed

__all__ = ["RunningEmulator", "serve", "write_kubeconfig"]


def write_kubeconfig(
    path: Path, server: str, token: str | None = None, namespace: str = "default", certificate_authority: str | None = None,
) -> Path:
    """A kubeconfig with one context pointing at ``server``: without credentials (the emulator's admin), or with
    the bearer ``token`` of one user (kubectl sends it only to an ``https://`` server; ``certificate_authority``
    is the PEM it trusts there)."""
    cluster: dict[str, Any] = {"server": server}
    if certificate_authority:
        cluster["certificate-authority-data"] = base64.b64encode(certificate_authority.encode()).decode()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "emulated", "cluster": cluster}],
        "users": [{"name": "tester", "user": {"token": token} if token else {}}],
        "contexts": [{"name": "emulated", "context": {"cluster": "emulated", "user": "tester", "namespace": namespace}}],
        "current-context": "emulated",
    }
    path.write_text(yaml.safe_dump(config))
    return path


def _ssl_context() -> ssl.SSLContext:
    cert, key = self_signed()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    with tempfile.TemporaryDirectory() as tmp:  # load_cert_chain reads files only
        (Path(tmp) / "tls.crt").write_text(cert)
        (Path(tmp) / "tls.key").write_text(key)
        context.load_cert_chain(Path(tmp) / "tls.crt", Path(tmp) / "tls.key")
    return context


class _QuietServer(aiohttp.test_utils.RawTestServer):
    """kmock's default server without aiohttp's per-request access log line and debug mode (a real API server
    does not log every request either; under load the formatting alone cost the emulator ~10% of its time)."""

    async def _make_runner(self, debug: bool = True, **kwargs: Any) -> aiohttp.web_runner.ServerRunner:
        return await super()._make_runner(debug=False, access_log=None, **kwargs)


@dataclass
class RunningEmulator:
    """A served emulator: its URLs, and a way to run coroutines in its event loop."""

    emulator: KubeEmulator
    url: str
    loop: asyncio.AbstractEventLoop
    tls_url: str = ""  # the same emulator over HTTPS (see the module docstring)

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` in the emulator's loop (for touching ``emulator.objects`` safely)."""
        async def run() -> Any:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout=10)

    @property
    def certificate(self) -> str:
        """The PEM certificate of :attr:`tls_url` (trust it to talk HTTPS to the emulator)."""
        return self_signed()[0]

    def kubeconfig_for(self, path: Path, token: str, namespace: str = "default") -> Path:
        """A kubeconfig at ``path`` that talks to this server (over HTTPS) as the user of ``token``."""
        return write_kubeconfig(path, self.tls_url, token, namespace, self.certificate)

    def user_kubeconfig(self, directory: Path, name: str, groups: tuple[str, ...] | list[str] = ()) -> Path:
        """A new user ``name`` (:meth:`KubeEmulator.add_user`) and a kubeconfig for them in ``directory``."""
        token = self.emulator.add_user(name, groups)
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
        return self.kubeconfig_for(directory / f"kubeconfig-{safe}", token)


@contextlib.contextmanager
def serve(crd_dir: Path | None = crd_validation.CRD_DIR, host: str = "127.0.0.1") -> Iterator[RunningEmulator]:
    """Serve a fresh :class:`KubeEmulator` (with the CRDs of ``crd_dir``) on ``host`` from a background thread."""
    emulator = KubeEmulator()
    if crd_dir is not None:
        emulator.add_crds_from(crd_dir)
    started: threading.Event = threading.Event()
    stop: list[asyncio.Event] = []
    box: dict[str, Any] = {}

    async def main() -> None:
        try:
            async with emulator, kmock.Server(emulator, host=host, server_cls=_QuietServer) as server:
                tls = aiohttp.web_runner.ServerRunner(aiohttp.web.Server(emulator, access_log=None))
                await tls.setup()
                site = aiohttp.web.TCPSite(tls, host, 0, ssl_context=_ssl_context())
                await site.start()
                try:
                    box["url"] = f"http://{host}:{server.port}"
                    box["tls_url"] = f"https://{host}:{tls.addresses[0][1]}"
                    box["loop"] = asyncio.get_running_loop()
                    stop.append(asyncio.Event())
                    started.set()
                    await stop[0].wait()
                    emulator.stop_watches()
                    for _ in range(10):  # let open watch streams notice and end
                        if not emulator.open_watches:
                            break
                        await asyncio.sleep(0.1)
                finally:
                    await tls.cleanup()
        except BaseException as exc:
            box["error"] = exc
            started.set()
            raise

    thread = threading.Thread(target=asyncio.run, args=(main(),), name="kube-emulator", daemon=True)
    thread.start()
    started.wait(timeout=30)
    if "error" in box or "url" not in box:
        raise RuntimeError(f"the emulated API server did not start: {box.get('error')!r}")
    try:
        yield RunningEmulator(emulator, box["url"], box["loop"], box["tls_url"])
    finally:
        box["loop"].call_soon_threadsafe(stop[0].set)
        thread.join(timeout=30)
