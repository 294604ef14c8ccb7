"""Who is calling: one canonical :class:`Principal` per person, whatever channel they came through.

Each channel authenticates its caller under the name that channel knows (:mod:`agent_runtime.access`):

- a token-file user: the name before the token (``alice``), with the groups the file gives it;
- a JWT: ``<issuer>#<sub>``, or the value of a configured claim (``email``), with the groups claim;
- a Kubernetes user or ServiceAccount: the user name the API server reports (``alice@example.com``,
  ``system:serviceaccount:ns:name``), with its groups.

:class:`Identities` (from the Agent's ``spec.access.identities``) then folds aliases into one principal, so
that ``alice`` on REST, her JWT and ``alice@example.com`` on kubectl count as one approver, for N-of-M and
for separation of duties alike. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from agent_runtime.contract.agent_config import IdentityConfig

# The runtime acting for a task's owner (timeouts, resumes after REST or kubectl decisions): never a caller.
INTERNAL = "gatehouse:internal"
# Everyone, when the runtime serves loopback with no authentication configured (local use, the demo).
ANONYMOUS = "anonymous"
# The owner given to tasks written before tasks had owners, when no principal is configured for them:
# nobody authenticates as this name, so such tasks are readable by no caller (the runtime still resumes them).
UNOWNED = "gatehouse:unowned"


@dataclass(frozen=True)
class Principal:
    """A canonical principal: ``id`` is what approvers lists, votes and task owners name."""

    id: str
    groups: frozenset[str] = frozenset()
    via: str = ""  # how it authenticated: token, jwt, kubernetes, anonymous, internal
    seen_as: str = ""  # the name the channel authenticated, before identities were applied (kept for the audit)

    @property
    def anonymous(self) -> bool:
        return self.via == "anonymous"

    def describe(self) -> str:
        alias = f" (as {self.seen_as} via {self.via})" if self.seen_as and self.seen_as != self.id else ""
        return f"{self.id}{alias}"


@dataclass(frozen=True)
class Identities:
    """Alias → canonical principal. Unknown names are their own principal."""

    aliases: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, identities: Iterable[IdentityConfig]) -> Identities:
        aliases: dict[str, str] = {}
        for identity in identities:
            for alias in [identity.principal, *identity.aliases]:
                known = aliases.get(alias)
                if known is not None and known != identity.principal:
                    raise ValueError(f"identity alias {alias!r} is given to both {known!r} and {identity.principal!r}")
                aliases[alias] = identity.principal
        return cls(aliases)

    def canonical(self, name: str) -> str:
        return self.aliases.get(name, name)

    def resolve(self, name: str, groups: Iterable[str] = (), via: str = "") -> Principal:
        return Principal(self.canonical(name), frozenset(groups), via, name)


def anonymous() -> Principal:
    return Principal(ANONYMOUS, frozenset(), "anonymous", ANONYMOUS)


__all__ = ["ANONYMOUS", "INTERNAL", "UNOWNED", "Identities", "Principal", "anonymous"]
