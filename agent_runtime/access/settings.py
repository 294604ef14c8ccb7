"""Access settings, read once at start-up: which credentials the runtime accepts and who is who.

From the AgentConfig's ``access`` block (the operator writes it from the Agent's ``spec.access``) and the
command line: ``--api-token-file`` (or ``GATEHOUSE_API_TOKEN``, tokens added to the file's),
``--insecure-allow-anonymous``; for the web inbox ``--ui-trusted-proxy``, ``--ui-session-key-file`` and
``--ui-session-ttl`` (:mod:`agent_runtime.access.proxy`, :mod:`agent_runtime.access.sessions`). No credential
configured means local mode: every caller is ``anonymous``, which the app allows on a loopback address only,
unless ``--insecure-allow-anonymous`` says otherwise.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from agent_runtime.access.tokens import Tokens, parse_tokens
from agent_runtime.agent_config import AccessConfig, JwtConfig
from agent_runtime.principals import ANONYMOUS, UNOWNED, Identities

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
    trusted_proxies: tuple[str, ...] = ()  # --ui-trusted-proxy
    session_key_file: Path | None = None  # --ui-session-key-file (else the key kept in the database)
    session_ttl: float = 8 * 3600.0  # --ui-session-ttl

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
    session_ttl: float = 8 * 3600.0,
) -> AccessSettings:
    env = os.environ if env is None else env
    path = token_file or (Path(access.token_file) if access.token_file else None)
    tokens = parse_tokens(path.read_text(), DEFAULT_TOKEN_PRINCIPAL) if path is not None else {}
    extra = parse_tokens(env.get("GATEHOUSE_API_TOKEN", ""), DEFAULT_TOKEN_PRINCIPAL)
    tokens = {**extra, **tokens}
    return AccessSettings(
        tokens=tokens, jwt=access.jwt, kubernetes_tokens=access.kubernetes_tokens,
        identities=Identities.of(access.identities), allow_anonymous_remote=insecure_allow_anonymous,
        unowned_owner=access.unowned_tasks_owner, trusted_proxies=trusted_proxies, session_key_file=session_key_file,
        session_ttl=session_ttl,
    )


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


__all__ = ["DEFAULT_TOKEN_PRINCIPAL", "AccessSettings", "is_loopback", "load_access_settings"]
