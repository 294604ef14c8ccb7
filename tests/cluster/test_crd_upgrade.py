"""How the CRDs are upgraded: helm installs charts/gatehouse/crds/ once and never upgrades them, so the next
release's CRDs are applied by hand before ``helm upgrade``. On a cluster where helm 4 installed them (a server-side
apply, field manager ``helm``) a plain ``kubectl apply --server-side`` of a changed CRD conflicts with helm's
ownership; ``--force-conflicts`` is the documented command (docs/operator.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.cluster import Cluster
from tests.support.cluster.chart import CHART, Release, helm

pytestmark = pytest.mark.e2e


def _next_release_crds(directory: Path) -> Path:
    """charts/gatehouse/crds/ with one change the next release might make: a new optional field in Agent.spec."""
    directory.mkdir()
    for path in (CHART / "crds").glob("*.yaml"):
        crd: dict[str, Any] = yaml.safe_load(path.read_text())
        if crd["spec"]["names"]["kind"] == "Agent":
            spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
            spec["properties"]["nextReleaseField"] = {"type": "string"}
        (directory / path.name).write_text(yaml.safe_dump(crd))
    return directory


def _agent_fields(cluster: Cluster) -> set[str]:
    crd = json.loads(cluster.kubectl("get", "crd", "agents.gatehouse.dev", "-o", "json").stdout)
    return set(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"])


def test_the_next_releases_crds_are_applied_then_helm_upgrades(cluster: Cluster, chart: Release, tmp_path: Path) -> None:
    managers = json.loads(cluster.kubectl("get", "crd", "agents.gatehouse.dev", "--show-managed-fields",
                                          "-o", "json").stdout)["metadata"]["managedFields"]
    assert ("helm", "Apply") in {(m["manager"], m["operation"]) for m in managers}
    crds = _next_release_crds(tmp_path / "crds")

    conflict = cluster.kubectl("apply", "--server-side", "-f", str(crds))
    assert conflict.returncode == 1 and 'conflict with "helm"' in conflict.stderr, conflict.stderr
    assert "nextReleaseField" not in _agent_fields(cluster)

    applied = cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(crds))
    assert applied.returncode == 0, applied.stderr
    assert "nextReleaseField" in _agent_fields(cluster)
    upgraded = helm(cluster, "upgrade", chart.name, str(CHART), "-n", chart.namespace)
    assert upgraded.returncode == 0, upgraded.stderr
    assert "nextReleaseField" in _agent_fields(cluster), "helm upgrade left the CRDs as they were applied"

    restored = cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CHART / "crds"))
    assert restored.returncode == 0, restored.stderr
