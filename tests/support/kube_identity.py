"""Who is calling the emulated API server, and what they may do: bearer tokens and a minimal RBAC.

Used by :class:`tests.support.kube_emulator.KubeEmulator` (its ``add_user``, ``add_service_account``,
``enforce_rbac``, ``grant`` and TokenReview delegate here). A request without a token, or with one this
module did not issue, is the admin (``system:masters``) -- unless the emulator requires authentication.

RBAC is deliberately small: a grant is (subject, verbs, resources, namespace or cluster-wide, API group),
with ``*`` wildcards; ``system:masters`` bypasses it; there are no roles, bindings or aggregation. A
resource is matched as the API server does: ``toolapprovals`` does not cover ``toolapprovals/status``,
``*`` covers every resource and subresource.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import aiohttp.web
import kmock

if TYPE_CHECKING:
    from kmock._internal import rendering

__all__ = [
    "MASTERS", "REVIEWS", "Grant", "Identities", "IdentityMixin", "UserInfo", "forbidden", "self_subject_review",
    "token_review", "verb_of",
]

MASTERS = "system:masters"
AUTHENTICATED = "system:authenticated"
_AUTHN = "/apis/authentication.k8s.io/v1"
REVIEWS = (f"{_AUTHN}/selfsubjectreviews", f"{_AUTHN}/tokenreviews")  # POSTs answered by IdentityMixin._review


@dataclass(frozen=True)
class UserInfo:
    username: str
    groups: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"username": self.username, "groups": list(self.groups)}


@dataclass(frozen=True)
class Grant:
    subject: str  # a user name, or "group:<name>"
    verbs: frozenset[str]
    resources: frozenset[str]
    namespace: str | None  # None: every namespace and cluster-scoped resources (a ClusterRoleBinding)
    api_group: str

    def covers(self, user: UserInfo, verb: str, resource: str, api_group: str, namespace: str | None) -> bool:
        if self.subject.startswith("group:"):
            if self.subject[len("group:"):] not in user.groups:
                return False
        elif self.subject != user.username:
            return False
        if self.namespace is not None and self.namespace != namespace:
            return False
        if self.api_group != "*" and self.api_group != api_group:
            return False
        return bool({"*", verb} & self.verbs) and _resource_matches(self.resources, resource)


def _resource_matches(granted: frozenset[str], resource: str) -> bool:
    if "*" in granted or resource in granted:
        return True
    _, _, sub = resource.partition("/")
    return bool(sub) and f"*/{sub}" in granted


class Identities:
    """Tokens issued to users and ServiceAccounts, and the grants RBAC checks when it is enforced."""

    def __init__(self) -> None:
        self._tokens: dict[str, UserInfo] = {}
        self.grants: list[Grant] = []
        self.rbac = False

    def add_user(self, name: str, groups: Iterable[str] = ()) -> str:
        """A bearer token for ``name``; like the API server, every authenticated user is in ``system:authenticated``."""
        groups = tuple(dict.fromkeys([*groups, AUTHENTICATED]))
        token = secrets.token_urlsafe(24)
        self._tokens[token] = UserInfo(name, groups)
        return token

    def add_service_account(self, namespace: str, name: str) -> str:
        return self.add_user(
            f"system:serviceaccount:{namespace}:{name}", ("system:serviceaccounts", f"system:serviceaccounts:{namespace}"),
        )

    def user_of(self, token: str) -> UserInfo | None:
        """The user a token was issued to (``None``: not one of ours)."""
        return self._tokens.get(token)

    def authenticate(self, authorization: str | None) -> UserInfo | None:
        """The user of an ``Authorization: Bearer …`` header, or ``None`` for none or an unknown token."""
        scheme, _, token = (authorization or "").partition(" ")
        return self._tokens.get(token.strip()) if scheme.lower() == "bearer" else None

    def grant(
        self, subject: str, verbs: str | Iterable[str], resources: str | Iterable[str],
        namespace: str | None = None, api_group: str = "*",
    ) -> None:
        verbs = [verbs] if isinstance(verbs, str) else verbs
        resources = [resources] if isinstance(resources, str) else resources
        self.grants.append(Grant(subject, frozenset(verbs), frozenset(resources), namespace, api_group))

    def allows(self, user: UserInfo, verb: str, resource: str, api_group: str, namespace: str | None) -> bool:
        if not self.rbac or MASTERS in user.groups:
            return True
        return any(g.covers(user, verb, resource, api_group, namespace) for g in self.grants)


def verb_of(method: str, name: str | None, watch: bool) -> str:
    """The RBAC verb of a resource request."""
    if method == "GET":
        return "watch" if watch else ("list" if name is None else "get")
    if method == "DELETE":
        return "deletecollection" if name is None else "delete"
    return {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method, method.lower())


def forbidden(
    user: UserInfo, verb: str, plural: str, subresource: str | None, api_group: str, namespace: str | None, name: str | None,
) -> kmock.KubernetesError:
    """A 403 worded as the API server's authorizer words it."""
    resource = f"{plural}/{subresource}" if subresource else plural
    where = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    reason = f'User "{user.username}" cannot {verb} resource "{resource}" in API group "{api_group}" {where}'
    qualified = f"{plural}.{api_group}" if api_group else plural
    subject = f'{qualified} "{name}"' if name else qualified
    return kmock.KubernetesError(
        status=403, reason="Forbidden", message=f"{subject} is forbidden: {reason}",
        details={"name": name or "", "group": api_group, "kind": plural},
    )


def self_subject_review(user: UserInfo) -> dict[str, Any]:
    """The answer to a SelfSubjectReview (POST ``/apis/authentication.k8s.io/v1/selfsubjectreviews``)."""
    return {
        "apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview", "metadata": {"creationTimestamp": None},
        "status": {"userInfo": user.as_dict()},
    }


def token_review(identities: Identities, body: dict[str, Any]) -> dict[str, Any]:
    """The answer to a TokenReview: who a token belongs to, for tokens :class:`Identities` issued."""
    spec: dict[str, Any] = body["spec"] if isinstance(body.get("spec"), dict) else {}
    user = identities.user_of(str(spec.get("token") or ""))
    status: dict[str, Any] = {"authenticated": False, "user": {}}
    if user is not None:
        status = {"authenticated": True, "user": user.as_dict(), "audiences": list(spec.get("audiences") or [])}
    return {
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "metadata": {"creationTimestamp": None},
        "spec": spec, "status": status,
    }


class IdentityMixin:
    """The identity and RBAC side of :class:`tests.support.kube_emulator.KubeEmulator` (its fields live there)."""

    __slots__ = ()
    if TYPE_CHECKING:
        identities: Identities
        username: str
        require_auth: bool

    def add_user(self, name: str, groups: Iterable[str] = ()) -> str:
        """A new bearer token for user ``name`` (also in ``system:authenticated``, as every authenticated user)."""
        return self.identities.add_user(name, groups)

    def add_service_account(self, namespace: str, name: str) -> str:
        """A bearer token for ``system:serviceaccount:<namespace>:<name>`` with a ServiceAccount's groups."""
        return self.identities.add_service_account(namespace, name)

    def enforce_rbac(self, enabled: bool = True) -> None:
        """Refuse (403) resource requests no :meth:`grant` allows; ``system:masters`` (the admin) bypasses."""
        self.identities.rbac = enabled

    def grant(
        self, subject: str, verbs: str | Iterable[str], resources: str | Iterable[str],
        namespace: str | None = None, api_group: str = "*",
    ) -> None:
        """Allow ``subject`` (a user name or ``group:<name>``) ``verbs`` on ``resources`` (``"toolapprovals"``,
        ``"toolapprovals/status"``, ``"*"``) in ``namespace`` (``None``: everywhere, cluster scope included)."""
        self.identities.grant(subject, verbs, resources, namespace, api_group)

    def caller(self, authorization: str | None) -> UserInfo | None:
        """Who sends ``Authorization: <authorization>``; ``None`` (answer 401) only with ``require_auth``."""
        user = self.identities.authenticate(authorization)
        if user is None and not self.require_auth:
            user = UserInfo(self.username, (MASTERS, AUTHENTICATED))
        return user

    def _user(self, request: rendering.Request) -> UserInfo:
        raw = request._raw_request
        user = self.caller(raw.headers.get("Authorization") if raw is not None else None)
        assert user is not None  # the entry point answered 401 already
        return user

    def _authorize(self, request: rendering.Request, verb: str) -> None:
        """Raise 403 unless the caller may ``verb`` the request's resource (a no-op while RBAC is off)."""
        res = request.resource
        assert res is not None and res.plural is not None
        user = self._user(request)
        resource = f"{res.plural}/{request.subresource}" if request.subresource else res.plural
        if not self.identities.allows(user, verb, resource, res.group or "", request.namespace):
            raise forbidden(user, verb, res.plural, request.subresource, res.group or "", request.namespace, request.name)

    async def _review(self, raw_request: aiohttp.web.BaseRequest, user: UserInfo) -> dict[str, Any]:
        """Answer a POST to one of :data:`REVIEWS`: a SelfSubjectReview, or a TokenReview (RBAC: create tokenreviews)."""
        if raw_request.path.rstrip("/") == REVIEWS[0]:
            return self_subject_review(user)
        if not self.identities.allows(user, "create", "tokenreviews", "authentication.k8s.io", None):
            raise forbidden(user, "create", "tokenreviews", None, "authentication.k8s.io", None, None)
        try:
            body = json.loads(await raw_request.read() or b"{}")
        except ValueError:
            body = {}
        return token_review(self.identities, body if isinstance(body, dict) else {})
