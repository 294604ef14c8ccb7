"""Switching an Agent's state backend with an approval pending, on the real control plane (issue 36, item 5).

The chart's operator (one replica, as :mod:`tests.support.cluster.operators` runs it) reconciles the example Agent
on sqlite. Its runtime's ServiceAccount -- the token the operator's Role grants -- creates a ToolApproval and marks
it Pending, as the runtime does when a gated call waits. The Agent is then switched to Postgres: the operator holds
the switch (``Accepted=False``, ``StateSwitchHeld``, a Warning Event, the Deployment left on sqlite), a force
annotation naming another kind forces nothing, and ``gatehouse.dev/force-state-switch=postgres`` lets it go ahead.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import toolapproval_admission as cases
from tests.support.cluster import Cluster, rest
from tests.support.cluster.chart import Release
from tests.support.cluster.operators import Replica, leading, wait

pytestmark = pytest.mark.e2e

NS = "story-switch"
EXAMPLE = Path(__file__).parents[2] / "examples" / "file-manager"
FORCE = "gatehouse.dev/force-state-switch"


@pytest.fixture(scope="module")
def operator(cluster: Cluster, chart: Release, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replica]:
    with leading(cluster, chart, tmp_path_factory.mktemp("switch") / "operator.log") as replica:
        yield replica


def _agent(cluster: Cluster) -> dict[str, Any]:
    return dict(json.loads(cluster.kubectl("get", "agent", "file-manager", "-n", NS, "-o", "json").stdout))


def _accepted(cluster: Cluster) -> dict[str, Any]:
    conditions = (_agent(cluster).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "Accepted"), {})


def _store(cluster: Cluster) -> str:
    """What the running Deployment's pods keep their state in: ``sqlite:<claim>`` or ``postgres:<secret>``."""
    spec = json.loads(cluster.kubectl("get", "deployment", "file-manager", "-n", NS, "-o", "json").stdout)["spec"]
    pod = spec["template"]["spec"]
    for container in pod["containers"]:
        for env in container.get("env", []):
            if env["name"] == "GATEHOUSE_DATABASE_URL":
                return f"postgres:{env['valueFrom']['secretKeyRef']['name']}"
    claims = [v["persistentVolumeClaim"]["claimName"] for v in pod.get("volumes", []) if "persistentVolumeClaim" in v]
    return f"sqlite:{','.join(claims)}"


def test_a_switch_with_an_approval_pending_is_held_until_forced(cluster: Cluster, operator: Replica) -> None:
    assert cluster.kubectl("create", "namespace", NS).returncode == 0
    docs = [yaml.safe_load((EXAMPLE / f"{stem}.yaml").read_text()) for stem in ("modelconfig", "mcp-server", "agent")]
    for doc in docs:
        doc["metadata"]["namespace"] = NS
    assert cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(docs)).returncode == 0
    wait("the Agent accepted on sqlite", lambda: _accepted(cluster).get("status") == "True")
    assert _store(cluster) == "sqlite:file-manager-state"

    # The runtime (its own ServiceAccount, the operator's Role) records a gated call waiting for a person.
    runtime = rest.client(cluster.service_account(NS, "file-manager"))
    body = copy.deepcopy(cases.CREATED)
    body["metadata"]["namespace"] = NS
    base = f"/apis/gatehouse.dev/v1alpha1/namespaces/{NS}/toolapprovals"
    made = runtime.post(base, json=body)
    assert made.status_code == 201, made.text
    pending = runtime.patch(f"{base}/{body['metadata']['name']}/status", json={"status": cases.PENDING},
                            headers={"Content-Type": "application/merge-patch+json"})
    assert pending.status_code == 200, pending.text

    secret = cluster.kubectl("create", "secret", "generic", "files-db", "-n", NS,
                             "--from-literal=url=postgresql+asyncpg://gatehouse:pw@postgres.db.svc:5432/gatehouse")
    assert secret.returncode == 0, secret.stderr
    switch = {"spec": {"state": {"sqlite": None, "postgres": {"urlSecretRef": {"name": "files-db"}}}}}
    patched = cluster.kubectl("patch", "agent", "file-manager", "-n", NS, "--type=merge", "-p", json.dumps(switch))
    assert patched.returncode == 0, patched.stderr

    wait("the switch held", lambda: _accepted(cluster).get("reason") == "StateSwitchHeld")
    held = _accepted(cluster)
    assert held["status"] == "False"
    assert ("the runtime has 1 pending request(s)" in held["message"]
            and f"kubectl annotate agent -n {NS} file-manager {FORCE}=postgres" in held["message"]), held["message"]
    assert _store(cluster) == "sqlite:file-manager-state", "the old pods keep serving what is pending"
    events = cluster.kubectl("get", "events", "-n", NS, "--field-selector=reason=StateSwitchHeld,type=Warning",
                             "-o", "name")
    assert events.stdout.strip(), "a Warning Event says it too"

    # An annotation naming another kind forces nothing.
    wrong = cluster.kubectl("annotate", "agent", "file-manager", "-n", NS, f"{FORCE}=ephemeral")
    assert wrong.returncode == 0, wrong.stderr
    time.sleep(2)  # what the operator does with it (nothing) has no other sign
    assert _accepted(cluster).get("reason") == "StateSwitchHeld" and _store(cluster) == "sqlite:file-manager-state"

    forced = cluster.kubectl("annotate", "--overwrite", "agent", "file-manager", "-n", NS, f"{FORCE}=postgres")
    assert forced.returncode == 0, forced.stderr
    wait("the forced switch applied", lambda: _store(cluster) == "postgres:files-db")
    wait("the Agent accepted again", lambda: _accepted(cluster).get("status") == "True")
