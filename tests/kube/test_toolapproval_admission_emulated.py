"""The chart's ToolApproval admission policy in the emulated API server: every case of
tests/support/toolapproval_admission.py sent as a real HTTP request (POST, PUT, PUT of ``/status``, DELETE) by the
case's user, and answered as the table says. The same table runs on cel-python alone in
tests/chart/test_admission_policy.py; this is the second backend, and the pattern for a real kube-apiserver.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support import helm as helm_support
from tests.support.kube_server import RunningEmulator, serve
from tests.support.toolapproval_admission import CASES, Case

pytestmark = pytest.mark.e2e  # the emulated API server on 127.0.0.1

TOOLAPPROVALS = "gatehouse.dev/v1alpha1/toolapprovals"


@pytest.fixture(scope="module")
def api() -> Iterator[RunningEmulator]:
    with serve() as running:
        assert running.emulator.add_admission_documents(helm_support.admission_policy_documents()) == 1
        yield running


def _named(case: Case, name: str) -> Case:
    """The case on an object of its own name, so the cases share one server."""
    def rename(obj: dict[str, Any] | None) -> dict[str, Any] | None:
        if obj is None:
            return None
        out = copy.deepcopy(obj)
        out["metadata"]["name"] = name
        return out

    return dataclasses.replace(case, old=rename(case.old), new=rename(case.new))


def _send(api: RunningEmulator, case: Case) -> httpx.Response:
    emulator = api.emulator
    resource_version = None
    if case.old is not None:
        stored = api.call(lambda: emulator.seed(TOOLAPPROVALS, case.old))  # past admission, status and all
        resource_version = stored["metadata"]["resourceVersion"]
    token = api.call(lambda: emulator.add_user(case.user, case.groups))
    method, path, body = case.http(resource_version)
    with httpx.Client(base_url=api.url, headers={"Authorization": f"Bearer {token}"}, timeout=10) as client:
        return client.request(method, path, json=body)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_each_case_as_an_http_request(api: RunningEmulator, case: Case) -> None:
    case = _named(case, "case-" + re.sub(r"[^a-z0-9]+", "-", case.id.lower()).strip("-")[:50])
    response = _send(api, case)
    if case.refused is None:
        assert response.is_success, response.text
        return
    assert response.status_code in (403, 422), response.text
    message = response.json()["message"]
    assert "ValidatingAdmissionPolicy 'gh-gatehouse-toolapproval-decision'" in message
    assert case.refused in message
    if case.operation == "DELETE" or case.subresource == "status":  # nothing changed: the object is as stored
        stored = api.call(lambda: api.emulator.get_object(TOOLAPPROVALS, case.namespace, case.name))
        assert stored is not None and stored.get("status") == (case.old or {}).get("status")
