"""Leader election on a ``coordination.k8s.io`` Lease: of several operator replicas exactly one acts.

kopf's own peering cannot do this: peers of equal priority all freeze. So each replica runs the ``kubernetes``
client's leader election (:mod:`kubernetes.leaderelection`, the client-go algorithm over a Lease) in a thread, and
the startup handler :func:`lead` -- the first of the operator's startup handlers -- returns only once this replica
holds the Lease. Until then kopf starts nothing: no watch, no index, no handler, no periodic loop (kopf sets its
"started" flag after the last startup handler). A standby only reads the Lease every ``retryPeriod``, and answers
``/healthz`` and ``/metrics`` (:mod:`gatehouse_operator.probes`, started before the wait).

Taking over, in the worst case -- the leader is killed right after renewing::

    leaseDuration (the standby waits that long after it last saw the Lease change)
    + retryPeriod  (its next look)
    + kopf's start: list every Agent (and ModelConfig, RemoteMCPServer) and reconcile each (``agent_create``)

A leader stopped with SIGTERM gives the Lease up in its cleanup, once its periodic loop has stopped
(:func:`step_down`: ``holderIdentity`` cleared), so a standby takes over at its next look, without waiting out the
lease. A leader that cannot renew within
``renewDeadline`` (< ``leaseDuration``, so before anyone else may take the Lease) exits at once, with code
:data:`LOST_EXIT_CODE`, in-flight work and all, as client-go's controllers do: the pod restarts as a standby. Every
reconcile is idempotent, so work cut short is redone by the next leader.

Settings (environment, read once at start-up):

``GATEHOUSE_LEADER_ELECTION``            ``true``: elect (the chart sets it); else this replica acts at once, alone
``GATEHOUSE_LEADER_ELECTION_LEASE``      the Lease's name (default ``gatehouse-operator``)
``GATEHOUSE_LEADER_ELECTION_NAMESPACE``  its namespace (default: the pod's own, else ``default``)
``GATEHOUSE_LEADER_ELECTION_LEASE_DURATION`` / ``_RENEW_DEADLINE`` / ``_RETRY_PERIOD``  durations, default ``15s``,
                                         ``10s``, ``2s`` (client-go's); whole seconds, at least 1
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kopf
import kubernetes
from kubernetes.leaderelection import electionconfig, leaderelection
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

from agent_runtime.contract.durations import parse_duration
from gatehouse_operator import metrics, probes
from gatehouse_operator.kube import ApiException, connect

__all__ = ["LOST_EXIT_CODE", "Election", "ElectionConfig", "lead", "step_down"]

LOST_EXIT_CODE = 3
ENABLED_ENV = "GATEHOUSE_LEADER_ELECTION"
_POD_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")

log = logging.getLogger(__name__)


def _seconds(environ: Mapping[str, str], name: str, default: int) -> int:
    value = environ.get(name)
    if not value:
        return default
    try:
        seconds = parse_duration(value)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None
    if seconds < 1 or seconds != int(seconds):
        raise ValueError(f"{name}: {value!r} must be whole seconds, at least 1")
    return int(seconds)


@dataclass(frozen=True)
class ElectionConfig:
    """Where the Lease is, who this replica is, and the client-go timings (seconds)."""

    enabled: bool = False
    lease: str = "gatehouse-operator"
    namespace: str = "default"
    identity: str = ""
    lease_duration: int = 15
    renew_deadline: int = 10
    retry_period: int = 2

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> ElectionConfig:
        namespace = environ.get("GATEHOUSE_LEADER_ELECTION_NAMESPACE") or (
            _POD_NAMESPACE.read_text().strip() if _POD_NAMESPACE.exists() else "default")
        config = cls(
            enabled=(environ.get(ENABLED_ENV) or "").strip().lower() in {"1", "true", "yes", "on"},
            lease=environ.get("GATEHOUSE_LEADER_ELECTION_LEASE") or "gatehouse-operator",
            namespace=namespace,
            identity=f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}",  # the pod's name, and unique per process
            lease_duration=_seconds(environ, "GATEHOUSE_LEADER_ELECTION_LEASE_DURATION", 15),
            renew_deadline=_seconds(environ, "GATEHOUSE_LEADER_ELECTION_RENEW_DEADLINE", 10),
            retry_period=_seconds(environ, "GATEHOUSE_LEADER_ELECTION_RETRY_PERIOD", 2),
        )
        # client-go's rules (the library exits the process on a violation: say why here instead)
        if not config.lease_duration > config.renew_deadline > 1.2 * config.retry_period:
            raise ValueError("leader election: needs leaseDuration > renewDeadline > 1.2 x retryPeriod, got "
                             f"{config.lease_duration}s, {config.renew_deadline}s, {config.retry_period}s")
        return config


class _Lock(LeaseLock):  # type: ignore[misc]  # the library is untyped
    """The library's Lease lock over our API client (it would build one from the global default configuration), which
    writes nothing once this replica steps down: the election thread cannot be stopped, only made harmless."""

    def __init__(self, config: ElectionConfig, api: kubernetes.client.CoordinationV1Api) -> None:
        super().__init__(config.lease, config.namespace, config.identity)
        self.api_instance = api
        self.stepped_down = False

    def create(self, name: str, namespace: str, election_record: Any) -> bool:
        return not self.stepped_down and bool(super().create(name, namespace, election_record))

    def update(self, name: str, namespace: str, updated_record: Any) -> bool:
        return not self.stepped_down and bool(super().update(name, namespace, updated_record))


class Election:
    """One replica's candidacy: :meth:`start` the election thread, :attr:`leading` is set once it holds the Lease,
    :meth:`step_down` gives it up. ``on_lost`` runs (in the election thread) when a held Lease could not be renewed."""

    def __init__(self, config: ElectionConfig, api: kubernetes.client.CoordinationV1Api,
                 on_lost: Callable[[], None]) -> None:
        self.config = config
        self.leading = threading.Event()
        self._api = api
        self._lock = _Lock(config, api)
        self._on_lost = on_lost
        self._elector = leaderelection.LeaderElection(electionconfig.Config(
            self._lock, config.lease_duration, config.renew_deadline, config.retry_period,
            onstarted_leading=self.leading.set, onstopped_leading=self._stopped,
        ))

    def start(self) -> None:
        threading.Thread(target=self._elector.run, name="gatehouse leader election", daemon=True).start()

    def _stopped(self) -> None:
        if not self._lock.stepped_down:
            self._on_lost()

    def step_down(self) -> bool:
        """Stop renewing and clear ``holderIdentity`` when this replica still holds the Lease (guarded by its
        resourceVersion), so a standby takes over at its next look; whether the Lease was given up."""
        self._lock.stepped_down = True
        if not self.leading.is_set():
            return False
        config = self.config
        try:
            lease = self._api.read_namespaced_lease(config.lease, config.namespace)
            if lease.spec is None or lease.spec.holder_identity != config.identity or lease.metadata is None:
                return False
            body = {"metadata": {"resourceVersion": lease.metadata.resource_version},
                    "spec": {"holderIdentity": None, "acquireTime": None, "renewTime": None}}
            self._api.patch_namespaced_lease(config.lease, config.namespace, body)
        except ApiException as exc:  # the standby then waits the lease out
            log.warning("could not give up Lease %s/%s: %s %s", config.namespace, config.lease, exc.status, exc.reason)
            return False
        return True


def _exit_lost(config: ElectionConfig) -> Callable[[], None]:
    def lost() -> None:
        metrics.LEADER.set(0)
        log.critical("lost the Lease %s/%s (not renewed within %ss): exiting so that only the new leader acts",
                     config.namespace, config.lease, config.renew_deadline)
        logging.shutdown()
        os._exit(LOST_EXIT_CODE)  # at once: a graceful stop would keep acting while another replica leads
    return lost


@kopf.on.startup()
async def lead(memo: kopf.Memo, logger: kopf.Logger, **_: Any) -> None:
    """Serve the probes, then return once this replica may act: at once without election, else when it holds the
    Lease. Registered first of the startup handlers (``periodic`` imports this module before defining its own)."""
    memo.probes = await probes.serve(os.environ)
    config = ElectionConfig.from_env(os.environ)
    if not config.enabled:
        metrics.LEADER.set(1)
        return
    election = memo.election = Election(config, kubernetes.client.CoordinationV1Api(connect()), _exit_lost(config))
    logging.getLogger("leaderelection").setLevel(logging.WARNING)  # the library logs every look at INFO
    logger.info("leader election: %s is a candidate for Lease %s/%s (lease %ss, renew deadline %ss, retry %ss)",
                config.identity, config.namespace, config.lease, config.lease_duration, config.renew_deadline,
                config.retry_period)
    election.start()
    while not await asyncio.to_thread(election.leading.wait, 1.0):
        pass
    metrics.LEADER.set(1)
    logger.info("leader election: %s holds Lease %s/%s and acts", config.identity, config.namespace, config.lease)


async def step_down(memo: kopf.Memo, logger: kopf.Logger) -> None:
    """Give the Lease up (a standby takes over without waiting it out) and stop serving the probes. Called by the
    periodic loop's cleanup handler once that loop has stopped, so nothing acts after the Lease is given up."""
    election: Election | None = getattr(memo, "election", None)
    if election is not None and await asyncio.to_thread(election.step_down):
        logger.info("leader election: gave up Lease %s/%s", election.config.namespace, election.config.lease)
    metrics.LEADER.set(0)
    server: probes.Server | None = getattr(memo, "probes", None)
    if server is not None:
        await server.stop()
