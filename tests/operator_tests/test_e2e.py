"""End-to-end: the real operator against the emulated API, driven with kubectl and the kubernetes client."""

from __future__ import annotations

import json

import pytest

from tests.operator_tests.conftest import EXAMPLE, wait_for

pytestmark = pytest.mark.e2e


def _condition(kube_api, name: str, type_: str) -> dict | None:
    agent = kube_api.emulator.get_object("gatehouse.dev/v1alpha1/agents", "default", name)
    for c in (agent or {}).get("status", {}).get("conditions", []):
        if c["type"] == type_:
            return c
    return None


def test_example_is_reconciled(kube_api, kubectl, operator) -> None:
    kubectl("apply", "--validate=false", "-f", str(EXAMPLE))
    wait_for(lambda: (_condition(kube_api, "file-manager", "Accepted") or {}).get("status") == "True", what="Accepted")
    out = kubectl("get", "agents", "file-manager", "-o", "json")
    open("/tmp/dbg.txt","w").write(json.dumps(json.loads(out)["status"], indent=1))
    open("/tmp/dbg.txt","a").write(kubectl("get", "deployments,services,secrets,serviceaccounts,roles,rolebindings") + str(len(kube_api.emulator.writes())) + "\n" + "\n".join(f"{r.method.value} {r.url.path}" for r in kube_api.emulator.writes()))
