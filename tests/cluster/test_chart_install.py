"""charts/gatehouse on the real control plane: what ``helm install`` leaves, and RBAC deciding who may vote.

alice (group ``sre``, which the chart's ``gatehouse-approver`` ClusterRole is bound to here) approves a pending
ToolApproval with ``kubectl gatehouse approve``, through the real kubectl, RBAC and admission policy; bob, bound to
nothing, is refused by RBAC before the policy is asked.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support import toolapproval_admission as cases
from tests.support.cluster import Cluster, rest
from tests.support.cluster.chart import Release, helm

pytestmark = pytest.mark.e2e

NS = "approvals"


def test_helm_install_deploys_the_chart_and_its_crds_are_served(cluster: Cluster, chart: Release) -> None:
    status = helm(cluster, "status", chart.name, "-n", chart.namespace, "-o", "json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["info"]["status"] == "deployed"
    resources = cluster.kubectl("api-resources", "--api-group=gatehouse.dev", "-o", "name")
    assert set(resources.stdout.split()) == {"agents.gatehouse.dev", "mcpgateways.gatehouse.dev",
                                             "modelconfigs.gatehouse.dev", "remotemcpservers.gatehouse.dev",
                                             "toolapprovals.gatehouse.dev"}
    for kind in ("agents", "toolapprovals"):
        listed = cluster.kubectl("get", kind, "-n", chart.namespace)
        assert listed.returncode == 0 and "No resources found" in listed.stderr, listed
    policy = cluster.kubectl("get", "validatingadmissionpolicybinding", chart.policy, "-o", "json")
    assert json.loads(policy.stdout)["spec"]["validationActions"] == ["Deny"]
    deployment = cluster.kubectl("get", "deployment", "-n", chart.namespace, f"{chart.fullname}-operator", "-o", "json")
    assert deployment.returncode == 0, deployment.stderr


def test_the_crds_cel_refuses_a_require_approval_entry_not_in_tool_names(cluster: Cluster, chart: Release) -> None:
    agent = Path(__file__).parents[2] / "examples" / "file-manager" / "agent.yaml"
    typo = agent.read_text().replace("requireApproval: [delete_file, write_file]", "requireApproval: [delete_fiel]")
    assert "delete_fiel" in typo
    refused = cluster.kubectl("apply", "--dry-run=server", "-f", "-", stdin=typo)
    assert refused.returncode == 1
    assert ("every requireApproval entry must also be listed in toolNames of the same mcpServer"
            in refused.stderr), refused.stderr
    admitted = cluster.kubectl("apply", "--dry-run=server", "-f", str(agent))
    assert admitted.returncode == 0, admitted.stderr


@pytest.fixture(scope="module")
def pending(cluster: Cluster, chart: Release) -> str:
    """A ToolApproval in namespace ``approvals``, created by the agent's runtime (its ServiceAccount's token)."""
    cluster.kubectl("create", "namespace", NS)
    cluster.kubectl("create", "role", "runtime", "-n", NS, "--verb=create,get,list,watch",
                    "--resource=toolapprovals.gatehouse.dev")
    cluster.kubectl("create", "rolebinding", "runtime", "-n", NS, "--role=runtime",
                    f"--serviceaccount={NS}:file-manager")
    bound = cluster.kubectl("create", "rolebinding", "sre-approves", "-n", NS, "--clusterrole=gatehouse-approver",
                            "--group=sre")
    assert bound.returncode == 0, bound.stderr
    runtime = rest.client(cluster.service_account(NS, "file-manager"))
    body: dict[str, Any] = json.loads(json.dumps(cases.CREATED))
    body["metadata"]["namespace"] = NS
    reply = runtime.post(f"/apis/gatehouse.dev/v1alpha1/namespaces/{NS}/toolapprovals", json=body)
    assert reply.status_code == 201, reply.text
    return str(body["metadata"]["name"])


def _kubectl_gatehouse(cluster: Cluster, user: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``kubectl gatehouse …`` as ``user``: the real kubectl finding the plugin on PATH."""
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig(user)),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run([str(cluster.kubectl_path), "gatehouse", *args], capture_output=True, text=True, env=env,
                          timeout=60)


def test_a_user_without_the_approver_role_is_refused_by_rbac(cluster: Cluster, pending: str) -> None:
    refused = _kubectl_gatehouse(cluster, "bob", "approve", pending, "-n", NS, "--wait", "0")
    assert refused.returncode == 1
    assert (f'forbidden: you may not decide toolapproval "{pending}" in namespace "{NS}" (ask for a RoleBinding to '
            "the gatehouse-approver ClusterRole)") in " ".join((refused.stdout + refused.stderr).split()), refused
    patched = cluster.kubectl("patch", "toolapproval", pending, "-n", NS, "--type=merge", "-p", '{"spec":{}}', user="bob")
    assert f'User "bob" cannot get resource "toolapprovals" in API group "gatehouse.dev" in the namespace "{NS}"' \
        in patched.stderr, patched.stderr
    can = cluster.kubectl("auth", "can-i", "patch", "toolapprovals.gatehouse.dev", "-n", NS, user="bob")
    assert can.stdout.strip() == "no"


def test_alice_in_group_sre_votes_with_kubectl_gatehouse_approve(cluster: Cluster, pending: str) -> None:
    voted = _kubectl_gatehouse(cluster, "alice", "approve", pending, "-n", NS, "--wait", "0")
    assert voted.returncode == 0, voted.stdout + voted.stderr
    obj = json.loads(cluster.kubectl("get", "toolapproval", pending, "-n", NS, "-o", "json").stdout)
    (vote,) = obj["spec"]["votes"]
    assert (vote["by"], vote["action"], vote["groups"]) == ("alice", "Approve", ["sre", "system:authenticated"])
    again = _kubectl_gatehouse(cluster, "alice", "deny", pending, "-n", NS, "--reason", "changed my mind", "--wait", "0")
    assert again.returncode == 1, again.stdout
    assert f'you (alice) have already voted on toolapproval "{pending}"; a person counts once' in again.stderr
