"""The Host check: a guard against DNS rebinding where the network is no guard.

A web page on ``rebind.attacker.example`` can re-point its own name at 127.0.0.1; the browser then sends the page's
requests to a server on this machine, as the page's own origin, so neither the same-origin policy nor an ``Origin``
check stops it. What it cannot change is the ``Host`` header, which names the attacker's site. So a server that
answers anyone who reaches it (the runtime in local mode) or that sits on loopback answers only requests addressed to:

- a loopback name or address (``localhost``, ``127.0.0.0/8``, ``[::1]``) on any port: a port-forward uses another
  local port;
- the ``--public-url`` host, and the names given with ``--allowed-host`` (repeatable), on any port.

Anything else is answered ``421 Misdirected Request``. The probes (``/healthz``, ``/readyz``) are exempt: a kubelet
addresses them by the pod's IP. ``kubectl gatehouse inbox`` allows loopback on its own port only.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

ANY_HOST = "*"  # --allowed-host '*': no Host check


def is_loopback(host: str) -> bool:
    """A loopback name or address: ``localhost``, ``127.0.0.0/8``, ``::1``."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def split_host(header: str) -> tuple[str, int | None] | None:
    """``Host`` as (name, port): lower-case, no trailing dot, brackets off an IPv6 address; None when malformed."""
    header = header.strip().lower()
    if header.startswith("["):
        name, close, rest = header[1:].partition("]")
        if not close or (rest and not rest.startswith(":")):
            return None
        port_text = rest[1:] if rest else ""
    else:
        name, _, port_text = header.partition(":")
    if not name or (port_text and not port_text.isdigit()):
        return None
    return _canonical(name.rstrip(".")), int(port_text) if port_text else None


def _canonical(name: str) -> str:
    try:
        return str(ipaddress.ip_address(name))  # one spelling per address (IPv6 has many)
    except ValueError:
        return name


def host_of(value: str) -> str:
    """A configured host (``app.example.com``, ``app.example.com:8443``, ``[fd00::1]``, ``fd00::1``) as the name it
    allows."""
    try:
        return str(ipaddress.ip_address(value.strip()))
    except ValueError:
        pass
    found = split_host(value)
    if found is None:
        raise ValueError(f"--allowed-host {value!r} is not a host name or address")
    return found[0]


@dataclass(frozen=True)
class AllowedHosts:
    names: frozenset[str] = frozenset()  # allowed on any port, besides loopback
    port: int | None = None  # loopback on this port only (kubectl gatehouse inbox); None: any port

    @classmethod
    def of(cls, names: Iterable[str]) -> AllowedHosts:
        return cls(frozenset(host_of(n) for n in names if n.strip()))

    def allows(self, header: str | None) -> bool:
        found = split_host(header or "")
        if found is None:
            return False
        name, port = found
        if is_loopback(name):
            return self.port is None or port == self.port
        return name in self.names


def runtime_hosts(
    configured: Iterable[str], *, local_mode: bool, loopback_bind: bool, public_url: str | None,
    anonymous_remote: bool = False,
) -> AllowedHosts | None:
    """What the runtime's Host check allows; None: no check. On in local mode (no credential: whoever reaches the
    runtime may decide) and, by default, on a loopback address; ``--allowed-host '*'`` turns it off, except in local
    mode without ``--insecure-allow-anonymous``, where it would let any web page decide through 127.0.0.1."""
    names = [n.strip() for n in configured if n.strip()]
    if ANY_HOST in names:
        if local_mode and not anonymous_remote:
            raise ValueError(
                "--allowed-host '*' would let any web page that re-points its name at this address (DNS rebinding) use "
                "the agent and decide its calls, since no credential is configured: name the hosts instead")
        return None
    if not local_mode and not loopback_bind:
        return None
    public = urlsplit(public_url).hostname if public_url else None
    return AllowedHosts.of([*names, *([public] if public else [])])


class HostCheck:
    """Answer 421 to a request whose ``Host`` is not allowed (``exempt`` paths aside)."""

    def __init__(self, app: ASGIApp, allowed: AllowedHosts, exempt: frozenset[str] = frozenset(),
                 message: str = "") -> None:
        self.app = app
        self.allowed = allowed
        self.exempt = exempt
        self.message = message or (
            "misdirected request: this server answers only requests addressed to a loopback name or address, its "
            "--public-url host or an --allowed-host name (a guard against DNS rebinding)")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] not in self.exempt \
                and not self.allowed.allows(Headers(scope=scope).get("host")):
            body = json.dumps({"error": self.message}).encode()
            await send({"type": "http.response.start", "status": 421,
                        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)


__all__ = ["ANY_HOST", "AllowedHosts", "HostCheck", "host_of", "is_loopback", "runtime_hosts", "split_host"]
