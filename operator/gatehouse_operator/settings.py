"""Operator settings: read once at start-up (never at import time) and kept in kopf's ``memo``.

One ``@kopf.on.startup`` handler tunes kopf and builds the :class:`OperatorState` every handler uses
(``memo.state``):

- kopf keeps its bookkeeping under our own prefix, ``gatehouse.dev``: only while a handler is being retried, its
  progress in ``gatehouse.dev/<handler>`` annotations; so ``status`` holds nothing but the Agent's own conditions.
  What kopf last handled of each Agent (its diff base) stays in memory (:class:`MemoryDiffBase`). No handler needs a
  finalizer (no per-Agent daemon, the delete handler is optional: :mod:`gatehouse_operator.periodic`), so kopf writes
  nothing to an Agent. The finalizer name stays ``gatehouse.dev/finalizer``: Agents of releases that added it still
  carry it, and kopf removes a finalizer of that name that no handler requires, once, when it first sees the Agent;
- log lines are not mirrored as Kubernetes Events: the operator posts its own where they tell something;
- watches end server-side every 5 minutes and resume from their resourceVersion (no silently stuck streams);
- the watch of PersistentVolumeClaims asks the API server for ours alone (a label selector): the state claims.

Environment variables (all optional):

``GATEHOUSE_RUNTIME_IMAGE``   image of the agent pods (default ``ghcr.io/gatehouse-dev/gatehouse:0.1.0``),
                              overridden per Agent by ``spec.deployment.image``;
``GATEHOUSE_RESYNC_SECONDS``  how often every Agent and MCPGateway is re-checked against the cluster: at most this
                              long after its last reconcile, whatever started that (default 300);
``GATEHOUSE_SECRET_CHECK_INTERVAL``  how long after a reconcile (or check) read them the Secrets each Agent (or
                              MCPGateway) references are read again by name to notice a change (a new resourceVersion) -- the
                              operator does not watch Secrets; a duration, default ``60s``; ``gatehouse-operator
                              --secret-check-interval 30s`` sets it;
``GATEHOUSE_RUNTIME_API_TOKEN_SECRET`` / ``..._KEY``  a Secret (in each Agent's namespace) and key holding the
                              runtime's REST bearer tokens, passed to agent pods as ``GATEHOUSE_API_TOKEN``;
``GATEHOUSE_ADMISSION_POLICY``  the ValidatingAdmissionPolicy that makes kubectl decisions trustworthy (default
                              ``gatehouse-toolapproval-decision``; the chart passes ``<release>-toolapproval-decision``);
``GATEHOUSE_TOKENREVIEW_CLUSTER_ROLE``  the ClusterRole (create tokenreviews) and the ClusterRoleBinding of the same
                              name whose subjects are the runtimes that check Kubernetes tokens (default
                              ``gatehouse-tokenreview``; the chart's ``<release>-tokenreview``):
                              :mod:`gatehouse_operator.tokenreview`;
``GATEHOUSE_MIGRATE_TOKENREVIEW_BINDINGS``  ``false``: do not look for the per-Agent TokenReview ClusterRoleBindings of
                              earlier releases (the chart's ``rbac.migrateTokenReviewBindings``, which grants the list
                              and delete that takes); on by default;
``GATEHOUSE_TRUST_KUBECTL_WITHOUT_ADMISSION_POLICY``  ``true``: the ``AdmissionPolicy`` condition reads True
                              (reason ``TrustedByOperator``) even without the policy enforced; ``gatehouse-operator
                              --trust-kubectl-without-admission-policy`` sets it. Off by default;
``GATEHOUSE_NETWORK_POLICY``  JSON, the chart's ``networkPolicy``: a NetworkPolicy per runtime and who else it admits
                              (:mod:`gatehouse_operator.network_policy`); unset, none.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import kopf

from agent_runtime.contract.durations import parse_duration
from gatehouse_operator.admission import PolicyVerdict
from gatehouse_operator.builders import MANAGED_BY, config_secret_name
from gatehouse_operator.dependencies import ReferencedSecrets
from gatehouse_operator.deployment_status import AppliedDeployment
from gatehouse_operator.kube import ChildrenApi, connect
from gatehouse_operator.network_policy import NetworkPolicySettings, settings_from_env
from gatehouse_operator.tokenreview import TokenReviewBinding

__all__ = [
    "DEFAULT_IMAGE_REPOSITORY",
    "DEFAULT_IMAGE_TAG",
    "DEFAULT_RUNTIME_IMAGE",
    "SECRET_CHECK_ENV",
    "Key",
    "OperatorConfig",
    "OperatorState",
    "configure",
]

# The one image (operator and agent runtime, see the Dockerfile). The chart's values.yaml ``image.repository``
# and ``Chart.yaml`` appVersion must say the same: tests/chart/test_default_image.py keeps them equal.
DEFAULT_IMAGE_REPOSITORY = "ghcr.io/gatehouse-dev/gatehouse"
DEFAULT_IMAGE_TAG = "0.1.0"  # the package version
DEFAULT_RUNTIME_IMAGE = f"{DEFAULT_IMAGE_REPOSITORY}:{DEFAULT_IMAGE_TAG}"
PREFIX = "gatehouse.dev"
DEFAULT_ADMISSION_POLICY = "gatehouse-toolapproval-decision"
DEFAULT_TOKENREVIEW_CLUSTER_ROLE = "gatehouse-tokenreview"
TRUST_KUBECTL_ENV = "GATEHOUSE_TRUST_KUBECTL_WITHOUT_ADMISSION_POLICY"
SECRET_CHECK_ENV = "GATEHOUSE_SECRET_CHECK_INTERVAL"
MIGRATE_ENV = "GATEHOUSE_MIGRATE_TOKENREVIEW_BINDINGS"
DEFAULT_SECRET_CHECK_SECONDS = 60.0
RETRY_FIRST_SECONDS = 1.0  # a failed reconcile is retried after 1 s, then 2, 4, ... up to RETRY_MAX_SECONDS
RETRY_MAX_SECONDS = 60.0


def _flag(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


def _duration(environ: Mapping[str, str], name: str, default: float) -> float:
    value = environ.get(name)
    if not value:
        return default
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None


@dataclass(frozen=True)
class OperatorConfig:
    runtime_image: str = DEFAULT_RUNTIME_IMAGE
    resync_seconds: float = 300.0
    secret_check_seconds: float = DEFAULT_SECRET_CHECK_SECONDS
    api_token_secret: str = ""
    api_token_key: str = "token"
    admission_policy: str = DEFAULT_ADMISSION_POLICY
    tokenreview_cluster_role: str = DEFAULT_TOKENREVIEW_CLUSTER_ROLE
    trust_kubectl_without_admission_policy: bool = False
    migrate_tokenreview_bindings: bool = True
    network_policy: NetworkPolicySettings | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> OperatorConfig:
        return cls(
            runtime_image=environ.get("GATEHOUSE_RUNTIME_IMAGE") or DEFAULT_RUNTIME_IMAGE,
            resync_seconds=float(environ.get("GATEHOUSE_RESYNC_SECONDS") or 300.0),
            secret_check_seconds=_duration(environ, SECRET_CHECK_ENV, DEFAULT_SECRET_CHECK_SECONDS),
            api_token_secret=environ.get("GATEHOUSE_RUNTIME_API_TOKEN_SECRET") or "",
            api_token_key=environ.get("GATEHOUSE_RUNTIME_API_TOKEN_KEY") or "token",
            admission_policy=environ.get("GATEHOUSE_ADMISSION_POLICY") or DEFAULT_ADMISSION_POLICY,
            tokenreview_cluster_role=environ.get("GATEHOUSE_TOKENREVIEW_CLUSTER_ROLE") or DEFAULT_TOKENREVIEW_CLUSTER_ROLE,
            trust_kubectl_without_admission_policy=_flag(environ.get(TRUST_KUBECTL_ENV)),
            migrate_tokenreview_bindings=_flag(environ.get(MIGRATE_ENV) or "true"),
            network_policy=settings_from_env(environ),
        )


@dataclass
class _Due:
    """When the object was last reconciled (or first seen), and its spread: the share of each period it waits, 0.9 to
    1, fixed per object, so objects reconciled together (created at once, or after a restart) drift apart instead of
    resyncing in lockstep."""

    reconciled_at: float
    spread: float
    failures: int = 0  # reconciles that raised in a row
    retry_at: float | None = None  # when a failed reconcile is tried again (backoff), if it failed


# What the periodic loop tracks: (kind, namespace, name) of an Agent or MCPGateway (builders.AGENT.kind / GATEWAY.kind).
# Both kinds name their children alike, and an Agent and an MCPGateway of one name may both exist (each refused with
# NameTaken while the other is there): the kind keeps their resyncs, retries and Secret records apart.
Key = tuple[str, str, str]


def _spread(namespace: str, name: str) -> float:
    digest = hashlib.blake2b(f"{namespace}/{name}".encode(), digest_size=4).digest()
    return 1.0 - 0.1 * int.from_bytes(digest) / 2**32


@dataclass
class OperatorState:
    """What one operator run shares between handlers: settings, the API client, per-object locks, and the
    resourceVersion of each child as the last reconcile left it (so the watch event that echoes our own
    write does not trigger another reconcile).

    The periodic bookkeeping (:meth:`seen`, :meth:`due`, the retries, the Secrets each reconcile read) is keyed by
    :data:`Key`, kind included; the lock by namespace and name only, since an Agent and an MCPGateway of one name
    would write the same children."""

    config: OperatorConfig
    kube: ChildrenApi
    _locks: dict[tuple[str, str], threading.Lock] = field(default_factory=dict)
    _guard: threading.Lock = field(default_factory=threading.Lock)
    _versions: dict[tuple[str, str, str], str] = field(default_factory=dict)
    _secrets: dict[Key, ReferencedSecrets] = field(default_factory=dict)
    _agent_specs: dict[tuple[str, str], str] = field(default_factory=dict)
    _due: dict[Key, _Due] = field(default_factory=dict)
    # each Agent's (and MCPGateway's) Deployment as its last reconcile left it: tells a status-only event apart
    _deployments: dict[tuple[str, str], AppliedDeployment] = field(default_factory=dict)
    # an Agent or MCPGateway handler ran: kopf had listed every indexed kind before (it waits for its indexes)
    agents_listed: bool = False
    essences: MemoryDiffBase | None = None  # kopf's diff base (see configure), emptied of deleted Agents and gateways
    admission: PolicyVerdict = field(default_factory=PolicyVerdict)  # the cluster's admission policy, shared
    tokenreview: TokenReviewBinding = field(init=False)  # the runtimes' TokenReview right, shared

    def __post_init__(self) -> None:
        self.tokenreview = TokenReviewBinding(self.kube, self.config.tokenreview_cluster_role)

    def lock_for(self, namespace: str, name: str) -> threading.Lock:
        """One lock per name: an object's own handlers, dependency events and resyncs never interleave (nor those of
        an Agent and an MCPGateway of one name, which would write the same children)."""
        with self._guard:
            return self._locks.setdefault((namespace, name), threading.Lock())

    def lock_held(self, namespace: str, name: str) -> bool:
        """Whether the lock of ``name`` is held now (a reconcile or refresh in flight), without making one: a claim may
        outlive its Agent, and its events must not leave a lock behind for a name no Agent has."""
        with self._guard:
            lock = self._locks.get((namespace, name))
        return lock is not None and lock.locked()

    def forget(self, kind: str, namespace: str, name: str) -> None:
        """The object is gone: no more resyncs or Secret checks of it (its lock goes once no other kind holds the
        name)."""
        with self._guard:
            self._secrets.pop((kind, namespace, name), None)
            self._due.pop((kind, namespace, name), None)
            if not any(key[1:] == (namespace, name) for key in self._due):
                self._locks.pop((namespace, name), None)
                self._deployments.pop((namespace, name), None)

    def seen(self, kind: str, namespace: str, name: str) -> None:
        """An Agent's or MCPGateway's watch event: from now on the periodic loop resyncs it and checks its Secrets."""
        with self._guard:
            if (kind, namespace, name) not in self._due:
                self._due[kind, namespace, name] = _Due(time.monotonic(), _spread(namespace, name))

    def reconciling(self, kind: str, namespace: str, name: str) -> None:
        """A reconcile of the object starts, whatever its trigger: its next resync is one period from now."""
        with self._guard:
            due = self._due.get((kind, namespace, name))
            if due is not None:
                due.reconciled_at = time.monotonic()

    def reconcile_failed(self, kind: str, namespace: str, name: str) -> float:
        """A reconcile of the object raised (whatever started it): the periodic loop tries again after a backoff,
        1 s doubling up to :data:`RETRY_MAX_SECONDS` (or the resync period, if shorter); the delay."""
        with self._guard:
            due = self._due.setdefault((kind, namespace, name), _Due(time.monotonic(), _spread(namespace, name)))
            due.failures += 1
            delay = min(RETRY_FIRST_SECONDS * 2.0 ** (due.failures - 1), RETRY_MAX_SECONDS, self.config.resync_seconds)
            due.retry_at = time.monotonic() + delay
            return delay

    def reconcile_succeeded(self, kind: str, namespace: str, name: str) -> None:
        """A reconcile of the object ran to its end (or found it gone): no retry is pending."""
        with self._guard:
            due = self._due.get((kind, namespace, name))
            if due is not None:
                due.failures, due.retry_at = 0, None

    def due(self, now: float, busy: set[Key]) -> tuple[list[Key], list[Key]]:
        """The objects (not in ``busy``) whose resync is due, and those whose Secret check is: each one period (times
        its spread, 0.9 to 1) after its last reconcile, or after its Secrets were last read or checked; a failed
        reconcile's retry counts as a resync. An object with no Secret to read is marked checked here, at no cost;
        one never reconciled has none recorded yet."""
        resync, check = self.config.resync_seconds, self.config.secret_check_seconds
        resyncs, checks = [], []
        with self._guard:
            for key, due in self._due.items():
                if key in busy:
                    continue
                if (due.retry_at is not None and now >= due.retry_at) or now - due.reconciled_at >= resync * due.spread:
                    resyncs.append(key)
                    continue
                record = self._secrets.get(key)
                if record is None or now - record.read_at < check * due.spread:
                    continue
                if record.versions() or self._versions.get(("Secret", key[1], config_secret_name(key[2]))):
                    checks.append(key)
                else:
                    record.read_at = now  # nothing read (e.g. its ModelConfig is missing): no request
        return resyncs, checks

    def saw(self, kind: str, namespace: str, name: str, resource_version: str) -> None:
        """Remember the version of a child as the last reconcile left it."""
        with self._guard:
            self._versions[kind, namespace, name] = resource_version

    def deployment_applied(self, namespace: str, name: str, record: AppliedDeployment) -> None:
        """Remember the Deployment of the Agent (or MCPGateway) ``name`` as a reconcile, or a ``Ready`` refresh, left it."""
        with self._guard:
            self._deployments[namespace, name] = record

    def applied_deployment(self, namespace: str, name: str) -> AppliedDeployment | None:
        with self._guard:
            return self._deployments.get((namespace, name))

    def is_known(self, kind: str, namespace: str, name: str, resource_version: str | None) -> bool:
        """Whether a child's event only echoes what the last reconcile wrote or read (nothing to repair)."""
        with self._guard:
            return resource_version is not None and self._versions.get((kind, namespace, name)) == resource_version

    def agent_spec_changed(self, namespace: str, name: str, spec: Mapping[str, Any] | None, deleted: bool = False) -> bool:
        """Record an Agent's spec as its watch event shows it (a digest); whether it differs from the last one seen
        (an Agent seen for the first time, or deleted, has changed). Agents that use it as a tool read only its spec,
        so its status writes -- most of its events -- concern them not."""
        key = (namespace, name)
        with self._guard:
            if deleted:
                self._agent_specs.pop(key, None)
                return True
            digest = hashlib.sha256(json.dumps(spec or {}, sort_keys=True, default=str).encode()).hexdigest()
            before = self._agent_specs.get(key)
            self._agent_specs[key] = digest
            return before != digest

    def referenced_secrets(self, kind: str, namespace: str, name: str) -> ReferencedSecrets:
        """A fresh record of the Secrets one reconcile of the object reads; it replaces the last one as what the
        periodic check compares against."""
        secrets = ReferencedSecrets(self.kube, namespace)
        with self._guard:
            self._secrets[kind, namespace, name] = secrets
        return secrets

    def secrets_checked(self, kind: str, namespace: str, name: str) -> None:
        """The object's Secrets were just checked (or there was nothing to check): the next check is one interval on."""
        with self._guard:
            record = self._secrets.get((kind, namespace, name))
            if record is not None:
                record.read_at = time.monotonic()

    def secret_versions(self, kind: str, namespace: str, name: str, *children: str) -> dict[str, str | None]:
        """What the periodic check reads again for the object: the Secrets its last reconcile read (name ->
        resourceVersion, ``None``: absent), and those of the child Secrets ``children`` it left a version of."""
        with self._guard:
            record = self._secrets.get((kind, namespace, name))
            versions = record.versions() if record is not None else {}
            for child in children:
                version = self._versions.get(("Secret", namespace, child))
                if version:
                    versions.setdefault(child, version)
        return versions


class ProgressAnnotations(kopf.AnnotationsProgressStorage):
    """kopf's per-handler progress in ``gatehouse.dev/<handler>`` annotations, written only while a handler is
    retried, without kopf's ``gatehouse.dev/kopf-managed`` marker: kopf adds the marker to every patch it builds,
    so a handler that succeeds at once (its progress purged again) would cost a PATCH of the Agent for the marker
    alone."""

    def _store_marker(self, prefix: str, patch: kopf.Patch, body: kopf.Body) -> None:
        return None


class MemoryDiffBase(kopf.DiffBaseStorage):
    """kopf's last-handled essence of each Agent (spec, labels, annotations), kept in this process, not on the Agent.

    kopf compares each Agent event with it to tell an update from an echo. Written into an annotation (kopf's
    default) it costs one PATCH of every Agent after every handled change; here it costs nothing. What is lost at a
    restart is harmless: kopf then sees every Agent as new and runs ``agent_create`` instead of ``agent_resume``,
    and both do the same full reconcile. Entries go with the Agent's deletion (:meth:`forget`, by uid).
    """

    def __init__(self) -> None:
        super().__init__()
        self._essences: dict[str, kopf.BodyEssence] = {}

    def build(self, *, body: kopf.Body, extra_fields: Any = None) -> kopf.BodyEssence:
        essence = super().build(body=body, extra_fields=extra_fields)
        # Left on Agents by operators that kept it in the annotation: never compared.
        annotations = essence.get("metadata", {}).get("annotations") or {}
        annotations.pop(f"{PREFIX}/last-handled-configuration", None)
        self.remove_empty_stanzas(essence)
        return essence

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return self._essences.get(str(body.metadata.uid))

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        self._essences[str(body.metadata.uid)] = essence

    def forget(self, uid: str | None) -> None:
        self._essences.pop(str(uid), None)


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, logger: kopf.Logger, **_: Any) -> None:
    settings.persistence.finalizer = f"{PREFIX}/finalizer"  # no handler needs it: kopf removes it where still found
    settings.persistence.progress_storage = ProgressAnnotations(prefix=PREFIX)
    essences = settings.persistence.diffbase_storage = MemoryDiffBase()
    settings.posting.loggers = False
    # After its own patch of an Agent (now only the removal of an old release's finalizer, or a retried handler's
    # progress), kopf skips older events until the patched version comes back on the watch, but only for
    # consistency_timeout seconds (default 5); after that it handles the stale event. With hundreds of Agents created
    # at once the watch runs more than 5 s behind (measured, when kopf's last-handled state was an annotation: 414 of
    # 500 Agents handled twice). Waiting longer costs nothing when the watch is on time.
    settings.persistence.consistency_timeout = 30
    settings.watching.server_timeout = 300  # re-list/re-watch regularly instead of trusting one stream forever
    # The state claims are watched (handlers.claim_event) for their binding: the API server sends only ours, not every
    # claim of the namespaces served (one whose label is removed by hand drops out until a reconcile puts it back).
    settings.watching.label_selectors["v1", "persistentvolumeclaims"] = f"app.kubernetes.io/managed-by={MANAGED_BY}"
    # Reconciles are synchronous and mostly wait on the API: more of them in flight than kopf's default thread pool
    # (cores + 4) keeps the API busy when thousands of Agents arrive at once.
    settings.execution.max_workers = 16
    config = OperatorConfig.from_env(os.environ)
    memo.state = OperatorState(config=config, kube=ChildrenApi(connect()), essences=essences)
    logger.info("gatehouse operator: runtime image %s, resync every %ss, Secrets checked every %ss, admission policy "
                "%s%s", config.runtime_image, config.resync_seconds, config.secret_check_seconds, config.admission_policy,
                " (kubectl trusted without it)" if config.trust_kubectl_without_admission_policy else "")
