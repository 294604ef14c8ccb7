"""End-to-end: the operator follows the state claims it labels, against the emulated API server.

Nothing but the claim tells when it binds (no pod has to run for that, so no Deployment event follows): its watch
event brings ``StateReady`` up to date. Here the test plays the volume controller (the emulator has none), and the
resync is an hour away, so whatever the operator does, its claim watch did.

- An operator started over an Agent and its unbound claim (an upgrade: the claim made before it ran) follows the
  claim from then on: the start-up reconcile reads it, its binding shows with a read of the Agent and a status patch.
  Its list and watch of claims carry a label selector: the API server sends it no other claim.
- A claim deleted by hand while its Agent stands is made anew at once, not at the next resync.
"""

from __future__ import annotations

import kubernetes
import pytest

from tests.gatehouse_operator.conftest import Kubectl, OperatorProcess, wait_for
from tests.gatehouse_operator.test_e2e import NS, Cluster, _apply_example, _settle
from tests.gatehouse_operator.test_e2e_deployment_status import CLAIM, NAME, _bind_claim, _operators
from tests.support.kube_server import RunningEmulator

pytestmark = pytest.mark.e2e


@pytest.fixture
def cluster(kube: kubernetes.client.ApiClient) -> Cluster:
    return Cluster(kube)


def _state_ready(cluster: Cluster) -> tuple[str, str]:
    condition = cluster.condition(NAME, "StateReady")
    return condition.get("status", ""), condition.get("reason", "")


def test_an_operator_started_over_an_existing_unbound_claim_follows_it(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, cluster: Cluster
) -> None:
    _apply_example(kubectl)
    cluster.wait_accepted(NAME)
    assert _state_ready(cluster) == ("False", "ClaimPending")
    operator.stop()  # the release before: the Agent, its children and its unbound claim stay as it left them
    operator.start()  # the release after: it lists the claims as it starts, and reconciles the Agent (resume)
    _settle(kube_api)

    mark = kube_api.emulator.request_count
    _bind_claim(cluster)  # no Deployment event, no Agent event: the claim's own
    _settle(kube_api)
    # but the test's own claim write, and the start-up's clean-up of TokenReview rights, which may come meanwhile
    sent = [s for s in _operators(kube_api, mark)
            if s != ("PATCH", "persistentvolumeclaims", "status") and s[1] != "clusterrolebindings"]
    assert sorted(sent) == [("GET", "agents", None), ("PATCH", "agents", "status")], sent
    assert _state_ready(cluster) == ("True", "ClaimBound")
    # the operator's list and watch of claims ask for ours alone: the API server sends no other claim
    selectors = {(r.params.get("watch") is not None, r.params.get("labelSelector"))
                 for r in kube_api.emulator.requests_since(0)
                 if r.resource is not None and r.resource.plural == "persistentvolumeclaims" and r.name is None
                 and str(r.method.value) == "GET"}
    assert selectors == {(False, "app.kubernetes.io/managed-by=gatehouse-operator"),
                         (True, "app.kubernetes.io/managed-by=gatehouse-operator")}, selectors


def test_a_claim_deleted_by_hand_is_made_anew_at_once(
    kube_api: RunningEmulator, kubectl: Kubectl, operator: OperatorProcess, cluster: Cluster
) -> None:
    _apply_example(kubectl)
    cluster.wait_accepted(NAME)
    _settle(kube_api)
    first = cluster.core.read_namespaced_persistent_volume_claim(CLAIM, NS).metadata.uid
    cluster.core.delete_namespaced_persistent_volume_claim(CLAIM, NS)

    def made_anew() -> bool:
        try:
            return bool(cluster.core.read_namespaced_persistent_volume_claim(CLAIM, NS).metadata.uid != first)
        except kubernetes.client.ApiException as exc:
            if exc.status == 404:
                return False
            raise

    wait_for(made_anew, what="the state claim made anew", timeout=10)
    _settle(kube_api)
    assert _state_ready(cluster) == ("False", "ClaimPending")
