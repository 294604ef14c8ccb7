"""Headers from a trusted proxy in front of the runtime (oauth2-proxy, an ingress that terminates TLS).

A proxy that authenticates people itself passes who they are in ``X-Forwarded-User`` and ``X-Forwarded-Groups``
(comma-separated); one that terminates TLS says so in ``X-Forwarded-Proto``. Anyone can send those headers, so they
are believed only from a proxy that vouches for them (:meth:`TrustedProxy.vouches`):

- the connection's TCP peer is inside a configured network (``--ui-trusted-proxy 10.0.0.0/8``, repeatable). The
  peer is the socket's own address: every server the project starts runs uvicorn with ``proxy_headers=False``, so no
  ``X-Forwarded-For`` rewrites it first, whatever ``$FORWARDED_ALLOW_IPS`` says, and nothing here reads that header;
- and, when a shared secret is configured (``--ui-trusted-proxy-secret-file``), the request carries it in
  ``X-Gatehouse-Proxy-Secret`` (compared in constant time). A network that contains a loopback address needs the
  secret: inside a pod, a sidecar proxy, ``kubectl port-forward`` and any other local process all arrive from
  127.0.0.1, so the address alone proves nothing there. :meth:`TrustedProxy.of` refuses such a network without one.

Pure: no I/O.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from agent_runtime.access.methods import Identity

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
USER_HEADER = "x-forwarded-user"
GROUPS_HEADER = "x-forwarded-groups"
PROTO_HEADER = "x-forwarded-proto"
HOST_HEADER = "x-forwarded-host"
SECRET_HEADER = "x-gatehouse-proxy-secret"
MIN_SECRET = 32  # characters of the shared secret, at least
_LOOPBACK = (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128"),
             ipaddress.ip_network("::ffff:127.0.0.0/104"))  # the last: 127.0.0.0/8 as a dual-stack socket reports it


@dataclass(frozen=True)
class TrustedProxy:
    networks: tuple[Network, ...] = ()
    secret: str | None = None  # what the proxy sends in X-Gatehouse-Proxy-Secret; None: the address alone

    @classmethod
    def of(cls, sources: Iterable[str], secret: str | None = None) -> TrustedProxy:
        networks = []
        for source in sources:
            try:
                networks.append(ipaddress.ip_network(source.strip(), strict=False))
            except ValueError:
                raise ValueError(f"--ui-trusted-proxy {source!r} is not an address or network (10.0.0.0/8)") from None
        if secret is not None and len(secret) < MIN_SECRET:
            raise ValueError(f"--ui-trusted-proxy-secret-file: the secret must be at least {MIN_SECRET} characters, "
                             f"it has {len(secret)}")
        looped = [str(n) for n in networks if any(n.version == lo.version and n.overlaps(lo) for lo in _LOOPBACK)]
        if looped and secret is None:
            raise ValueError(
                f"--ui-trusted-proxy {', '.join(looped)} contains a loopback address: every local process (a sidecar, "
                "kubectl port-forward) connects from there, so the address proves nothing. Give the proxy a shared "
                "secret to send in X-Gatehouse-Proxy-Secret (--ui-trusted-proxy-secret-file)")
        return cls(tuple(networks), secret)

    @property
    def configured(self) -> bool:
        return bool(self.networks)

    def trusts(self, client_host: str | None) -> bool:
        """Whether the TCP peer is inside a trusted network (the secret aside)."""
        if not client_host or not self.networks:
            return False
        try:
            address = ipaddress.ip_address(client_host)
        except ValueError:
            return False
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            mapped: ipaddress.IPv4Address | ipaddress.IPv6Address = address.ipv4_mapped
            return any(address in network or mapped in network for network in self.networks)
        return any(address in network for network in self.networks)

    def vouches(self, client_host: str | None, headers: Mapping[str, str]) -> bool:
        """Whether this request comes from the trusted proxy: its peer address, and the secret when there is one."""
        if not self.trusts(client_host):
            return False
        if self.secret is None:
            return True
        sent = headers.get(SECRET_HEADER) or ""
        return hmac.compare_digest(sent.encode(), self.secret.encode())

    def identity(self, client_host: str | None, headers: Mapping[str, str]) -> Identity | None:
        """The person the proxy vouches for; None unless the request is the trusted proxy's and names one."""
        return named(headers) if self.vouches(client_host, headers) else None


def named(headers: Mapping[str, str]) -> Identity | None:
    """The person ``X-Forwarded-User``/``-Groups`` name. Ask only for a request :meth:`TrustedProxy.vouches` for."""
    user = (headers.get(USER_HEADER) or "").strip()
    if not user:
        return None
    groups = frozenset(g.strip() for g in (headers.get(GROUPS_HEADER) or "").split(",") if g.strip())
    return Identity(user, groups, "proxy")


def forwarded_https(headers: Mapping[str, str]) -> bool:
    """Whether ``X-Forwarded-Proto`` says the browser spoke HTTPS to the proxy (the last value: the hop nearest us).
    Ask only for a request :meth:`TrustedProxy.vouches` for."""
    values = [v.strip().lower() for v in (headers.get(PROTO_HEADER) or "").split(",") if v.strip()]
    return bool(values) and values[-1] == "https"


__all__ = ["GROUPS_HEADER", "HOST_HEADER", "PROTO_HEADER", "SECRET_HEADER", "USER_HEADER", "TrustedProxy",
           "forwarded_https", "named"]
