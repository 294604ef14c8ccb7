"""Identity headers from a trusted authenticating proxy (oauth2-proxy and the like).

When the runtime sits behind a proxy that authenticates people itself, the proxy passes who they are in
``X-Forwarded-User`` and ``X-Forwarded-Groups`` (comma-separated). Anyone can send those headers, so they are
honoured only on connections from the configured source addresses (``--ui-trusted-proxy 10.0.0.0/8``,
repeatable), and only for the web inbox's pages and the browser's own requests (see
:mod:`agent_runtime.access.middleware`). Pure: no I/O.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from agent_runtime.access.methods import Identity

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
USER_HEADER = "x-forwarded-user"
GROUPS_HEADER = "x-forwarded-groups"


@dataclass(frozen=True)
class TrustedProxy:
    networks: tuple[Network, ...] = ()

    @classmethod
    def of(cls, sources: Iterable[str]) -> TrustedProxy:
        networks = []
        for source in sources:
            try:
                networks.append(ipaddress.ip_network(source.strip(), strict=False))
            except ValueError:
                raise ValueError(f"--ui-trusted-proxy {source!r} is not an address or network (10.0.0.0/8)") from None
        return cls(tuple(networks))

    @property
    def configured(self) -> bool:
        return bool(self.networks)

    def trusts(self, client_host: str | None) -> bool:
        if not client_host or not self.networks:
            return False
        try:
            address = ipaddress.ip_address(client_host)
        except ValueError:
            return False
        return any(address in network for network in self.networks)

    def identity(self, client_host: str | None, headers: Mapping[str, str]) -> Identity | None:
        """The person the proxy vouches for; None unless the connection is from a trusted proxy that named one."""
        if not self.trusts(client_host):
            return None
        user = (headers.get(USER_HEADER) or "").strip()
        if not user:
            return None
        groups = frozenset(g.strip() for g in (headers.get(GROUPS_HEADER) or "").split(",") if g.strip())
        return Identity(user, groups, "proxy")


__all__ = ["GROUPS_HEADER", "USER_HEADER", "TrustedProxy"]
