"""Access settings, read once at start-up: which credentials the runtime accepts and who is who.

From the AgentConfig's ``access`` block (the operator writes it from the Agent's ``spec.access``) and the
command line: ``--api-token-file`` (or ``GATEHOUSE_API_TOKEN``, tokens added to the file's),
``--insecure-allow-anonymous``, ``--allowed-host`` (:mod:`agent_runtime.access.hosts`); for the web inbox
``--ui-trusted-proxy`` and ``--ui-trusted-proxy-secret-file`` (:mod:`agent_runtime.access.proxy`),
``--ui-session-key-file``, ``--ui-session-ttl`` and ``--ui-secure-cookie`` (:mod:`agent_runtime.access.sessions`).
No credential configured means local mode: every caller is ``anonymous``, which the app allows on a loopback address
only, unless ``--insecure-allow-anonymous`` says otherwise.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from agent_runtime.access.hosts import ANY_HOST, host_of, is_loopback
from agent_runtime.access.proxy import TrustedProxy
from agent_runtime.access.tokens import Tokens, parse_tokens
from agent_runtime.contract.agent_config import AccessConfig, JwtConfig
from agent_runtime.contract.principals import ANONYMOUS, UNOWNED, Identities

DEFAULT_TOKEN_PRINCIPAL = "rest"  # who a bare token (no "principal:") authenticates


@dataclass(frozen=True)
class AccessSettings:
    tokens: Tokens = field(default_factory=dict)
    jwt: JwtConfig | None = None
    kubernetes_tokens: bool = False  # in a cluster: ServiceAccount tokens through TokenReview
    identities: Identities = field(default_factory=Identities)
    allow_anonymous_remote: bool = False  # --insecure-allow-anonymous
    unowned_owner: str | None = None  # who gets tasks written before tasks had owners
    # the web inbox (agent_runtime.ui): proxies whose X-Forwarded-User/-Groups are believed, the session cookie's key
    proxy: TrustedProxy = field(default_factory=TrustedProxy)  # --ui-trusted-proxy, --ui-trusted-proxy-secret-file
    session_key_file: Path | None = None  # --ui-session-key-file (else the key kept in the database)
    session_ttl: float = 8 * 3600.0  # --ui-session-ttl
    secure_cookies: bool = False  # --ui-secure-cookie: the session cookie is Secure on every request
    allowed_hosts: tuple[str, ...] = ()  # --allowed-host: Host names the DNS-rebinding check allows besides loopback

    @property
    def configured(self) -> bool:
        """Some credential is configured (tokens or JWT; TokenReview counts only where there is a cluster)."""
        return bool(self.tokens) or self.jwt is not None

    def owner_of_unowned(self, authenticated: bool) -> str:
        """Local mode gives earlier tasks to ``anonymous`` (the same caller as before); with authentication on,
        to the configured principal, else to a name nobody authenticates as."""
        if self.unowned_owner:
            return self.identities.canonical(self.unowned_owner)
        return UNOWNED if authenticated else ANONYMOUS


def load_access_settings(
    access: AccessConfig, *, token_file: Path | None = None, insecure_allow_anonymous: bool = False,
    env: Mapping[str, str] | None = None, trusted_proxies: tuple[str, ...] = (), session_key_file: Path | None = None,
    session_ttl: float = 8 * 3600.0, trusted_proxy_secret_file: Path | None = None, secure_cookies: bool = False,
    allowed_hosts: tuple[str, ...] = (),
) -> AccessSettings:
    """Raises ValueError for a trusted proxy network or a host that cannot be used (checked now, before start-up)."""
    env = os.environ if env is None else env
    path = token_file or (Path(access.token_file) if access.token_file else None)
    tokens = parse_tokens(path.read_text(), DEFAULT_TOKEN_PRINCIPAL) if path is not None else {}
    extra = parse_tokens(env.get("GATEHOUSE_API_TOKEN", ""), DEFAULT_TOKEN_PRINCIPAL)
    tokens = {**extra, **tokens}
    secret = trusted_proxy_secret_file.read_text().strip() if trusted_proxy_secret_file is not None else None
    proxy = TrustedProxy.of(trusted_proxies, secret)  # a bad network, or one with loopback and no secret: refused now
    for host in allowed_hosts:
        if host.strip() != ANY_HOST:
            host_of(host)
    return AccessSettings(
        tokens=tokens, jwt=access.jwt, kubernetes_tokens=access.kubernetes_tokens,
        identities=Identities.of(access.identities), allow_anonymous_remote=insecure_allow_anonymous,
        unowned_owner=access.unowned_tasks_owner, proxy=proxy,
        session_key_file=session_key_file, session_ttl=session_ttl, secure_cookies=secure_cookies,
        allowed_hosts=allowed_hosts,
    )


__all__ = ["DEFAULT_TOKEN_PRINCIPAL", "AccessSettings", "is_loopback", "load_access_settings"]
