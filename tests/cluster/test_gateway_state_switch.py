"""Switching an MCPGateway's state backend while it holds a call, on the real control plane (issue 38: the operator
holds a gateway's switch as an Agent's, tests/cluster/test_state_switch.py).

The chart's operator (one replica) reconciles the example gateway on sqlite. Its runtime's ServiceAccount -- the token
the operator's Role grants, the admission policy's rules for a gateway's held calls -- creates a ToolApproval naming
the gateway (``spec.gatewayRef``, the ``gatehouse.dev/gateway`` label) and marks it Pending, as the gateway does while
a call waits. The gateway is then switched to Postgres: the operator holds the switch (``Accepted=False``,
``StateSwitchHeld``, the message naming the gateway's label and ``kubectl annotate mcpgateway``, the Deployment left on
sqlite); a force annotation naming another kind forces nothing; once the runtime has deleted its held call and
written its count (``status.pendingApprovals`` 0, its own status write), the switch goes ahead by itself.
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

NS = "gateway-switch"
NAME = "files-gate"
EXAMPLES = Path(__file__).parents[2] / "examples"
FORCE = "gatehouse.dev/force-state-switch"
GATEWAY_PATH = f"/apis/gatehouse.dev/v1alpha1/namespaces/{NS}/mcpgateways/{NAME}"
APPROVALS = f"/apis/gatehouse.dev/v1alpha1/namespaces/{NS}/toolapprovals"
MERGE = {"Content-Type": "application/merge-patch+json"}


@pytest.fixture(scope="module")
def operator(cluster: Cluster, chart: Release, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replica]:
    with leading(cluster, chart, tmp_path_factory.mktemp("gateway-switch") / "operator.log") as replica:
        yield replica


def _gateway(cluster: Cluster) -> dict[str, Any]:
    return dict(json.loads(cluster.kubectl("get", "mcpgateway", NAME, "-n", NS, "-o", "json").stdout))


def _accepted(cluster: Cluster) -> dict[str, Any]:
    conditions = (_gateway(cluster).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "Accepted"), {})


def _store(cluster: Cluster) -> str:
    """What the running Deployment's pods keep their state in: ``sqlite:<claim>`` or ``postgres:<secret>``."""
    pod = json.loads(cluster.kubectl("get", "deployment", NAME, "-n", NS, "-o", "json").stdout)["spec"]["template"]["spec"]
    for container in pod["containers"]:
        for env in container.get("env", []):
            if env["name"] == "GATEHOUSE_DATABASE_URL":
                return f"postgres:{env['valueFrom']['secretKeyRef']['name']}"
    claims = [v["persistentVolumeClaim"]["claimName"] for v in pod.get("volumes", []) if "persistentVolumeClaim" in v]
    return f"sqlite:{','.join(claims)}"


def test_a_gateways_switch_with_a_held_call_is_held_until_nothing_is_pending(
    cluster: Cluster, operator: Replica
) -> None:
    assert cluster.kubectl("create", "namespace", NS).returncode == 0
    docs = [yaml.safe_load((EXAMPLES / path).read_text())
            for path in ("file-manager/mcp-server.yaml", "gateway/gateway.yaml")]
    for doc in docs:
        doc["metadata"]["namespace"] = NS
    assert cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(docs)).returncode == 0
    wait("the gateway accepted on sqlite", lambda: _accepted(cluster).get("status") == "True")
    assert _store(cluster) == f"sqlite:{NAME}-state"

    # The gateway's runtime (its own ServiceAccount, the operator's Role) records a call held for a person.
    runtime = rest.client(cluster.service_account(NS, NAME))
    held = copy.deepcopy(cases.HELD)
    held["metadata"]["namespace"] = NS
    made = runtime.post(APPROVALS, json=held)
    assert made.status_code == 201, made.text
    name = held["metadata"]["name"]
    pending = runtime.patch(f"{APPROVALS}/{name}/status", json={"status": cases.PENDING}, headers=MERGE)
    assert pending.status_code == 200, pending.text
    counted = runtime.patch(f"{GATEWAY_PATH}/status", json={"status": {"pendingApprovals": 1}}, headers=MERGE)
    assert counted.status_code == 200, counted.text

    secret = cluster.kubectl("create", "secret", "generic", "gate-db", "-n", NS,
                             "--from-literal=url=postgresql+asyncpg://gatehouse:pw@postgres.db.svc:5432/gatehouse")
    assert secret.returncode == 0, secret.stderr
    switch = {"spec": {"state": {"sqlite": None, "postgres": {"urlSecretRef": {"name": "gate-db"}}}}}
    patched = cluster.kubectl("patch", "mcpgateway", NAME, "-n", NS, "--type=merge", "-p", json.dumps(switch))
    assert patched.returncode == 0, patched.stderr

    wait("the switch held", lambda: _accepted(cluster).get("reason") == "StateSwitchHeld")
    accepted = _accepted(cluster)
    assert accepted["status"] == "False"
    message = accepted["message"]
    assert "the runtime has 1 pending request(s)" in message, message
    assert f"-l gatehouse.dev/gateway={NAME}" in message, message
    assert f"kubectl annotate mcpgateway -n {NS} {NAME} {FORCE}=postgres" in message, message
    assert _store(cluster) == f"sqlite:{NAME}-state", "the old pods keep serving the held call"

    # An annotation naming another kind forces nothing.
    wrong = cluster.kubectl("annotate", "mcpgateway", NAME, "-n", NS, f"{FORCE}=ephemeral")
    assert wrong.returncode == 0, wrong.stderr
    time.sleep(2)  # what the operator does with it (nothing) has no other sign
    assert _accepted(cluster).get("reason") == "StateSwitchHeld" and _store(cluster) == f"sqlite:{NAME}-state"

    # The call is decided and gone: the runtime deletes its ToolApproval and writes its count, its own status write.
    gone = runtime.delete(f"{APPROVALS}/{name}")
    assert gone.status_code == 200, gone.text
    counted = runtime.patch(f"{GATEWAY_PATH}/status", json={"status": {"pendingApprovals": 0}}, headers=MERGE)
    assert counted.status_code == 200, counted.text
    wait("the switch applied by itself", lambda: _store(cluster) == "postgres:gate-db", timeout=30)
    wait("the gateway accepted again", lambda: _accepted(cluster).get("status") == "True")
    log = operator.log.read_text()
    assert "Forbidden" not in log and " 403" not in log, log[-3000:]
