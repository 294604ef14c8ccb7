"""The CRDs' schemas and CEL rules on the real API server, against what tests/support/crd_validation.py (cel-python
and jsonschema, which the emulated API server runs) says about the same documents.

The documents are the translator's golden cases (tests/testdata/translator/<case>/input.yaml) and their verdicts
``crd.json``: each is created with a server-side dry run and must be admitted exactly when ``crd.json`` has no
problem for it, and refused with each of its problems (the field path, and a CEL rule's message).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.support.cluster import Cluster, rest
from tests.support.cluster.chart import Release

pytestmark = pytest.mark.e2e

CASES = Path(__file__).parents[1] / "testdata" / "translator"
PLURALS = {"Agent": "agents", "ModelConfig": "modelconfigs", "RemoteMCPServer": "remotemcpservers"}


def _documents() -> list[tuple[str, dict[str, Any], list[str]]]:
    out = []
    for case in sorted(p for p in CASES.iterdir() if (p / "crd.json").exists()):
        verdicts = json.loads((case / "crd.json").read_text())
        for doc in yaml.safe_load_all((case / "input.yaml").read_text()):
            if doc:
                key = f"{doc['kind']}/{doc['metadata']['name']}"
                out.append((f"{case.name}:{key}", doc, verdicts[key]))
    return out


DOCUMENTS = _documents()


@pytest.fixture(scope="module")
def admin(cluster: Cluster, chart: Release) -> httpx.Client:
    for namespace in {d["metadata"].get("namespace", "default") for _, d, _ in DOCUMENTS}:
        cluster.kubectl("create", "namespace", namespace)
    return rest.client(cluster.kubeconfig())


def _path_and_rule(problem: str) -> tuple[str, str]:
    """``spec.a[0].b: message`` -> (``spec.a[0].b``, ``message``)."""
    path, _, message = problem.partition(": ")
    return path, message


@pytest.mark.parametrize(("doc", "problems"), [d[1:] for d in DOCUMENTS], ids=[d[0] for d in DOCUMENTS])
def test_the_real_api_server_validates_as_the_emulator(
    admin: httpx.Client, doc: dict[str, Any], problems: list[str],
) -> None:
    namespace = doc["metadata"].get("namespace", "default")
    group, version = doc["apiVersion"].split("/")
    reply = admin.post(f"/apis/{group}/{version}/namespaces/{namespace}/{PLURALS[doc['kind']]}",
                       params={"dryRun": "All"}, json=doc)
    if not problems:
        assert reply.status_code == 201, f"the emulator admits it, the API server refused it: {rest.message(reply)}"
        return
    assert reply.status_code == 422, f"the emulator refuses it ({problems}), the API server answered {reply.status_code}"
    causes = [(c.get("field", ""), c.get("message", "")) for c in reply.json().get("details", {}).get("causes", [])]
    for problem in problems:
        path, rule = _path_and_rule(problem)
        at_path = [message for field, message in causes if field == path]
        assert at_path, f"the API server names no problem at {path} ({problem!r}); it named {causes}"
        if not re.search(r"does not match|is not one of|is a required property|is not of type", rule):
            # A CEL rule: its message is the API server's too. (Schema errors are worded by each side its own way.)
            assert any(rule in message for message in at_path), f"{problem!r} vs {at_path}"
    assert len(causes) == len(problems), f"the API server named {causes}, the emulator {problems}"
