"""The operator's own Prometheus metrics (prometheus-client), served at ``/metrics`` by :mod:`gatehouse_operator.probes`.

=======================================================  ==========  ==============================================
metric                                                   type        meaning
=======================================================  ==========  ==============================================
``gatehouse_operator_reconciles_total{kind,result}``     counter     reconciles, whatever started them; ``kind``:
                                                                     ``Agent`` or ``MCPGateway``; ``result``:
                                                                     ``accepted``, ``rejected`` (Accepted=False: a
                                                                     missing dependency, an invalid spec, a held
                                                                     state switch), ``gone`` (deleted meanwhile),
                                                                     ``failed``
``gatehouse_operator_reconcile_failures_total``          counter     reconciles that raised (the API refused a write
``{kind,code}``                                                      or was unreachable): ``code`` is the HTTP
                                                                     status, or ``error``; each is retried with
                                                                     backoff
``gatehouse_operator_reconcile_duration_seconds{kind}``  histogram   how long one reconcile took (lock held)
``gatehouse_operator_leader``                            gauge       1 while this replica holds the leader Lease and
                                                                     acts (or runs without leader election), else 0
=======================================================  ==========  ==============================================

A Deployment event that changed only the Deployment's status is no reconcile: it brings the ``Ready`` condition up
to date at most (:mod:`gatehouse_operator.deployment_status`), and is not counted here.

The metrics live in prometheus-client's default registry, with its process and Python collectors.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from gatehouse_operator.kube import ApiException

__all__ = ["DURATION", "FAILURES", "LEADER", "RECONCILES", "failure_code"]

# ``kind``: what was reconciled, an Agent or an MCPGateway (builders.OwnerKind.kind)
RECONCILES = Counter("gatehouse_operator_reconciles_total", "Reconciles of an Agent or MCPGateway, by result",
                     ["kind", "result"])
FAILURES = Counter(
    "gatehouse_operator_reconcile_failures_total", "Reconciles that raised; each is retried with backoff", ["kind", "code"]
)
DURATION = Histogram(
    "gatehouse_operator_reconcile_duration_seconds", "Time one reconcile of an Agent or MCPGateway took", ["kind"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
LEADER = Gauge("gatehouse_operator_leader", "1 while this replica acts (holds the leader Lease), else 0")


def failure_code(exc: BaseException) -> str:
    """The ``code`` label of a failed reconcile: the API's HTTP status, else ``error``."""
    cause = exc if isinstance(exc, ApiException) else exc.__cause__
    if isinstance(cause, ApiException) and cause.status:
        return str(cause.status)
    return "error"
