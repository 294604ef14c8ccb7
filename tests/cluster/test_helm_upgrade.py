"""``helm upgrade`` with an approval pending, on the real control plane (issue 32, lifecycle).

The session's release is today's chart. The next release is a copy of it with one more operator replica and one change
in ``crds/`` (a new optional field in Agent.spec). A ToolApproval is pending, created and
marked Pending by its Agent's runtime (the runtime's ServiceAccount). Then, as docs/cluster.md#upgrading says:

1. ``helm upgrade`` alone: the release moves on, the CRDs do not (Helm installs ``crds/`` once and never upgrades
   them), and the pending ToolApproval is not touched (same resourceVersion);
2. ``kubectl apply --server-side --force-conflicts -f crds/``: the new field is served, the ToolApproval still the same;
3. alice approves it with ``kubectl gatehouse approve`` through the upgraded admission policy; bob is still refused.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import toolapproval_admission as cases
from tests.support.cluster import Cluster, rest
from tests.support.cluster.chart import CHART, Release, helm

pytestmark = pytest.mark.e2e

NS = "story-upgrade"


def _next_release(root: Path) -> Path:
    chart = root / "gatehouse"
    shutil.copytree(CHART, chart)
    # The chart's version is left as it is: it is in every object's helm.sh/chart label, and the admission policy
    # tests re-create the policy's binding as the admin (field manager python-httpx), which helm 4's server-side apply
    # would then refuse to relabel ("conflict with python-httpx") -- as it refuses any field someone else applied.
    for path in (chart / "crds").glob("*.yaml"):
        crd: dict[str, Any] = yaml.safe_load(path.read_text())
        if crd["spec"]["names"]["kind"] == "Agent":
            spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
            spec["properties"]["nextReleaseField"] = {"type": "string"}
            path.write_text(yaml.safe_dump(crd))
    return chart


def _agent_fields(cluster: Cluster) -> set[str]:
    crd = json.loads(cluster.kubectl("get", "crd", "agents.gatehouse.dev", "-o", "json").stdout)
    return set(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"])


def _approval(cluster: Cluster, name: str) -> dict[str, Any]:
    return dict(json.loads(cluster.kubectl("get", "toolapproval", name, "-n", NS, "-o", "json").stdout))


def _kubectl_gatehouse(cluster: Cluster, user: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig(user)),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run([str(cluster.kubectl_path), "gatehouse", *args], capture_output=True, text=True, env=env,
                          timeout=60)


def test_helm_upgrade_with_an_approval_pending_loses_nothing(cluster: Cluster, chart: Release, tmp_path: Path) -> None:
    for args in (("create", "namespace", NS),
                 ("create", "role", "runtime", "-n", NS, "--verb=create,get,list,watch,patch",
                  "--resource=toolapprovals.gatehouse.dev,toolapprovals.gatehouse.dev/status"),
                 ("create", "rolebinding", "runtime", "-n", NS, "--role=runtime", f"--serviceaccount={NS}:file-manager"),
                 ("create", "rolebinding", "sre-approves", "-n", NS, "--clusterrole=gatehouse-approver", "--group=sre")):
        made = cluster.kubectl(*args)
        assert made.returncode == 0, made.stderr
    runtime = rest.client(cluster.service_account(NS, "file-manager"))
    body = copy.deepcopy(cases.CREATED)
    body["metadata"]["namespace"] = NS
    name = body["metadata"]["name"]
    base = f"/apis/gatehouse.dev/v1alpha1/namespaces/{NS}/toolapprovals"
    assert runtime.post(base, json=body).status_code == 201
    marked = runtime.patch(f"{base}/{name}/status", json={"status": cases.PENDING},
                           headers={"Content-Type": "application/merge-patch+json"})
    assert marked.status_code == 200, marked.text
    before = _approval(cluster, name)
    revision = json.loads(helm(cluster, "status", chart.name, "-n", chart.namespace, "-o", "json").stdout)["version"]

    nxt = _next_release(tmp_path)
    upgraded = helm(cluster, "upgrade", chart.name, str(nxt), "-n", chart.namespace, "--reuse-values",
                    "--set", "operator.replicas=3")
    assert upgraded.returncode == 0, upgraded.stderr
    status = json.loads(helm(cluster, "status", chart.name, "-n", chart.namespace, "-o", "json").stdout)
    assert (status["version"], status["info"]["status"]) == (revision + 1, "deployed")
    deployment = json.loads(cluster.kubectl("get", "deployment", f"{chart.fullname}-operator", "-n", chart.namespace,
                                            "-o", "json").stdout)
    assert deployment["spec"]["replicas"] == 3, "the release's templates were upgraded"
    assert "nextReleaseField" not in _agent_fields(cluster), "helm upgrade does not upgrade crds/"
    assert _approval(cluster, name)["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]

    try:
        applied = cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(nxt / "crds"))
        assert applied.returncode == 0, applied.stderr
        assert "nextReleaseField" in _agent_fields(cluster)
        after = _approval(cluster, name)
        assert (after["spec"], after["status"]) == (before["spec"], before["status"])

        refused = _kubectl_gatehouse(cluster, "bob", "approve", name, "-n", NS, "--wait", "0")
        assert refused.returncode == 1, refused.stdout
        voted = _kubectl_gatehouse(cluster, "alice", "approve", name, "-n", NS, "--wait", "0")
        assert voted.returncode == 0, voted.stdout + voted.stderr
        (vote,) = _approval(cluster, name)["spec"]["votes"]
        assert (vote["by"], vote["action"]) == ("alice", "Approve")
    finally:  # today's CRDs and release back, for the tests after this one
        cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CHART / "crds"))
        helm(cluster, "upgrade", chart.name, str(CHART), "-n", chart.namespace, "--reuse-values",
             "--set", "operator.replicas=2")
