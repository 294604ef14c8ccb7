"""Who may create TokenReviews: the subjects of the one ClusterRoleBinding the chart installs.

A runtime that checks Kubernetes ServiceAccount tokens (its Agent's ``spec.access.kubernetesTokens``, on by default)
needs ``create tokenreviews``, a cluster-scoped right that no RoleBinding can grant. The chart installs the ClusterRole
``<release>-tokenreview`` and a ClusterRoleBinding of the same name to it with no subjects; the operator keeps that
binding's subjects equal to the ServiceAccounts of the Agents that want TokenReviews (an Agent's ServiceAccount is
named like it). RBAC lets the operator get and patch that one binding (``resourceNames``) and no other: it can
neither create nor delete a binding, nor touch another one, and a binding's roleRef never changes, so the most it
can grant anyone is TokenReviews.

:class:`TokenReviewBinding` is shared by every reconcile (they run in worker threads):

- :meth:`~TokenReviewBinding.grant` / :meth:`~TokenReviewBinding.revoke`: the binding is read once and kept with its
  resourceVersion; a subject already there (or already absent) costs no request. A change is a merge patch of the
  whole ``subjects`` list guarded by that resourceVersion (409: read again and retry), under one lock, so the
  operator's own writes never race each other. The changes asked for while a write is in flight go out together in
  the next one (a group commit): with thousands of Agents reconciled at once, one patch per Agent of a list that
  grows with every Agent was a write per reconcile and a serial queue on the one lock. Each caller returns once its
  own change is written (or found made), and says whether a write carried it;
- :meth:`~TokenReviewBinding.refresh` (the periodic loop, every resync period) reads it again, noticing an edit by
  hand, and the loop revokes the subjects whose Agent is gone (:func:`gatehouse_operator.periodic.collect_bindings`).

A binding that is missing is created (only where the operator may: the chart grants no ``create``, and installs it);
one whose roleRef is another role is never written.

Upgrade: releases before this one made a ClusterRoleBinding ``gatehouse-tokenreview-<namespace>-<agent>`` per Agent
(labels :data:`LEGACY_SELECTOR`) and might patch or delete any ClusterRoleBinding. :func:`migrate` grants each such
Agent's ServiceAccount here first, while it still wants TokenReviews, then deletes the old binding. That needs
``list`` and ``delete`` on ClusterRoleBindings: the chart grants them only while ``rbac.migrateTokenReviewBindings``
is on, and then also installs an admission policy that refuses the operator any DELETE of a ClusterRoleBinding but
these (``templates/rbac-operator-fence.yaml``).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from gatehouse_operator import builders
from gatehouse_operator.kube import ApiException, ChildrenApi

__all__ = [
    "BINDING",
    "LEGACY_SELECTOR",
    "BindingUnusable",
    "TokenReviewBinding",
    "legacy_owner",
]

BINDING = "ClusterRoleBinding"
# The per-Agent bindings earlier releases made: managed by the operator and labelled with an Agent's namespace.
LEGACY_SELECTOR = f"app.kubernetes.io/managed-by={builders.MANAGED_BY},{builders.AGENT_NAMESPACE_LABEL}"
ATTEMPTS = 5  # writes that meet a 409 (someone else wrote the binding in between) before giving up

Key = tuple[str, str]  # (namespace, name) of a ServiceAccount, which is its Agent's


class BindingUnusable(Exception):
    """The binding is bound to another role than the TokenReview one: the operator does not write it."""


def _subject(namespace: str, name: str) -> dict[str, str]:
    return {"kind": "ServiceAccount", "name": name, "namespace": namespace}


def _names(subject: Mapping[str, Any], namespace: str, name: str) -> bool:
    return (subject.get("kind"), subject.get("namespace"), subject.get("name")) == ("ServiceAccount", namespace, name)


def service_accounts(binding: Mapping[str, Any]) -> set[Key]:
    """The ServiceAccounts a binding names."""
    return {(s.get("namespace", ""), s.get("name", "")) for s in binding.get("subjects") or []
            if s.get("kind") == "ServiceAccount"}


def legacy_owner(binding: Mapping[str, Any]) -> Key | None:
    """The (namespace, name) of the Agent an earlier release's binding is labelled with."""
    labels = binding.get("metadata", {}).get("labels") or {}
    agent, namespace = labels.get(builders.AGENT_LABEL), labels.get(builders.AGENT_NAMESPACE_LABEL)
    return (namespace, agent) if agent and namespace else None


class TokenReviewBinding:
    """The chart's ClusterRoleBinding ``name`` to the ClusterRole of the same name, and its ServiceAccount subjects."""

    def __init__(self, kube: ChildrenApi, name: str) -> None:
        self._kube, self.name = kube, name
        self._lock = threading.Lock()  # one writer of the binding at a time
        self._seen: dict[str, Any] | None = None  # as last read or written
        self._queued = threading.Lock()  # guards the two below (held briefly, never while a request is in flight)
        self._pending: dict[Key, bool] = {}  # wishes not yet written: present (True) or absent
        self._carried: dict[Key, bool] = {}  # wishes written by another caller's patch: whether it changed the subject

    def _desired(self) -> dict[str, Any]:
        return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": BINDING,
                "metadata": {"name": self.name, "labels": {"app.kubernetes.io/managed-by": builders.MANAGED_BY}},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": self.name}}

    def _read(self) -> dict[str, Any]:
        found = self._kube.get(BINDING, None, self.name)
        if found is None:
            try:
                found = self._kube.create(self._desired())
            except ApiException as exc:
                if exc.status != 409:
                    raise
                found = self._kube.get(BINDING, None, self.name)
                if found is None:
                    raise
        ref = found.get("roleRef") or {}
        if (ref.get("kind"), ref.get("name")) != ("ClusterRole", self.name):
            raise BindingUnusable(
                f"{BINDING} {self.name!r} binds {ref.get('kind')} {ref.get('name')!r}, not the ClusterRole {self.name!r}: "
                "the runtime cannot be allowed TokenReviews through it")
        self._seen = found
        return found

    def refresh(self) -> set[Key]:
        """Read the binding again; the ServiceAccounts it names."""
        with self._lock:
            return service_accounts(self._read())

    def grant(self, namespace: str, name: str) -> bool:
        """Name the ServiceAccount in the binding; whether that took a write."""
        return self._change(namespace, name, present=True)

    def revoke(self, namespace: str, name: str) -> bool:
        """Take the ServiceAccount out of the binding; whether that took a write."""
        return self._change(namespace, name, present=False)

    def _change(self, namespace: str, name: str, *, present: bool) -> bool:
        key = (namespace, name)
        with self._queued:
            self._pending[key] = present  # the latest wish for a subject wins
        with self._lock:
            with self._queued:
                if key in self._carried:  # written by the caller who held the lock before
                    return self._carried.pop(key)
                if key not in self._pending:  # carried too; another caller for the same subject took the answer
                    return False
                batch, self._pending = self._pending, {}
            try:
                written = self._write(batch)
            except BaseException:
                with self._queued:  # the others' wishes go back, for the next holder of the lock to write
                    for other, wish in batch.items():
                        if other != key:
                            self._pending.setdefault(other, wish)
                raise
            with self._queued:
                self._carried.update((k, k in written) for k in batch if k != key)
            return key in written

    def _write(self, batch: Mapping[Key, bool]) -> set[Key]:
        """Bring every subject of ``batch`` to its wish in one patch (under the lock); the subjects it changed."""
        current = self._seen if self._seen is not None else self._read()
        for _ in range(ATTEMPTS):
            named = service_accounts(current)
            changes = {k: wish for k, wish in batch.items() if (k in named) != wish}
            if not changes:
                return set()  # as wanted already (perhaps written by someone else in between)
            subjects = [s for s in current.get("subjects") or [] if not any(_names(s, *k) for k in changes)]
            subjects += [_subject(*k) for k, wish in changes.items() if wish]
            patch = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": BINDING,
                     "metadata": {"name": self.name, "resourceVersion": current["metadata"].get("resourceVersion")},
                     "subjects": subjects}
            try:
                self._seen = current = self._kube.patch(patch)
                return set(changes)
            except ApiException as exc:
                if exc.status not in (404, 409):
                    raise
                current = self._read()  # someone else wrote it (or deleted it) in between
        raise ApiException(status=409, reason=f"{BINDING} {self.name} kept changing: gave up after {ATTEMPTS} writes")

    def migrate(self, legacy: Mapping[str, Any], wanted: bool) -> bool:
        """An earlier release's binding of one Agent: grant its ServiceAccount here first (``wanted``: its Agent exists
        and still wants TokenReviews), then delete the old binding; whether it was deleted."""
        owner = legacy_owner(legacy)
        if owner is None:
            return False
        if wanted:
            self.grant(*owner)
        return self._kube.delete(BINDING, None, legacy["metadata"]["name"])
