"""Gatehouse's kopf operator: turns each ``Agent`` (and ``MCPGateway``) into a running, least-privileged runtime.

Run it with ``kopf run -m gatehouse_operator --all-namespaces`` (or the ``gatehouse-operator`` script).
Importing this package registers every handler with kopf. The modules, one concept each::

    settings      start-up: kopf settings (own ``gatehouse.dev`` prefix) and the shared OperatorState
    handlers      thin kopf handlers: which trigger reconciles which Agent or MCPGateway
    periodic      one loop for all Agents and MCPGateways (by kind): resync, Secret check, clean-up of the
                  TokenReview subjects of deleted ones
    reconcile     one reconcile: read, translate, create-or-patch children, write status
    dependencies  kopf indexes (which Agents use a ModelConfig/RemoteMCPServer; caches); Secrets read by name
    builders      pure functions rendering the children (Secret, SA, Role, RoleBinding, state claim, Deployment,
                  Service), the generated token Secret and the TokenReview ClusterRoleBinding
    hardening     the pods' defaults: restricted Pod Security profile, resources, probes (pure)
    storage       spec.state -> the state volume, rollout strategy and Durable condition (pure)
    network_policy  the chart's networkPolicy setting and each runtime's NetworkPolicy (pure)
    apply         create-or-patch one child, comparing only the fields we own
    claims        the state PersistentVolumeClaim: create, grow, own or release it; the StateReady condition
    access        the generated token Secret (created once) and the TokenReview ClusterRoleBinding
    admission     the AdmissionPolicy condition: is the ToolApproval admission policy enforced?
    status        the Agent's conditions (Accepted, Ready, Durable, StateReady, AdmissionPolicy), observedGeneration,
                  configHash
    state_switch  holding a switch of the state backend while the runtime holds pending requests (a gateway's calls)
    leadership    leader election on a Lease: of several replicas exactly one acts
    probes        the operator's own /healthz and /metrics, served by every replica
    metrics       the Prometheus metrics: reconciles, failures, durations, leader
    kube          ChildrenApi: dict-in/dict-out facade over the ``kubernetes`` client

The folder ``operator/`` is deliberately not a package: ``operator`` would shadow the standard library.
"""

from gatehouse_operator import dependencies, handlers, periodic, settings

__all__ = ["dependencies", "handlers", "periodic", "settings"]
