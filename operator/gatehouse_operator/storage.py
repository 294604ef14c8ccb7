"""Where an Agent's runtime keeps its state, and what that means for its pods (pure).

The runtime keeps tasks, sessions and pending approvals in one database (``--state-dir`` for sqlite, or
``--database-url``). ``spec.state`` chooses it; the choice fixes the state volume, the rollout strategy and the
``Durable`` condition::

    layout     when                                volume at STATE_DIR          rollout                Durable
    sqlite     state.sqlite, or no state (default) PVC <agent>-state            Recreate               True, Sqlite
    postgres   state.postgres                      none (URL: env from Secret)  RollingUpdate 1/0 [1]  True, Postgres
    ephemeral  state.ephemeral: true               emptyDir                     RollingUpdate 1/0      False, Ephemeral
    per-pod    replicas > 1 without postgres       emptyDir, each pod its own   RollingUpdate 1/0      False, ReplicasNeedPostgres

    [1] maxSurge 1, maxUnavailable 0: a new pod is ready before an old one goes.

sqlite is one file with one writer, and its claim is ``ReadWriteOnce``: a second pod could not mount it on another
node, so there is one replica and a rollout stops the old pod before the new one starts (``Recreate``: a short gap,
no lost approval). Postgres is shared: pods roll one at a time, a new one ready before an old one goes.

``per-pod`` is the shape every Agent had before ``spec.state`` existed (an emptyDir per pod). The CRD refuses
``replicas > 1`` without Postgres, but an Agent stored earlier with more replicas keeps that shape -- the operator
does not scale anybody's agent down -- and carries ``Durable=False`` saying why it must change.

The claim is not owned by the Agent unless ``spec.state.sqlite.deleteClaimWithAgent`` is true: deleting the Agent
keeps the state, and an Agent created again under the same name takes its claim (found by name) over.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from agent_runtime.contract.agent_config import SecretEnvRef
from agent_runtime.contract.resources import Agent, MCPGateway
from agent_runtime.contract.translator import DATABASE_URL_ENV, database_env
from gatehouse_operator.status import StatusCondition

__all__ = ["STATE_DIR", "StateLayout", "claim_name", "durable_condition", "layout", "store_of"]

STATE_DIR = "/var/lib/gatehouse"

Kind = Literal["sqlite", "postgres", "ephemeral", "per-pod"]


@dataclass(frozen=True)
class StateLayout:
    """What ``spec.state`` (with ``spec.deployment.replicas``) means for the pods of one Agent."""

    kind: Kind
    claim: str | None = None  # sqlite: the PersistentVolumeClaim mounted at STATE_DIR
    database: SecretEnvRef | None = None  # postgres: the URL's Secret key, as an environment variable

    @property
    def volume(self) -> dict[str, Any] | None:
        """The ``state`` volume, or ``None`` when the state is not on disk (Postgres)."""
        if self.kind == "postgres":
            return None
        if self.claim is not None:
            return {"name": "state", "persistentVolumeClaim": {"claimName": self.claim}}
        return {"name": "state", "emptyDir": {}}

    @property
    def strategy(self) -> dict[str, Any]:
        if self.kind == "sqlite":
            # None, not absent: a merge patch from RollingUpdate must delete rollingUpdate, which Recreate refuses.
            return {"type": "Recreate", "rollingUpdate": None}
        return {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}


def claim_name(agent_name: str) -> str:
    return f"{agent_name}-state"


def layout(agent: Agent | MCPGateway) -> StateLayout:
    state, replicas = agent.spec.state, agent.spec.deployment.replicas
    if state.kind == "postgres":
        return StateLayout("postgres", database=database_env(agent))
    if replicas > 1:
        return StateLayout("per-pod")
    if state.kind == "ephemeral":
        return StateLayout("ephemeral")
    return StateLayout("sqlite", claim=claim_name(agent.name))


def durable_condition(agent: Agent | MCPGateway) -> StatusCondition:
    """``Durable``: whether pending approvals outlive the pod that holds them, and in what kind of state."""
    plan = layout(agent)
    if plan.kind == "sqlite":
        return StatusCondition(
            "Durable", True, "Sqlite",
            f"state in sqlite on PersistentVolumeClaim {plan.claim}: pending approvals survive restarts and rollouts "
            "(one replica; a rollout stops the old pod before starting the new one)",
        )
    if plan.kind == "postgres":
        assert plan.database is not None
        return StatusCondition(
            "Durable", True, "Postgres",
            f"state in Postgres (URL from Secret {plan.database.secret}, key {plan.database.key}): pending approvals "
            "survive restarts and rollouts, and any replica can resume them",
        )
    if plan.kind == "ephemeral":
        return StatusCondition(
            "Durable", False, "Ephemeral",
            "spec.state.ephemeral: state lives in the pod's emptyDir; pending approvals and tasks are lost when the "
            "pod is replaced (a rollout, an eviction, a node drain); a container restart keeps them",
        )
    replicas = agent.spec.deployment.replicas
    return StatusCondition(
        "Durable", False, "ReplicasNeedPostgres",
        f"spec.deployment.replicas is {replicas} without spec.state.postgres: each pod keeps its own state in an "
        "emptyDir, lost when the pod is replaced, and a task paused on one pod cannot be resumed on another; set "
        "replicas to 1 (sqlite on a PersistentVolumeClaim) or use spec.state.postgres -- until then the API refuses "
        "edits of replicas or state that keep more than one replica without Postgres",
    )


def store_of(deployment: dict[str, Any] | None) -> str | None:
    """Which database a runtime Deployment's pods keep their state in, as a user would name it (``None``: no
    Deployment). Read from the pod template alone -- the ``state`` volume, or the database URL's Secret key -- so the
    running Deployment and the one an Agent's spec renders compare the same way."""
    if deployment is None:
        return None
    pod = ((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}
    for container in pod.get("containers") or []:
        for env in container.get("env") or []:
            ref = (env.get("valueFrom") or {}).get("secretKeyRef")
            if env.get("name") == DATABASE_URL_ENV and ref:
                return f"Postgres (URL from Secret {ref.get('name')}, key {ref.get('key')})"
    volume = next((v for v in pod.get("volumes") or [] if v.get("name") == "state"), None)
    if volume is not None and "persistentVolumeClaim" in volume:
        return f"sqlite on PersistentVolumeClaim {volume['persistentVolumeClaim'].get('claimName')}"
    return "sqlite in the pod's emptyDir"
