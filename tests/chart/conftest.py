"""Fixtures for the chart tests: a real helm binary and the chart rendered with it."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import helm as helm_support

CHART = helm_support.REPO / "charts" / "gatehouse"
RELEASE = "gh"
RELEASE_NAMESPACE = "gatehouse-system"

# The values sets every rendering test runs with: defaults, and an operator limited to two namespaces.
VALUES_SETS: dict[str, list[str]] = {
    "defaults": [],
    "watched-namespaces": ["--set", "operator.watchNamespaces={team-a,team-b}"],
}

Render = Callable[..., list[dict[str, Any]]]


@pytest.fixture(scope="session")
def helm() -> Path:
    try:
        return helm_support.helm_binary()
    except helm_support.HelmUnavailable as exc:
        pytest.skip(f"no helm binary: {exc}")


def run_helm(helm: Path, *args: str) -> str:
    proc = subprocess.run([str(helm), *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"helm {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


@pytest.fixture(scope="session")
def render(helm: Path) -> Render:
    """``render(*helm_args)`` -> every document of ``helm template --include-crds`` (cached per args)."""
    cache: dict[tuple[str, ...], list[dict[str, Any]]] = {}

    def _render(*args: str) -> list[dict[str, Any]]:
        if args not in cache:
            out = run_helm(helm, "template", RELEASE, str(CHART), "--include-crds", "--namespace", RELEASE_NAMESPACE, *args)
            cache[args] = [doc for doc in yaml.safe_load_all(out) if doc]
        return cache[args]

    return _render


@pytest.fixture(params=sorted(VALUES_SETS), ids=str)
def rendered(request: pytest.FixtureRequest, render: Render) -> list[dict[str, Any]]:
    """The rendered chart, once per entry of VALUES_SETS."""
    return render(*VALUES_SETS[request.param])


def of_kind(docs: list[dict[str, Any]], *kinds: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] in kinds]


TOOLAPPROVAL_POLICY = f"{RELEASE}-gatehouse-toolapproval-decision"


def toolapproval_policy(docs: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ToolApproval ValidatingAdmissionPolicy and its binding (the chart may render other policies too)."""
    (policy,) = [d for d in of_kind(docs, "ValidatingAdmissionPolicy") if d["metadata"]["name"] == TOOLAPPROVAL_POLICY]
    (binding,) = [d for d in of_kind(docs, "ValidatingAdmissionPolicyBinding")
                  if d["spec"]["policyName"] == TOOLAPPROVAL_POLICY]
    return policy, binding
